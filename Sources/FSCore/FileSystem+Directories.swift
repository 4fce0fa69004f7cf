import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A snapshot of one directory's listing, taken at opendir. Offsets are
/// indices into `entries`, so they stay valid for the handle's lifetime
/// whatever happens in the bucket meanwhile.
///
/// The entries are made at the first readdir, not at opendir: when the
/// kernel still holds the directory's entries from an earlier opendir of
/// the same listing (`cache_readdir` + `keep_cache`), no readdir comes and
/// a warm `ls -l` of 100,000 entries costs no per-entry work here at all.
struct DirectoryHandle: Sendable {
    let inode: UInt64
    /// What the entries are made of (until they are made).
    var source: Source?
    var entries: [DirectoryEntry] = []
    /// Inodes handed out in `entries`, pinned until releasedir so that a
    /// readdirplus entry the bridge counts later is still known.
    var pinned: [UInt64] = []

    struct Source: Sendable {
        let path: String
        let listed: String
        let listing: ListingCache.Listing
    }
}

extension FileSystem {
    /// readdir returns at most this many entries per call (the bridge packs
    /// what fits and the kernel asks again), so a huge directory is not
    /// copied whole on every call.
    static let readdirBatch = 512

    /// Reads the whole listing (every page), fills the stat cache from it,
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
        return state.withLock { s in
            let unchanged = s.inodes.noteListing(inode, readAt: listing.readAt)
            let writing = s.staged.keys.contains { s.inodes[$0].map { PathRules.parent(of: $0.path) == directory.path } ?? false }
            var handle = DirectoryHandle(inode: inode, source: .init(path: directory.path, listed: listed, listing: listing))
            if !unchanged || writing || !cacheable { makeEntries(&handle, &s) }
            let number = s.nextHandle
            s.nextHandle += 1
            s.directories[number] = handle
            return OpenReply(handle: number, keepCache: cacheable && unchanged && !writing, cacheDirectory: cacheable)
        }
    }

    /// Makes the entries of `handle` from its listing: fills the stat cache
    /// (as fresh as the listing), resolves and pins each child's inode.
    private func makeEntries(_ handle: inout DirectoryHandle, _ s: inout State) {
        guard let source = handle.source else { return }
        handle.source = nil
        var children = source.listing.children(under: source.listed, logger: logger)
        mergeStaged(into: &children, directory: source.path, s)
        let now = clock.now
        // Attributes from the listing are as old as the listing.
        let readAt = min(now, source.listing.readAt)
        var entries: [DirectoryEntry] = []
        var pinned: [UInt64] = []
        entries.reserveCapacity(children.count + 2)
        pinned.reserveCapacity(children.count)
        let inode = handle.inode
        let parentInode = inode == InodeTable.root
            ? inode : s.inodes.inode(forPath: PathRules.parent(of: source.path)) ?? inode
        for (name, dotInode) in [(".", inode), ("..", parentInode)] {
            let dot = directoryAttributes(dotInode, s, now: now)
            entries.append(DirectoryEntry(name: name, entry: entryReply(dot), nextOffset: Int64(entries.count + 1)))
        }
        for (name, node, staged) in children {
            let path = PathRules.join(source.path, name)
            var known = node
            if !staged {
                s.stats.insert(path, node, now: readAt)
                // The cache may know more than the listing (a directory's
                // placeholder metadata); use that.
                if case .directory = node, let cached = s.stats.lookup(path, now: now) { known = cached }
            }
            let child = s.inodes.resolveAndPin(path, kind: node.kind!)
            pinned.append(child)
            entries.append(DirectoryEntry(
                name: name, entry: entryReply(attributes(known, inode: child, s)!), nextOffset: Int64(entries.count + 1)))
        }
        handle.entries = entries
        handle.pinned = pinned
    }

    public func readdir(_ inode: UInt64, handle: UInt64, offset: Int64) async throws(FSError) -> [DirectoryEntry] {
        try state.withLock { s throws(FSError) in
            guard var directory = s.directories[handle] else { throw FSError(.badHandle, "no directory handle \(handle)") }
            guard offset >= 0 else { throw FSError(.invalid, "readdir offset \(offset)") }
            if directory.source != nil {
                s.directories[handle] = nil  // changed in place, not copied
                makeEntries(&directory, &s)
                s.directories[handle] = directory
            }
            let start = Int(min(offset, Int64(directory.entries.count)))
            let end = min(directory.entries.count, start + Self.readdirBatch)
            return Array(directory.entries[start..<end])
        }
    }

    public func releasedir(_ inode: UInt64, handle: UInt64) {
        state.withLock { s in
            guard let directory = s.directories.removeValue(forKey: handle) else { return }
            for child in directory.pinned { s.inodes.unpin(child) }
            s.inodes.checkInvariants()
        }
    }

    /// Files being written in `directory` as their staged state shows them:
    /// new ones not uploaded yet appear, dirty ones show their local size;
    /// unlinked ones disappear. Marked `true`, so the stat cache keeps only
    /// what the store said.
    private func mergeStaged(into children: inout [(String, StatCache.Node, Bool)], directory: String, _ s: borrowing State) {
        var changed = false
        var byName = Dictionary(children.map { ($0.0, ($0.1, $0.2)) }, uniquingKeysWith: { a, _ in a })
        for (inode, staged) in s.staged {
            guard let record = s.inodes[inode], record.bound, PathRules.parent(of: record.path) == directory else { continue }
            let name = String(record.path.dropFirst(directory.isEmpty ? 0 : directory.count + 1))
            let file = staged.state(in: s)
            if file.isUnlinked {
                byName[name] = nil
            } else {
                byName[name] = (.file(file.view(objectName: objectName(record.path))), true)
            }
            changed = true
        }
        if changed { children = byName.map { ($0.key, $0.value.0, $0.value.1) }.sorted { $0.0 < $1.0 } }
    }

    private func directoryAttributes(_ inode: UInt64, _ s: borrowing State, now: Duration) -> FileAttributes {
        if inode != InodeTable.root, let path = s.inodes[inode]?.path,
            case .directory(let placeholder)? = s.stats.lookup(path, now: now)
        {
            return mapper.directory(placeholder: placeholder, inode: inode, changed: s.directoryTimes[inode])
        }
        return mapper.directory(placeholder: nil, inode: inode, changed: s.directoryTimes[inode])
    }
}
