import Foundation
#if canImport(Glibc)
import Glibc
#endif

extension FileSystem {
    /// readdir returns at most this many entries per call (the bridge packs
    /// what fits and the kernel asks again), so a huge directory is not
    /// copied whole on every call.
    static let readdirBatch = 512

    /// Reads the whole listing (every page), keeps its entries' metadata,
    /// and keeps it as the handle's snapshot: `ls -l` of N objects costs
    /// about N/1000 list requests and no per-object request.
    public func opendir(_ inode: UInt64) async throws(FSError) -> UInt64 {
        try await openDirectory(inode).handle
    }

    /// opendir, with what the kernel may cache: its readdir results always
    /// (`cache_readdir`), and the ones it holds from the last opendir
    /// (`keep_cache`) when this opendir sees the very same listing (no
    /// new listing since, nothing being written in the directory). The
    /// kernel drops them itself when this mount changes the directory.
    public func openDirectory(_ inode: UInt64) async throws(FSError) -> OpenReply {
        let directory = try record(inode)
        guard directory.kind == .directory else { throw FSError(.notDirectory, "opendir of file \(directory.path)") }
        let listed = PathRules.listingPrefix(objectPrefix, directory.path)
        let opening = try await listingReader.opening(of: listed, path: directory.path)
        let cacheable = options.statTTL > 0
        let now = clock.now
        return state.withLock { s in
            let number = s.nextHandle
            s.nextHandle += 1
            var handle = DirectoryHandle(inode: inode, source: nil)
            switch opening {
            case .listing(let listing):
                let unchanged = s.inodes.noteListing(inode, readAt: listing.readAt)
                let writing = s.staged.keys.contains { s.inodes[$0].map { PathRules.parent(of: $0.path) == directory.path } ?? false }
                handle.source = .init(path: directory.path, listed: listed, listing: listing)
                if !unchanged || writing || !cacheable {
                    let staged = stagedEntries(in: directory.path, s)
                    _ = handle.makeEntries(s.metadata, &s.inodes, staged: staged, now: now, directoryContext)
                }
                s.directories[number] = handle
                return OpenReply(handle: number, keepCache: cacheable && unchanged && !writing, cacheDirectory: cacheable)
            case .arriving(let first, let readAt):
                _ = s.inodes.noteListing(inode, readAt: readAt)
                let arrival = ListingArrival<CheckedContinuation<Void, Never>>(listed: listed, staged: stagedEntries(in: directory.path, s))
                handle.startArriving(path: directory.path, arrival, s.metadata, &s.inodes, now: now, directoryContext)
                let task = Task { await self.receiveListing(handle: number, listed: listed, path: directory.path, after: first) }
                handle.arrivalTask = task
                s.metadata.listingArriving(listed, handle: number, task: task, readAt: readAt)
                let arrived = handle.appendArrived(first, path: directory.path, s.metadata, &s.inodes, now: now, directoryContext)
                assert(arrived.resume.isEmpty, "no readdir of a handle not yet returned")
                s.metadata.listingPageArrived(listed, handle: number, arrived.listed, last: false, now: now)
                s.directories[number] = handle
                return OpenReply(handle: number, keepCache: false, cacheDirectory: cacheable)
            }
        }
    }

    /// Reads the rest of an arriving listing into directory handle
    /// `handle`, page by page, and into the listing kept of its directory
    /// (`Listings.arrivedPage`). Cancelled when the handle is released
    /// first.
    private func receiveListing(handle: UInt64, listed: String, path: String, after first: ListPage) async {
        do {
            try await listingReader.rest(of: listed, path: path, after: first) { page in
                let now = clock.now
                let resume = state.withLock { s in
                    guard var directory = s.directories.removeValue(forKey: handle) else {
                        s.metadata.listingArrivalEnded(listed, handle: handle)
                        return [CheckedContinuation<Void, Never>]()
                    }
                    // Taken out and put back: changed in place, not copied.
                    defer { s.directories[handle] = directory }
                    let arrived = directory.appendArrived(page, path: path, s.metadata, &s.inodes, now: now, directoryContext)
                    s.metadata.listingPageArrived(listed, handle: handle, arrived.listed, last: page.nextPageToken == nil, now: now)
                    return arrived.resume
                }
                for waiter in resume { waiter.resume() }
            }
        } catch {
            let resume = state.withLock { s in
                s.metadata.listingArrivalEnded(listed, handle: handle)
                return s.directories[handle]?.arrival?.failed(error) ?? []
            }
            for waiter in resume { waiter.resume() }
        }
    }

    public func readdir(_ inode: UInt64, handle: UInt64, offset: Int64) async throws(FSError) -> [DirectoryEntry] {
        while true {
            switch try entries(of: handle, from: offset, now: clock.now) {
            case .entries(let entries): return entries
            case .wait(let waiter): try await waitForPage(handle: handle, waiter: waiter, offset: offset)
            case .relist: return try await relist(handle: handle, from: offset)
            }
        }
    }

