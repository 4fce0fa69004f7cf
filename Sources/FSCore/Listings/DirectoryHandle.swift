import Logging

/// A snapshot of one directory's listing, taken at opendir. Offsets are
/// indices into `entries`, so they stay valid for the handle's lifetime
/// whatever happens in the bucket meanwhile.
///
/// The entries are made at the first readdir, not at opendir: when the
/// kernel still holds the directory's entries from an earlier opendir of
/// the same listing (`cache_readdir` + `keep_cache`), no readdir comes and
/// a warm `ls -l` of 100,000 entries costs no per-entry work here at all.
///
/// Kept in `FileSystem.State.directories`; its entries are made under the
/// state lock, from the metadata cache and the inode table (whose inodes
/// they pin), with the files being written in the directory as the file
/// system gives them (`StagedEntry`).
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

    /// Makes the entries from the listing, once: fills the stat cache
    /// (as fresh as the listing), resolves and pins each child's inode.
    mutating func makeEntries(
        _ cache: inout MetadataCache, _ inodes: inout InodeTable, staged: [StagedEntry], now: Duration, _ context: Context
    ) {
        guard let source else { return }
        self.source = nil
        var children = source.listing.children(under: source.listed, logger: context.logger)
        Self.mergeStaged(staged, into: &children)
        // Attributes from the listing are as old as the listing.
        let readAt = min(now, source.listing.readAt)
        var entries: [DirectoryEntry] = []
        var pinned: [UInt64] = []
        entries.reserveCapacity(children.count + 2)
        pinned.reserveCapacity(children.count)
        cache.reserveCapacity(forMore: children.count)
        inodes.reserveCapacity(forMore: children.count)
        let parentInode = inode == InodeTable.root
            ? inode : inodes.inode(forPath: PathRules.parent(of: source.path)) ?? inode
        for (name, dotInode) in [(".", inode), ("..", parentInode)] {
            let dot = Self.directoryAttributes(dotInode, cache, inodes, now: now, context.mapper)
            entries.append(DirectoryEntry(name: name, entry: EntryReply(dot, timeout: context.timeout), nextOffset: Int64(entries.count + 1)))
        }
        for (name, node, staged) in children {
            let path = PathRules.join(source.path, name)
            var known = node
            if !staged {
                cache.apply(.stated(path, node), now: readAt)
                // The cache may know more than the listing (a directory's
                // placeholder metadata); use that.
                if case .directory = node, let cached = cache.node(path, now: now) { known = cached }
            }
            let child = inodes.resolveAndPin(path, kind: node.kind!)
            pinned.append(child)
            let attributes = context.mapper.attributes(known, inode: child, changed: inodes[child]?.entriesChanged)!
            entries.append(DirectoryEntry(
                name: name, entry: EntryReply(attributes, timeout: context.timeout), nextOffset: Int64(entries.count + 1)))
        }
        self.entries = entries
        self.pinned = pinned
    }

    /// Files being written in the directory as their staged state shows
    /// them: new ones not uploaded yet appear, dirty ones show their local
    /// size; unlinked ones disappear. Marked `true`, so the cache keeps
    /// only what the store said.
    private static func mergeStaged(_ staged: [StagedEntry], into children: inout [(String, MetadataCache.Node, Bool)]) {
        // Most listings have nothing being written: no copy of the entries.
        guard !staged.isEmpty else { return }
        var byName = Dictionary(children.map { ($0.0, ($0.1, $0.2)) }, uniquingKeysWith: { a, _ in a })
        for entry in staged { byName[entry.name] = entry.file.map { (.file($0), true) } }
        children = byName.map { ($0.key, $0.value.0, $0.value.1) }.sorted { $0.0 < $1.0 }
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
