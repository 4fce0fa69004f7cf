import Logging

/// Complete listings of directories, by listed prefix, reused by opendir
/// (within statTTL) and by lookups of names a fresh listing does not hold.
///
/// Every question a file-system operation asks of one listing is O(1): a
/// listing keeps its items by object name and its prefixes in a set, so a
/// lookup in (or an amendment of) a directory of 100,000 entries costs the
/// same as in one of ten. Only opendir reads a listing whole.
///
/// Bounded by the total number of entries over all listings (and by a
/// number of listings): when a new listing would pass either, the least
/// recently stored ones go first (a listing counts as stored again when a
/// subdirectory of it is opened). A listing larger than the whole budget is
/// not kept at all.
struct ListingCache: Sendable {
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
        /// Subdirectories opened since it was read (a second one starts a
        /// `TreeWalk` of this directory).
        var subdirectoriesOpened = 0

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

        /// What the listing says the prefix `prefix` (`a/b/`) is: a
        /// directory, with its placeholder when the listing holds one; nil
        /// when it is not listed.
        func directory(_ prefix: String) -> StatCache.Node? {
            prefixes.contains(prefix) ? .directory(placeholder: placeholders[prefix]) : nil
        }

        var entryCount: Int { items.count + prefixes.count }

        /// Whether the object `name` or the directory `name/` is listed.
        func holds(_ name: String) -> Bool {
            items[name] != nil || prefixes.contains(name + "/")
        }

        /// The entries of the listing of `listed`, by name, sorted, each
        /// marked `false` (listed, not a file being written: opendir merges
        /// those). A prefix and an object of the same name: the directory
        /// wins and the object is hidden. Built as one array and sorted
        /// once: at 100,000 entries a dictionary by name (then sorted) cost
        /// a third of opendir's time after the last page.
        func children(under listed: String, logger: Logger) -> [(String, StatCache.Node, Bool)] {
            var children: [(String, StatCache.Node, Bool)] = []
            children.reserveCapacity(entryCount)
            for item in items.values {
                guard let name = PathRules.entryName(ofItem: item.name, under: listed) else {
                    logger.debug("skipping object that cannot be a file", metadata: ["object": "\(item.name)"])
                    continue
                }
                if !prefixes.isEmpty, prefixes.contains(item.name + "/") {
                    logger.debug("object hidden by a directory of the same name", metadata: ["object": "\(item.name)"])
                    continue
                }
                children.append((String(name), .file(item), false))
            }
            for prefix in prefixes {
                guard let name = PathRules.entryName(ofPrefix: prefix, under: listed) else {
                    logger.debug("skipping prefix that cannot be a directory", metadata: ["prefix": "\(prefix)"])
                    continue
                }
                children.append((String(name), .directory(placeholder: placeholders[prefix]), false))
            }
            children.sort { $0.0 < $1.0 }
            return children
        }
    }

    /// A change this mount made to one entry of a listed directory.
    enum Change {
        case file(ObjectInfo)
        /// A directory, with its placeholder object when it has one.
        case directory(placeholder: ObjectInfo?)
        case removed
    }

    let maxEntries: Int
    let maxListings: Int
    private var listings: [String: Listing] = [:]
    /// Listed prefixes, least recently stored first.
    private var order = LRUList<String>()
    private(set) var entryCount = 0

    init(maxEntries: Int, maxListings: Int = 16_384) {
        self.maxEntries = max(1, maxEntries)
        self.maxListings = max(1, maxListings)
    }

    var count: Int { listings.count }

    subscript(listed: String) -> Listing? { listings[listed] }

    /// Keeps `listing` for `listed`, replacing what was there; older
    /// listings go while the bounds are passed.
    mutating func store(_ listed: String, _ listing: Listing) {
        remove(listed)
        guard listing.entryCount <= maxEntries else { return }
        listings[listed] = listing
        order.touch(listed)
        entryCount += listing.entryCount
        while entryCount > maxEntries || listings.count > maxListings, let oldest = order.leastRecent, oldest != listed {
            remove(oldest)
        }
    }

    mutating func remove(_ listed: String) {
        guard let old = listings.removeValue(forKey: listed) else { return }
        order.remove(listed)
        entryCount -= old.entryCount
    }

    mutating func removeAll() {
        listings.removeAll()
        order = LRUList()
        entryCount = 0
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

    /// Applies a change of the entry `object` (an object name, without a
    /// trailing `/`) to the listing of `listed`, if one is kept. O(1).
    mutating func amend(_ listed: String, object: String, _ change: Change) {
        guard var listing = listings.removeValue(forKey: listed) else { return }
        // Taken out of the dictionary first, so its storage is changed in
        // place rather than copied.
        entryCount -= listing.entryCount
        listing.items[object] = nil
        listing.prefixes.remove(object + "/")
        listing.placeholders[object + "/"] = nil
        switch change {
        case .file(let info): listing.items[object] = info
        case .directory(let placeholder):
            listing.prefixes.insert(object + "/")
            listing.placeholders[object + "/"] = placeholder
        case .removed: break
        }
        entryCount += listing.entryCount
        listings[listed] = listing
    }
}