    /// The cache lost metadata the handle's kept listing points to since
    /// opendir: the handle reads its listing again, from the store.
    private func relist(handle: UInt64, from offset: Int64) async throws(FSError) -> [DirectoryEntry] {
        guard let source = state.withLock({ $0.directories[handle]?.source }) else {
            throw FSError(.badHandle, "no directory handle \(handle)")
        }
        let listing = try await listingReader.readListing(of: source.listed, path: source.path)
        state.withLock { s in
            s.directories[handle]?.source = DirectoryHandle.Source(path: source.path, listed: source.listed, listing: .read(listing))
        }
        guard case .entries(let entries) = try entries(of: handle, from: offset, now: clock.now) else {
            throw FSError(.ioError, "readdir of \(source.path): no entries from a listing just read")
        }
        return entries
    }

    /// What readdir of a directory handle gets now.
    private enum ReaddirStep {
        case entries([DirectoryEntry])
        /// Its listing is still arriving: wait for the next page, as this
        /// waiter (`ListingArrival.newWaiter`).
        case wait(UInt64)
        /// Its kept listing cannot make its entries any more.
        case relist
    }

    /// The entries of directory handle `handle` from `offset` on, made
    /// first if they are not yet.
    private func entries(of handle: UInt64, from offset: Int64, now: Duration) throws(FSError) -> ReaddirStep {
        try state.withLock { s throws(FSError) -> ReaddirStep in
            guard var directory = s.directories.removeValue(forKey: handle) else { throw FSError(.badHandle, "no directory handle \(handle)") }
            // Taken out and put back: changed in place, not copied.
            defer { s.directories[handle] = directory }
            guard offset >= 0 else { throw FSError(.invalid, "readdir offset \(offset)") }
            if let source = directory.source {
                let staged = stagedEntries(in: source.path, s)
                guard directory.makeEntries(s.metadata, &s.inodes, staged: staged, now: now, directoryContext) else { return .relist }
            }
            switch directory.arrival?.answer(offset: offset, available: directory.entries.count) {
            case .wait?: return .wait(directory.arrival!.newWaiter())
            case .fail(let error)?: throw error
            case .entries?, nil: return .entries(directory.entries(from: offset, batch: Self.readdirBatch))
            }
        }
    }

    /// Waits until the next page of handle `handle`'s listing (or its end)
    /// arrives, as waiter `waiter`; EINTR when the kernel interrupts the
    /// readdir first.
    private func waitForPage(handle: UInt64, waiter: UInt64, offset: Int64) async throws(FSError) {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let waiting = state.withLock { s in
                    guard let available = s.directories[handle]?.entries.count else { return false }
                    return s.directories[handle]?.arrival?.wait(waiter, continuation, offset: offset, available: available) ?? false
                }
                guard waiting else { return continuation.resume() }
                // Cancelled before the waiter was registered: the handler
                // below found nothing to take.
                if Task.isCancelled { state.withLock { $0.directories[handle]?.arrival?.stopWaiting(waiter) }?.resume() }
            }
        } onCancel: {
            state.withLock { $0.directories[handle]?.arrival?.stopWaiting(waiter) }?.resume()
        }
        if Task.isCancelled { throw .interrupted("readdir of directory handle \(handle)") }
    }

    public func releasedir(_ inode: UInt64, handle: UInt64) {
        let waiters = state.withLock { s in
            guard var directory = s.directories.removeValue(forKey: handle) else { return [CheckedContinuation<Void, Never>]() }
            for child in directory.pinned { s.inodes.unpin(child) }
            s.inodes.checkInvariants()
            directory.arrivalTask?.cancel()
            return directory.arrival?.released() ?? []
        }
        for waiter in waiters { waiter.resume() }
    }

    /// The files being written in `directory`, as its readdir shows them.
    private func stagedEntries(in directory: String, _ s: borrowing State) -> [DirectoryHandle.StagedEntry] {
        s.staged.compactMap { inode, staged in
            guard let record = s.inodes[inode], record.bound, PathRules.parent(of: record.path) == directory else { return nil }
            let file = staged.state(in: s)
            let name = String(record.path.dropFirst(directory.isEmpty ? 0 : directory.count + 1))
            return DirectoryHandle.StagedEntry(name: name, file: file.visibility == .hidden ? nil : file.view(objectName: objectName(record.path)))
        }
    }

    /// What a directory handle takes from the file system to make its
    /// entries.
    var directoryContext: DirectoryHandle.Context {
        DirectoryHandle.Context(mapper: mapper, timeout: options.kernelTimeout, objectPrefix: objectPrefix, logger: logger)
    }
}
