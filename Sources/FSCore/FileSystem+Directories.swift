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
    /// The store's largest page.
    static let listPageSize = 1000

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
        let listing = try await listing(of: listed, path: directory.path)
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
        var children = children(listed: source.listed, source.listing)
        mergeStaged(into: &children, directory: source.path, s)
        let now = clock.now
        // Attributes from the listing are as old as the listing.
        let readAt = min(now, source.listing.readAt)
        var entries: [DirectoryEntry] = []
        var pinned: [UInt64] = []
        entries.reserveCapacity(children.count + 2)
        pinned.reserveCapacity(children.count)
        s.stats.reserveCapacity(forMore: children.count)
        s.inodes.reserveCapacity(forMore: children.count)
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

    /// Every page of the listing of `listed`: the cached one when it is
    /// younger than statTTL (0 turns the cache off), else from a walk of
    /// the subtree it lies in (`TreeWalk`), else listed page by page (going
    /// on from the first page a lookup's probe just read, if any).
    private func listing(of listed: String, path: String) async throws(FSError) -> ListingCache.Listing {
        let ttl = Duration(seconds: options.statTTL)
        let started = clock.now
        guard ttl > .zero else {
            let whole = try await wholeListing(of: listed, path: path)
            return ListingCache.Listing(whole, readAt: started)
        }
        let (cached, head) = state.withLock { s -> (ListingCache.Listing?, ListingHead?) in
            let cached = s.listings[listed].flatMap { started - $0.readAt < ttl ? $0 : nil }
            if !path.isEmpty {
                let parent = PathRules.listingPrefix(objectPrefix, PathRules.parent(of: path))
                noteSubdirectoryOpened(listed, parent: parent, listed: cached != nil, &s)
            }
            if let cached { return (cached, nil) }
            let head = s.listingHeads.removeValue(forKey: listed)
            return (nil, head.flatMap { started - $0.readAt < ttl ? $0 : nil })
        }
        if let cached { return cached }
        if head == nil, let walked = try await listingFromWalk(listed, ttl: ttl) { return walked }
        let whole = try await withEntryMetadata(wholeListing(of: listed, path: path, after: head?.page), listed: listed)
        let listing = ListingCache.Listing(whole, readAt: head?.readAt ?? started, completedAt: clock.now)
        state.withLock { keepListing(listed, listing, &$0) }
        return listing
    }

    /// Every page of the listing of `listed` (the directory at mount path
    /// `path`), as one page; after `head` (its first page) when given.
    func wholeListing(of listed: String, path: String, after head: ListPage? = nil) async throws(FSError) -> ListPage {
        var whole = head ?? ListPage(prefixes: [], items: [])
        let token = head?.nextPageToken
        whole.nextPageToken = nil
        if head != nil && token == nil { return whole }
        do {
            try await store.listPages(prefix: listed, after: token, maxResults: Self.listPageSize) { page in
                whole.prefixes += page.prefixes
                whole.items += page.items
                whole.placeholders.merge(page.placeholders) { _, later in later }
            }
        } catch {
            throw failure(error, during: .list, "list", path + "/")
        }
        return whole
    }

    /// Keeps the complete listing of a lookup's probe for opendir, or its
    /// first page when there is more (opendir goes on from the second).
    func rememberProbe(of listed: String, _ page: ListPage, readAt: Duration) {
        guard options.statTTL > 0 else { return }
        state.withLock { s in
            // Items without their metadata (v0 listings) are completed by
            // opendir (`withEntryMetadata`), which goes on from the head.
            if page.nextPageToken == nil && store.capabilities.listingsCarryMetadata {
                keepListing(listed, ListingCache.Listing(page, readAt: readAt), &s)
                return
            }
            if s.listingHeads.count >= Self.listingHeadLimit, let any = s.listingHeads.keys.first { s.listingHeads[any] = nil }
            s.listingHeads[listed] = ListingHead(page: page, readAt: readAt)
        }
    }

    /// First pages kept for opendir at most (each up to 1,000 entries).
    static let listingHeadLimit = 16

    func keepListing(_ listed: String, _ listing: ListingCache.Listing, _ s: inout State) {
        guard options.statTTL > 0 else { return }
        s.listings.store(listed, listing)
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
        let here = s.staged.compactMap { inode, staged -> (InodeTable.Record, StagedFile)? in
            guard let record = s.inodes[inode], record.bound, PathRules.parent(of: record.path) == directory else { return nil }
            return (record, staged)
        }
        // Most listings have nothing being written: no copy of the entries.
        guard !here.isEmpty else { return }
        var byName = Dictionary(children.map { ($0.0, ($0.1, $0.2)) }, uniquingKeysWith: { a, _ in a })
        for (record, staged) in here {
            let name = String(record.path.dropFirst(directory.isEmpty ? 0 : directory.count + 1))
            let file = staged.state(in: s)
            if file.isUnlinked {
                byName[name] = nil
            } else {
                byName[name] = (.file(file.view(objectName: objectName(record.path))), true)
            }
        }
        children = byName.map { ($0.key, $0.value.0, $0.value.1) }.sorted { $0.0 < $1.0 }
    }

    /// The entries of one listing, by name, sorted. A prefix and an object
    /// of the same name: the directory wins and the object is hidden.
    /// Built as one array and sorted once: at 100,000 entries a dictionary
    /// by name (then sorted) cost a third of opendir's time after the last
    /// page.
    private func children(listed: String, _ listing: ListingCache.Listing) -> [(String, StatCache.Node, Bool)] {
        var children: [(String, StatCache.Node, Bool)] = []
        children.reserveCapacity(listing.entryCount)
        for item in listing.items.values {
            guard let name = PathRules.entryName(ofItem: item.name, under: listed) else {
                logger.debug("skipping object that cannot be a file", metadata: ["object": "\(item.name)"])
                continue
            }
            if !listing.prefixes.isEmpty, listing.prefixes.contains(item.name + "/") {
                logger.debug("object hidden by a directory of the same name", metadata: ["object": "\(item.name)"])
                continue
            }
            children.append((String(name), .file(item), false))
        }
        for prefix in listing.prefixes {
            guard let name = PathRules.entryName(ofPrefix: prefix, under: listed) else {
                logger.debug("skipping prefix that cannot be a directory", metadata: ["prefix": "\(prefix)"])
                continue
            }
            children.append((String(name), .directory(placeholder: listing.placeholders[prefix]), false))
        }
        children.sort { $0.0 < $1.0 }
        return children
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

/// Keeping cached listings true to this mount's own changes, so that an
/// `ls` right after `cp` shows the copy and a lookup of a new name in a
/// freshly listed directory needs no request.
extension FileSystem {
    enum ListingChange {
        case file(ObjectInfo)
        /// A directory, with its placeholder object when it has one.
        case directory(placeholder: ObjectInfo?)
        case removed(String)
    }

    /// Applies `change` (for `path`) to its directory's cached listing, if
    /// one is kept, and stops the walks that would list that directory
    /// from pages read before the change. O(1) in the directory's size.
    /// Call with the state lock held.
    func amendListing(_ path: String, _ change: ListingChange, _ s: inout State) {
        let listed = PathRules.listingPrefix(objectPrefix, PathRules.parent(of: path))
        let cacheChange: ListingCache.Change
        switch change {
        case .file(let info): cacheChange = .file(info)
        case .directory(let placeholder): cacheChange = .directory(placeholder: placeholder)
        case .removed: cacheChange = .removed
        }
        s.listings.amend(listed, object: objectName(path), cacheChange)
        s.listingHeads[listed] = nil
        if !s.walks.isEmpty { s.walks = s.walks.filter { !$0.value.schedule.contains(listed) } }
    }

    /// What a cached listing of `path`'s directory says `path` is: a
    /// directory or a file while the listing is younger than statTTL, absent
    /// while it is younger than the negative TTL (counted from its last
    /// page); nil when no listing can tell. O(1) whatever the directory's
    /// size (the stat cache may have evicted a name the listing holds).
    func listedNode(_ path: String, now: Duration, _ s: borrowing State) -> StatCache.Node? {
        let listed = PathRules.listingPrefix(objectPrefix, PathRules.parent(of: path))
        guard let listing = s.listings[listed] else { return nil }
        let object = objectName(path)
        if let directory = listing.directory(object + "/") {
            return now - listing.readAt < Duration(seconds: options.statTTL) ? directory : nil
        }
        if let item = listing.items[object] {
            return now - listing.readAt < Duration(seconds: options.statTTL) ? .file(item) : nil
        }
        return now - listing.completedAt < Duration(seconds: options.negativeTTL) ? .absent : nil
    }
}
