import Logging

/// Complete listings of directories, by listed prefix, reused by opendir
/// (within statTTL) and by lookups of names a fresh listing does not hold.
/// A kept listing is the names of its entries (`Kept`); their metadata is
/// in the metadata cache's one table (`MetadataCache.Entries`), where the
/// listing pins them while it is kept.
///
/// Every question a file-system operation asks of one listing is O(1): a
/// listing keeps its names in sets, so a lookup in (or an amendment of) a
/// directory of 100,000 entries costs the same as in one of ten. Only
/// opendir reads a listing whole.
///
/// Bounded by the total number of entries over all listings (and by a
/// number of listings): when a new listing would pass either, the least
/// recently stored ones go first (a listing counts as stored again when a
/// subdirectory of it is opened). A listing larger than the whole budget is
/// not kept at all.
struct ListingCache: Sendable {
    /// A listing as read from the store (a delimited listing, or what a
    /// walk cut from flat pages), with its items' metadata.
    struct Listing: Sendable {
        /// Objects directly below the listed prefix, by object name.
        var items: [String: ObjectInfo]
        /// Full prefixes (`a/b/`) directly below the listed prefix.
        var prefixes: Set<String>
        /// The placeholder objects of those prefixes that have one, by
        /// prefix: the directories' mode, owner and times. A listing that
        /// cannot return them (v0) has them stat'ed before it is kept.
        var placeholders: [String: ObjectInfo]
        /// When the request that produced it (its first page) started.
        let readAt: Duration
        /// When its last page arrived: a name it lacks was absent then, at
        /// the latest (negative lookups count their TTL from here, so a
        /// listing of 100 pages still answers them once complete).
        var completedAt: Duration

        init(
            items: [String: ObjectInfo] = [:], prefixes: Set<String> = [], placeholders: [String: ObjectInfo] = [:],
            readAt: Duration, completedAt: Duration? = nil
        ) {
            self.items = items
            self.prefixes = prefixes
            self.placeholders = placeholders
            self.readAt = readAt
            self.completedAt = max(readAt, completedAt ?? readAt)
        }

        /// A listing from the pages of a delimited listing.
        init(
            prefixes: [String], items: [ObjectInfo], placeholders: [String: ObjectInfo] = [:],
            readAt: Duration, completedAt: Duration? = nil
        ) {
            var byName: [String: ObjectInfo] = [:]
            byName.reserveCapacity(items.count)
            for item in items { byName[item.name] = item }
            self.init(items: byName, prefixes: Set(prefixes), placeholders: placeholders, readAt: readAt, completedAt: completedAt)
        }

        /// A listing from `page` (every page of a delimited listing).
        init(_ page: ListPage, readAt: Duration, completedAt: Duration? = nil) {
            self.init(prefixes: page.prefixes, items: page.items, placeholders: page.placeholders, readAt: readAt, completedAt: completedAt)
        }

        var entryCount: Int { items.count + prefixes.count }

        /// The entries of the listing of `listed`, by name, sorted unless
        /// `sorted` is false (a listing being kept: its names go into sets).
        /// A prefix and an object of the same name: the directory wins and
        /// the object is hidden. Built as one array and sorted once: at
        /// 100,000 entries a dictionary by name (then sorted) cost a third
        /// of opendir's time after the last page.
        func children(under listed: String, logger: Logger?, sorted: Bool = true) -> [(String, MetadataCache.Node)] {
            Self.children(items: items.values, prefixes: prefixes, placeholders: placeholders, under: listed, logger: logger, sorted: sorted)
        }

        /// The entries named by `items` and `prefixes` (of the listing of
        /// `listed`), as `children(under:)` makes them: a whole listing's,
        /// or a page's (`ListingArrival`).
        static func children(
            items: some Collection<ObjectInfo>, prefixes: Set<String>, placeholders: [String: ObjectInfo],
            under listed: String, logger: Logger?, sorted: Bool
        ) -> [(String, MetadataCache.Node)] {
            var children: [(String, MetadataCache.Node)] = []
            children.reserveCapacity(items.count + prefixes.count)
            for item in items {
                guard let name = PathRules.entryName(ofItem: item.name, under: listed) else {
                    logger?.debug("skipping object that cannot be a file", metadata: ["object": "\(item.name)"])
                    continue
                }
                if !prefixes.isEmpty, prefixes.contains(item.name + "/") {
                    logger?.debug("object hidden by a directory of the same name", metadata: ["object": "\(item.name)"])
                    continue
                }
                children.append((String(name), .file(item)))
            }
            for prefix in prefixes {
                guard let name = PathRules.entryName(ofPrefix: prefix, under: listed) else {
                    logger?.debug("skipping prefix that cannot be a directory", metadata: ["prefix": "\(prefix)"])
                    continue
                }
                children.append((String(name), .directory(placeholder: placeholders[prefix])))
            }
            if sorted { children.sort { $0.0 < $1.0 } }
            return children
        }
    }

