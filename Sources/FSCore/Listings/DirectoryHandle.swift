import Logging

/// A snapshot of one directory's listing, taken at opendir. Offsets are
/// indices into `entries`, so they stay valid for the handle's lifetime
/// whatever happens in the bucket meanwhile.
///
/// The entries are made at the first readdir, not at opendir: when the
/// kernel still holds the directory's entries from an earlier opendir of
/// the same listing (`cache_readdir` + `keep_cache`), no readdir comes and
/// a warm `ls -l` of 100,000 entries costs no per-entry work here at all.
/// A listing read from the store that has more than one page is the
/// exception: its entries are made page by page as the pages arrive
/// (`ListingArrival`), and readdir answers from the ones made so far.
///
/// Kept in `FileSystem.State.directories`; its entries are made under the
/// state lock, from the metadata cache (which a kept listing's names point
/// into) and the inode table (whose inodes they pin), with the files being
/// written in the directory as the file system gives them (`StagedEntry`).
/// Making them writes nothing to the cache.
struct DirectoryHandle: Sendable {
    let inode: UInt64
    /// What the entries are made of (until they are made).
    var source: Source?
    var entries: [DirectoryEntry] = []
    /// Inodes handed out in `entries`, pinned until releasedir so that a
    /// readdirplus entry the bridge counts later is still known.
    var pinned: [UInt64] = []
    /// A listing still arriving (`ListingArrival`): its entries are made
    /// page by page, and readdir past them waits.
    var arrival: ListingArrival<CheckedContinuation<Void, Never>>?
    /// The task reading the rest of that listing, cancelled at releasedir.
    var arrivalTask: Task<Void, Never>?

    struct Source: Sendable {
        let path: String
        let listed: String
        let listing: ListingCache.Opened
    }

    /// A file being written in the directory, as its staged state shows
    /// it: `file` is what a stat shows (nil: unlinked, not shown).
    struct StagedEntry: Sendable {
        let name: String
        let file: ObjectInfo?
    }

    /// What making the entries takes from the file system.
    struct Context {
        let mapper: AttributeMapper
        /// The kernel's entry and attribute timeout
        /// (`MountOptions.kernelTimeout`).
        let timeout: Double
        let objectPrefix: String
        let logger: Logger
    }

    /// At most `batch` entries from `offset` on.
    func entries(from offset: Int64, batch: Int) -> [DirectoryEntry] {
        let start = Int(min(offset, Int64(entries.count)))
        let end = min(entries.count, start + batch)
        return Array(entries[start..<end])
    }

    /// Makes the entries, once: from the kept listing's names, each with
    /// its metadata from the cache (as a stat shows it), or from a listing
    /// read and not kept; resolves and pins each child's inode. False,
    /// with nothing made: the cache no longer holds the metadata of a name
    /// the kept listing gave (the caches were dropped, or the listing was
    /// evicted and its entries expired since opendir); the caller reads the
    /// listing again.
    mutating func makeEntries(
        _ cache: borrowing MetadataCache, _ inodes: inout InodeTable, staged: [StagedEntry], now: Duration, _ context: Context
    ) -> Bool {
        guard let source else { return true }
        guard var children = Self.children(of: source, cache, now: now, context.logger) else { return false }
        self.source = nil
        Self.mergeStaged(staged, into: &children)
        entries.reserveCapacity(children.count + 2)
        pinned.reserveCapacity(children.count)
        makeDots(path: source.path, cache, inodes, now: now, context)
        append(children, path: source.path, &inodes, context)
        return true
    }

    /// Starts the entries of a listing that arrives page by page:
    /// "." and "..", then each page's as `arrival` lets them through
    /// (`appendArrived`).
    mutating func startArriving(
        path: String, _ arrival: ListingArrival<CheckedContinuation<Void, Never>>, _ cache: borrowing MetadataCache,
        _ inodes: inout InodeTable, now: Duration, _ context: Context
    ) {
        source = nil
        self.arrival = arrival
        makeDots(path: path, cache, inodes, now: now, context)
    }

    /// A page of the arriving listing (of the directory at `path`):
    /// makes the entries it lets through; returns the names it settled
    /// (for the listing being kept) and the waiters to resume.
    mutating func appendArrived(
        _ page: ListPage, path: String, _ cache: borrowing MetadataCache, _ inodes: inout InodeTable, now: Duration, _ context: Context
    ) -> ListingArrival<CheckedContinuation<Void, Never>>.Arrived {
        guard let arrived = arrival?.pageArrived(page) else { return .init() }
        append(Self.knownDirectories(arrived.children, path: path, cache, now: now), path: path, &inodes, context)
        return arrived
    }

