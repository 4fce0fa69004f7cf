import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A snapshot of one directory's listing, taken at opendir. Offsets are
/// indices into `entries`, so they stay valid for the handle's lifetime
/// whatever happens in the bucket meanwhile.
struct DirectoryHandle: Sendable {
    let inode: UInt64
    let entries: [DirectoryEntry]
    /// Inodes handed out in `entries`, pinned until releasedir so that a
    /// readdirplus entry the bridge counts later is still known.
    let pinned: [UInt64]
}

extension FileSystem {
    /// readdir returns at most this many entries per call (the bridge packs
    /// what fits and the kernel asks again), so a huge directory is not
    /// copied whole on every call.
    static let readdirBatch = 512
    /// The store's largest page.
    static let listPageSize = 1000

    /// Reads the whole listing (every page), fills the stat cache from it,
    /// and keeps it as the handle's snapshot: `ls -l` of N objects costs
    /// about N/1000 list requests and no per-object request.
    public func opendir(_ inode: UInt64) async throws(FSError) -> UInt64 {
        let directory = try record(inode)
        guard directory.kind == .directory else { throw FSError(ENOTDIR, "opendir of file \(directory.path)") }
        let listed = PathRules.listingPrefix(objectPrefix, directory.path)
        let (prefixes, items) = try await listing(of: listed, path: directory.path)
        let children = children(listed: listed, prefixes: prefixes, items: items)
        let now = clock.now
        return state.withLock { s in
            var entries: [DirectoryEntry] = []
            var pinned: [UInt64] = []
            entries.reserveCapacity(children.count + 2)
            pinned.reserveCapacity(children.count)
            let parentInode = inode == InodeTable.root
                ? inode : s.inodes.inode(forPath: PathRules.parent(of: directory.path)) ?? inode
            for (name, dotInode) in [(".", inode), ("..", parentInode)] {
                let dot = directoryAttributes(dotInode, s, now: now)
                entries.append(DirectoryEntry(name: name, entry: entryReply(dot), nextOffset: Int64(entries.count + 1)))
            }
            for (name, node) in children {
                let path = PathRules.join(directory.path, name)
                s.stats.insert(path, node, now: now)
                // The cache may know more than the listing (a placeholder's
                // metadata); use that.
                let known = s.stats.lookup(path, now: now) ?? node
                let child = s.inodes.resolve(path, kind: node.kind!)
                s.inodes.pin(child)
                pinned.append(child)
                entries.append(DirectoryEntry(
                    name: name, entry: entryReply(attributes(known, inode: child)!), nextOffset: Int64(entries.count + 1)))
            }
            let handle = s.nextHandle
            s.nextHandle += 1
            s.directories[handle] = DirectoryHandle(inode: inode, entries: entries, pinned: pinned)
            return handle
        }
    }

    /// Every page of the listing of `listed`, or the cached one when it is
    /// younger than statTTL (0 turns the cache off).
    private func listing(of listed: String, path: String) async throws(FSError) -> ([String], [ObjectInfo]) {
        let ttl = Duration(seconds: options.statTTL)
        let started = clock.now
        if ttl > .zero, let cached = state.withLock({ $0.listings[listed] }), started - cached.readAt < ttl {
            return (cached.prefixes, cached.items)
        }
        var prefixes: [String] = []
        var items: [ObjectInfo] = []
        var token: String?
        repeat {
            let page: ListPage
            do {
                page = try await store.list(prefix: listed, pageToken: token, maxResults: Self.listPageSize)
            } catch {
                throw failure(error, "list", path + "/")
            }
            prefixes += page.prefixes
            items += page.items
            token = page.nextPageToken
        } while token != nil
        rememberListing(of: listed, prefixes, items, readAt: started)
        return (prefixes, items)
    }

    /// Keeps a complete listing of `listed` for opendir (within statTTL;
    /// at most `cachedListingLimit` of them, the oldest going first).
    func rememberListing(of listed: String, _ prefixes: [String], _ items: [ObjectInfo], readAt: Duration) {
        guard options.statTTL > 0 else { return }
        state.withLock { s in
            s.listings[listed] = CachedListing(prefixes: prefixes, items: items, readAt: readAt)
            if s.listings.count > Self.cachedListingLimit,
               let oldest = s.listings.min(by: { $0.value.readAt < $1.value.readAt })?.key {
                s.listings[oldest] = nil
            }
        }
    }

    public func readdir(_ inode: UInt64, handle: UInt64, offset: Int64) async throws(FSError) -> [DirectoryEntry] {
        try state.withLock { s throws(FSError) in
            guard let directory = s.directories[handle] else { throw FSError(EBADF, "no directory handle \(handle)") }
            guard offset >= 0 else { throw FSError(EINVAL, "readdir offset \(offset)") }
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

    /// The entries of one listing, by name, sorted. A prefix and an object
    /// of the same name: the directory wins and the object is hidden.
    private func children(listed: String, prefixes: [String], items: [ObjectInfo]) -> [(String, StatCache.Node)] {
        var nodes: [String: StatCache.Node] = [:]
        for item in items {
            guard let name = PathRules.entryName(ofItem: item.name, under: listed) else {
                logger.debug("skipping object that cannot be a file", metadata: ["object": "\(item.name)"])
                continue
            }
            nodes[String(name)] = .file(item)
        }
        for prefix in prefixes {
            guard let name = PathRules.entryName(ofPrefix: prefix, under: listed) else {
                logger.debug("skipping prefix that cannot be a directory", metadata: ["prefix": "\(prefix)"])
                continue
            }
            if case .file? = nodes[String(name)] {
                logger.debug("object hidden by a directory of the same name", metadata: ["object": "\(listed)\(name)"])
            }
            nodes[String(name)] = .directory(placeholder: nil)
        }
        return nodes.sorted { $0.key < $1.key }
    }

    private func directoryAttributes(_ inode: UInt64, _ s: borrowing State, now: Duration) -> FileAttributes {
        if inode != InodeTable.root, let path = s.inodes[inode]?.path,
            case .directory(let placeholder)? = s.stats.lookup(path, now: now)
        {
            return mapper.directory(placeholder: placeholder, inode: inode)
        }
        return mapper.directory(placeholder: nil, inode: inode)
    }
}
