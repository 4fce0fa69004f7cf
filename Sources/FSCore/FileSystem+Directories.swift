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
        let listing = try await listingReader.listing(of: listed, path: directory.path)
        let cacheable = options.statTTL > 0
        let now = clock.now
        return state.withLock { s in
            let unchanged = s.inodes.noteListing(inode, readAt: listing.readAt)
            let writing = s.staged.keys.contains { s.inodes[$0].map { PathRules.parent(of: $0.path) == directory.path } ?? false }
            var handle = DirectoryHandle(inode: inode, source: .init(path: directory.path, listed: listed, listing: listing))
            if !unchanged || writing || !cacheable {
                let staged = stagedEntries(in: directory.path, s)
                _ = handle.makeEntries(s.metadata, &s.inodes, staged: staged, now: now, directoryContext)
            }
            let number = s.nextHandle
            s.nextHandle += 1
            s.directories[number] = handle
            return OpenReply(handle: number, keepCache: cacheable && unchanged && !writing, cacheDirectory: cacheable)
        }
    }

    public func readdir(_ inode: UInt64, handle: UInt64, offset: Int64) async throws(FSError) -> [DirectoryEntry] {
        if let entries = try entries(of: handle, from: offset, now: clock.now) { return entries }
        // The cache lost metadata the handle's kept listing points to since
        // opendir: the handle reads its listing again, from the store.
        guard let source = state.withLock({ $0.directories[handle]?.source }) else {
            throw FSError(.badHandle, "no directory handle \(handle)")
        }
        let listing = try await listingReader.readListing(of: source.listed, path: source.path)
        state.withLock { s in
            s.directories[handle]?.source = DirectoryHandle.Source(path: source.path, listed: source.listed, listing: .read(listing))
        }
        guard let entries = try entries(of: handle, from: offset, now: clock.now) else {
            throw FSError(.ioError, "readdir of \(source.path): no entries from a listing just read")
        }
        return entries
    }

    /// The entries of directory handle `handle` from `offset` on, made
    /// first if they are not yet; nil when its kept listing cannot make
    /// them any more.
    private func entries(of handle: UInt64, from offset: Int64, now: Duration) throws(FSError) -> [DirectoryEntry]? {
        try state.withLock { s throws(FSError) -> [DirectoryEntry]? in
            guard var directory = s.directories[handle] else { throw FSError(.badHandle, "no directory handle \(handle)") }
            guard offset >= 0 else { throw FSError(.invalid, "readdir offset \(offset)") }
            if let source = directory.source {
                s.directories[handle] = nil  // changed in place, not copied
                let staged = stagedEntries(in: source.path, s)
                let made = directory.makeEntries(s.metadata, &s.inodes, staged: staged, now: now, directoryContext)
                s.directories[handle] = directory
                guard made else { return nil }
            }
            return directory.entries(from: offset, batch: Self.readdirBatch)
        }
    }

    public func releasedir(_ inode: UInt64, handle: UInt64) {
        state.withLock { s in
            guard let directory = s.directories.removeValue(forKey: handle) else { return }
            for child in directory.pinned { s.inodes.unpin(child) }
            s.inodes.checkInvariants()
        }
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