    /// "." and "..", the first two entries.
    private mutating func makeDots(
        path: String, _ cache: borrowing MetadataCache, _ inodes: borrowing InodeTable, now: Duration, _ context: Context
    ) {
        let parentInode = inode == InodeTable.root ? inode : inodes.inode(forPath: PathRules.parent(of: path)) ?? inode
        for (name, dotInode) in [(".", inode), ("..", parentInode)] {
            let dot = Self.directoryAttributes(dotInode, cache, inodes, now: now, context.mapper)
            entries.append(DirectoryEntry(name: name, entry: EntryReply(dot, timeout: context.timeout), nextOffset: Int64(entries.count + 1)))
        }
    }

    /// Entries for `children` of the directory at `path`, each child's
    /// inode resolved and pinned.
    private mutating func append(_ children: [(String, MetadataCache.Node)], path: String, _ inodes: inout InodeTable, _ context: Context) {
        inodes.reserveCapacity(forMore: children.count)
        for (name, node) in children {
            let child = inodes.resolveAndPin(PathRules.join(path, name), kind: node.kind!)
            pinned.append(child)
            let attributes = context.mapper.attributes(node, inode: child, changed: inodes[child]?.entriesChanged)!
            entries.append(DirectoryEntry(
                name: name, entry: EntryReply(attributes, timeout: context.timeout), nextOffset: Int64(entries.count + 1)))
        }
    }

    /// The entries of `source`'s listing, by name, sorted; nil when the
    /// cache lacks the metadata of a name its kept listing holds.
    private static func children(
        of source: Source, _ cache: borrowing MetadataCache, now: Duration, _ logger: Logger
    ) -> [(String, MetadataCache.Node)]? {
        switch source.listing {
        case .read(let listing):
            return knownDirectories(listing.children(under: source.listed, logger: logger), path: source.path, cache, now: now)
        case .kept(let kept):
            var children: [(String, MetadataCache.Node)] = []
            children.reserveCapacity(kept.entryCount)
            let skip = kept.path.isEmpty ? 0 : kept.path.count + 1
            // Sorted paths of one directory are sorted names.
            for path in kept.sortedPaths {
                switch cache.entries.stored(path) {
                case nil: return nil
                case .absent?: continue
                case let node?: children.append((String(path.dropFirst(skip)), node))
                }
            }
            return children
        }
    }

    /// `children` of the directory at `path` from a listing not kept (read
    /// for this handle), so perhaps older than what the cache knows of a
    /// directory's placeholder (a chmod here since): such a directory
    /// shows as the cache has it.
    private static func knownDirectories(
        _ children: [(String, MetadataCache.Node)], path: String, _ cache: borrowing MetadataCache, now: Duration
    ) -> [(String, MetadataCache.Node)] {
        children.map { name, node in
            if case .directory = node, let known = cache.node(PathRules.join(path, name), now: now), case .directory = known {
                return (name, known)
            }
            return (name, node)
        }
    }

    /// Files being written in the directory as their staged state shows
    /// them: new ones not uploaded yet appear, dirty ones show their local
    /// size; unlinked ones disappear.
    private static func mergeStaged(_ staged: [StagedEntry], into children: inout [(String, MetadataCache.Node)]) {
        // Most listings have nothing being written: no copy of the entries.
        guard !staged.isEmpty else { return }
        var byName = Dictionary(children, uniquingKeysWith: { a, _ in a })
        for entry in staged { byName[entry.name] = entry.file.map { .file($0) } }
        children = byName.map { ($0.key, $0.value) }.sorted { $0.0 < $1.0 }
    }

    private static func directoryAttributes(
        _ inode: UInt64, _ cache: borrowing MetadataCache, _ inodes: borrowing InodeTable, now: Duration, _ mapper: AttributeMapper
    ) -> FileAttributes {
        if inode != InodeTable.root, let path = inodes[inode]?.path,
            case .directory(let placeholder)? = cache.node(path, now: now)
        {
            return mapper.directory(placeholder: placeholder, inode: inode, changed: inodes[inode]?.entriesChanged)
        }
        return mapper.directory(placeholder: nil, inode: inode, changed: inodes[inode]?.entriesChanged)
    }
}
