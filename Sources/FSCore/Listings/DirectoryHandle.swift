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
/// state lock, as they fill the stat cache and pin inodes.
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
    mutating func makeEntries(_ s: inout FileSystem.State, now: Duration, _ context: Context) {
        guard let source else { return }
        self.source = nil
        var children = source.listing.children(under: source.listed, logger: context.logger)
        Self.mergeStaged(into: &children, directory: source.path, s, objectPrefix: context.objectPrefix)
        // Attributes from the listing are as old as the listing.
        let readAt = min(now, source.listing.readAt)
        var entries: [DirectoryEntry] = []
        var pinned: [UInt64] = []
        entries.reserveCapacity(children.count + 2)
        pinned.reserveCapacity(children.count)
        s.stats.reserveCapacity(forMore: children.count)
        s.inodes.reserveCapacity(forMore: children.count)
        let parentInode = inode == InodeTable.root
            ? inode : s.inodes.inode(forPath: PathRules.parent(of: source.path)) ?? inode
        for (name, dotInode) in [(".", inode), ("..", parentInode)] {
            let dot = Self.directoryAttributes(dotInode, s, now: now, context.mapper)
            entries.append(DirectoryEntry(name: name, entry: EntryReply(dot, timeout: context.timeout), nextOffset: Int64(entries.count + 1)))
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
            let attributes = context.mapper.attributes(known, inode: child, changed: s.inodes[child]?.entriesChanged)!
            entries.append(DirectoryEntry(
                name: name, entry: EntryReply(attributes, timeout: context.timeout), nextOffset: Int64(entries.count + 1)))
        }
        self.entries = entries
        self.pinned = pinned
    }

    /// Files being written in `directory` as their staged state shows them:
    /// new ones not uploaded yet appear, dirty ones show their local size;
    /// unlinked ones disappear. Marked `true`, so the stat cache keeps only
    /// what the store said.
    private static func mergeStaged(
        into children: inout [(String, StatCache.Node, Bool)], directory: String, _ s: borrowing FileSystem.State, objectPrefix: String
    ) {
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
            if file.visibility == .hidden {
                byName[name] = nil
            } else {
                byName[name] = (.file(file.view(objectName: objectPrefix + record.path)), true)
            }
        }
        children = byName.map { ($0.key, $0.value.0, $0.value.1) }.sorted { $0.0 < $1.0 }
    }

    private static func directoryAttributes(
        _ inode: UInt64, _ s: borrowing FileSystem.State, now: Duration, _ mapper: AttributeMapper
    ) -> FileAttributes {
        if inode != InodeTable.root, let path = s.inodes[inode]?.path,
            case .directory(let placeholder)? = s.stats.lookup(path, now: now)
        {
            return mapper.directory(placeholder: placeholder, inode: inode, changed: s.inodes[inode]?.entriesChanged)
        }
        return mapper.directory(placeholder: nil, inode: inode, changed: s.inodes[inode]?.entriesChanged)
    }
}