    /// A kept listing: the mount paths of its entries, whose metadata the
    /// metadata cache holds.
    struct Kept: Sendable {
        /// The directory's mount path.
        let path: String
        var files: Set<String> = []
        var directories: Set<String> = []
        let readAt: Duration
        var completedAt: Duration
        /// Subdirectories opened since it was read (a second one starts a
        /// `TreeWalk` of this directory).
        var subdirectoriesOpened = 0

        var entryCount: Int { files.count + directories.count }

        /// Whether it names `path` (a file or a directory).
        func names(_ path: String) -> Bool { files.contains(path) || directories.contains(path) }

        /// Has it name `path` as `node` says (a file, a directory, or not
        /// at all); returns whether it named `path` before, and now.
        mutating func name(_ path: String, as node: MetadataCache.Node) -> (before: Bool, now: Bool) {
            let wasFile = files.remove(path) != nil
            let wasDirectory = directories.remove(path) != nil
            let before = wasFile || wasDirectory
            switch node {
            case .file: files.insert(path)
            case .directory: directories.insert(path)
            case .absent: return (before, false)
            }
            return (before, true)
        }

        /// Its entries' paths, sorted by name.
        var sortedPaths: [String] { (files.union(directories)).sorted() }
    }

    /// A listing as opendir takes it: kept (names into the metadata
    /// cache), or read and not kept (statTTL 0, or over the budget).
    enum Opened: Sendable {
        case kept(Kept)
        case read(Listing)

        var readAt: Duration {
            switch self {
            case .kept(let kept): kept.readAt
            case .read(let listing): listing.readAt
            }
        }
    }

    let maxEntries: Int
    let maxListings: Int
    private var listings: [String: Kept] = [:]
    /// Listed prefixes, least recently stored first.
    private var order = LRUList<String>()
    private(set) var entryCount = 0

    init(maxEntries: Int, maxListings: Int = 16_384) {
        self.maxEntries = max(1, maxEntries)
        self.maxListings = max(1, maxListings)
    }

    var count: Int { listings.count }

    subscript(listed: String) -> Kept? { listings[listed] }

    /// Keeps `listing` for `listed`, replacing what was there, with its
    /// entries (already in `entries`) pinned; older listings go while the
    /// bounds are passed.
    mutating func store(_ listed: String, _ listing: Kept, _ entries: inout MetadataCache.Entries) {
        remove(listed, &entries)
        guard listing.entryCount <= maxEntries else { return }
        listings[listed] = listing
        order.touch(listed)
        entryCount += listing.entryCount
        for path in listing.files { entries.pin(path) }
        for path in listing.directories { entries.pin(path) }
        while entryCount > maxEntries || listings.count > maxListings, let oldest = order.leastRecent, oldest != listed {
            remove(oldest, &entries)
        }
    }

    mutating func remove(_ listed: String, _ entries: inout MetadataCache.Entries) {
        guard let old = listings.removeValue(forKey: listed) else { return }
        order.remove(listed)
        entryCount -= old.entryCount
        for path in old.files { entries.unpin(path) }
        for path in old.directories { entries.unpin(path) }
    }

    mutating func removeAll(_ entries: inout MetadataCache.Entries) {
        for listed in Array(listings.keys) { remove(listed, &entries) }
        order = LRUList()
    }

    /// Counts an opendir of a subdirectory of `listed`; returns how many
    /// were counted before this one (nil when no listing is kept). The
    /// listing becomes the most recent: a directory being walked answers
    /// the lookups of its subdirectories from it, and a walk of a million
    /// objects stores (and evicts) far more listings while it lasts.
    mutating func countOpenedSubdirectory(of listed: String) -> Int? {
        guard let before = listings[listed]?.subdirectoriesOpened else { return nil }
        listings[listed]!.subdirectoriesOpened = before + 1
        order.touch(listed)
        return before
    }

    /// Has the listing of `listed`, if one is kept, name `path` as `node`
    /// says (a file, a directory, or not at all), its entry (already in
    /// `entries`) pinned. O(1).
    mutating func amend(_ listed: String, path: String, _ node: MetadataCache.Node, _ entries: inout MetadataCache.Entries) {
        guard var listing = listings.removeValue(forKey: listed) else { return }
        // Taken out of the dictionary first, so its storage is changed in
        // place rather than copied.
        entryCount -= listing.entryCount
        let named = listing.name(path, as: node)
        if named.before { entries.unpin(path) }
        if named.now { entries.pin(path) }
        entryCount += listing.entryCount
        listings[listed] = listing
    }
}
