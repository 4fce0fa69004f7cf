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
        var children = children(listed: listed, prefixes: prefixes, items: items)
        let now = clock.now
        return state.withLock { s in
            mergeStaged(into: &children, directory: directory.path, s)
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
            for (name, node, staged) in children {
                let path = PathRules.join(directory.path, name)
                if !staged { s.stats.insert(path, node, now: now) }
                // The cache may know more than the listing (a placeholder's
                // metadata); use that.
                let known = staged ? node : s.stats.lookup(path, now: now) ?? node
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
        let whole = try await withItemMetadata(wholeListing(of: listed, path: path), listed: listed)
        rememberListing(of: listed, whole.prefixes, whole.items, readAt: started)
        return (whole.prefixes, whole.items)
    }

    /// Every page of the listing of `listed` (the directory at mount path
    /// `path`), as one page.
    func wholeListing(of listed: String, path: String) async throws(FSError) -> ListPage {
        var whole = ListPage(prefixes: [], items: [])
        var token: String?
        repeat {
            let page: ListPage
            do {
                page = try await store.list(prefix: listed, pageToken: token, maxResults: Self.listPageSize)
            } catch {
                throw failure(error, "list", path + "/")
            }
            whole.prefixes += page.prefixes
            whole.items += page.items
            whole.placeholderPrefixes.formUnion(page.placeholderPrefixes)
            token = page.nextPageToken
        } while token != nil
        return whole
    }

    /// Keeps a complete listing of `listed` for opendir (within statTTL;
    /// at most `cachedListingLimit` of them, the oldest going first).
    func rememberListing(of listed: String, _ prefixes: [String], _ items: [ObjectInfo], readAt: Duration) {
        state.withLock { s in keepListing(listed, CachedListing(prefixes: prefixes, items: items, readAt: readAt), &s) }
    }

    func keepListing(_ listed: String, _ listing: CachedListing, _ s: inout State) {
        guard options.statTTL > 0 else { return }
        s.listings[listed] = listing
        if s.listings.count > Self.cachedListingLimit,
           let oldest = s.listings.min(by: { $0.value.readAt < $1.value.readAt })?.key {
            s.listings[oldest] = nil
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
            if staged.state.withLock({ $0.unlinked }) {
                byName[name] = nil
            } else {
                byName[name] = (.file(staged.view(objectName: objectName(record.path))), true)
            }
            changed = true
        }
        if changed { children = byName.map { ($0.key, $0.value.0, $0.value.1) }.sorted { $0.0 < $1.0 } }
    }

    /// The entries of one listing, by name, sorted. A prefix and an object
    /// of the same name: the directory wins and the object is hidden.
    private func children(listed: String, prefixes: [String], items: [ObjectInfo]) -> [(String, StatCache.Node, Bool)] {
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
        return nodes.sorted { $0.key < $1.key }.map { ($0.key, $0.value, false) }
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

/// Keeping cached listings true to this mount's own changes, so that an
/// `ls` right after `cp` shows the copy and a lookup of a new name in a
/// freshly listed directory needs no request.
extension FileSystem {
    enum ListingChange {
        case file(ObjectInfo)
        case directory(String)
        case removed(String)
    }

    /// Applies `change` (for `path`) to its directory's cached listing, if
    /// one is kept. Call with the state lock held.
    func amendListing(_ path: String, _ change: ListingChange, _ s: inout State) {
        let listed = PathRules.listingPrefix(objectPrefix, PathRules.parent(of: path))
        guard let readAt = s.listings[listed]?.readAt else { return }
        let object = objectName(path)
        // Take the arrays out of the dictionary first, so they are changed
        // in place (one search, no copy per change: `rm -rf` of a large
        // directory would otherwise be quadratic).
        var items = s.listings[listed]!.items
        var prefixes = s.listings[listed]!.prefixes
        s.listings[listed] = nil
        if let index = items.firstIndex(where: { $0.name == object }) { items.remove(at: index) }
        if let index = prefixes.firstIndex(of: object + "/") { prefixes.remove(at: index) }
        switch change {
        case .file(let info): items.append(info)
        case .directory: prefixes.append(object + "/")
        case .removed: break
        }
        s.listings[listed] = CachedListing(prefixes: prefixes, items: items, readAt: readAt)
    }

    /// Whether a cached listing of `path`'s directory, younger than the
    /// negative TTL, says `path` does not exist.
    func listingSaysAbsent(_ path: String, now: Duration, _ s: borrowing State) -> Bool {
        let listed = PathRules.listingPrefix(objectPrefix, PathRules.parent(of: path))
        guard let listing = s.listings[listed], now - listing.readAt < Duration(seconds: options.negativeTTL) else { return false }
        let object = objectName(path)
        return !listing.items.contains { $0.name == object } && !listing.prefixes.contains(object + "/")
    }
}
