/// What the mount knows of its directories' listings: the listing cache
/// (`ListingCache`), the first pages that lookups' probes read, and the
/// subtrees being listed flat (`Listings+Walks.swift`).
///
/// A value in `FileSystem.State`, so a listing changes in the same critical
/// section as the inodes and the stat cache, under the one state lock
/// (nothing nests in it). It does no I/O and reads no clock: its events
/// take the time, and the page requests of a walk are made by `launch`, a
/// closure of the owner's `ListingReader` (which reads the pages and feeds
/// them back as `pageRead`), called in the same critical section as the
/// event, so that an opendir finds the request in flight.
struct Listings: Sendable {
    struct Configuration: Sendable {
        /// statTTL: how long a listing answers opendir and lookups (zero:
        /// no listing is kept).
        let ttl: Duration
        let negativeTTL: Duration
        /// `MountOptions.objectPrefix`: listings are by object name, the
        /// file system's changes by mount path.
        let objectPrefix: String
        /// The store's listings carry every item's metadata (not v0's).
        let carryMetadata: Bool
        /// The store lists without delimiter
        /// (`ObjectStore.supportsFlatListing`): subtrees can be walked.
        let flatListing: Bool

        init(_ options: MountOptions, _ store: any ObjectStore) {
            ttl = Duration(seconds: options.statTTL)
            negativeTTL = Duration(seconds: options.negativeTTL)
            objectPrefix = options.objectPrefix
            carryMetadata = store.capabilities.listingsCarryMetadata
            flatListing = store.supportsFlatListing
        }
    }

    /// The first page of a listing that has more.
    struct Head: Sendable {
        let page: ListPage
        let readAt: Duration
    }

    /// A walk's page request is made (by the `ListingReader`): the Task
    /// that reads the page `request` of the walk `walk` of `root`.
    typealias Launch = (_ root: String, _ walk: UInt64, _ request: WalkSchedule.Request) -> Task<Void, Never>

    /// The store's largest page.
    static let pageSize = 1000
    /// First pages kept for opendir at most (each up to 1,000 entries).
    static let headLimit = 16

    let configuration: Configuration
    /// Recent full listings by listed prefix, reused by opendir within
    /// statTTL (as attributes are), so a second `ls -l` asks nothing.
    var cache: ListingCache
    /// First pages of listings read by lookups' probes, by listed
    /// prefix, so the opendir that follows goes on from the second.
    private var heads: [String: Head] = [:]
    /// Subtrees being listed flat (`TreeWalk`, `WalkSchedule`), by the
    /// root's listed prefix.
    var walks: [String: ActiveWalk] = [:]
    var nextWalkID: UInt64 = 0
    /// The server returned names outside a walk's key range: walks
    /// list whole subtrees, without offsets, from then on.
    var offsetsIgnored = false

    init(_ configuration: Configuration, maxEntries: Int) {
        self.configuration = configuration
        self.cache = ListingCache(maxEntries: maxEntries)
    }

    /// Whether listings are kept at all (statTTL is not 0).
    var keeps: Bool { configuration.ttl > .zero }

    /// The listing of `listed` while it is younger than statTTL at `now`.
    func fresh(_ listed: String, now: Duration) -> ListingCache.Listing? {
        cache[listed].flatMap { now - $0.readAt < configuration.ttl ? $0 : nil }
    }

    /// The listed prefix of the directory holding mount path `path`.
    func parentListed(_ path: String) -> String {
        PathRules.listingPrefix(configuration.objectPrefix, PathRules.parent(of: path))
    }

    // MARK: - Events

    /// What opendir of `listed` (the directory at mount path `path`) goes
    /// on from at `now`: the cached listing when it is younger than
    /// statTTL, else the first page a lookup's probe read, if as young
    /// (taken: read once). Counts the opendir for the walks, which may
    /// start one (its root is returned, for the log).
    mutating func opening(_ listed: String, path: String, now: Duration, launch: Launch)
        -> (cached: ListingCache.Listing?, head: Head?, walkStarted: String?)
    {
        let cached = fresh(listed, now: now)
        var walkStarted: String?
        if !path.isEmpty {
            walkStarted = subdirectoryOpened(listed, parent: parentListed(path), listed: cached != nil, launch: launch)
        }
        if let cached { return (cached, nil, walkStarted) }
        let head = heads.removeValue(forKey: listed)
        return (nil, head.flatMap { now - $0.readAt < configuration.ttl ? $0 : nil }, walkStarted)
    }

    /// Keeps `listing` of `listed`, replacing what was kept.
    mutating func keep(_ listed: String, _ listing: ListingCache.Listing) {
        guard keeps else { return }
        cache.store(listed, listing)
    }

    /// Keeps the complete listing of a lookup's probe for opendir, or its
    /// first page when there is more (opendir goes on from the second).
    mutating func keepProbe(of listed: String, _ page: ListPage, readAt: Duration) {
        guard keeps else { return }
        // Items without their metadata (v0 listings) are completed by
        // opendir (`withEntryMetadata`), which goes on from the head.
        if page.nextPageToken == nil && configuration.carryMetadata {
            keep(listed, ListingCache.Listing(page, readAt: readAt))
            return
        }
        if heads.count >= Self.headLimit, let any = heads.keys.first { heads[any] = nil }
        heads[listed] = Head(page: page, readAt: readAt)
    }

    /// Applies `change` (for mount path `path`) to its directory's cached
    /// listing, if one is kept, and stops the walks that would list that
    /// directory from pages read before the change. O(1) in the
    /// directory's size. Keeps cached listings true to this mount's own
    /// changes, so that an `ls` right after `cp` shows the copy and a
    /// lookup of a new name in a freshly listed directory needs no request.
    mutating func amend(_ path: String, _ change: ListingCache.Change) {
        let listed = parentListed(path)
        cache.amend(listed, object: configuration.objectPrefix + path, change)
        heads[listed] = nil
        if !walks.isEmpty { walks = walks.filter { !$0.value.schedule.contains(listed) } }
    }

    /// A new object at mount path `path` (mknod, mkdir, symlink) goes into
    /// its directory's listing.
    mutating func created(_ path: String, _ node: StatCache.Node, now: Duration) {
        switch node {
        case .file(let info): amend(path, .file(info))
        case .directory(let placeholder):
            amend(path, .directory(placeholder: placeholder))
            // A new directory is empty: its listing is known.
            keep(PathRules.listingPrefix(configuration.objectPrefix, path), ListingCache.Listing(readAt: now))
        case .absent: break
        }
    }

    /// `path` is gone: taken out of its directory's listing, and its own
    /// listing (a directory's) dropped; not its probe's first page.
    mutating func removed(_ path: String) {
        amend(path, .removed)
        cache.remove(PathRules.listingPrefix(configuration.objectPrefix, path))
    }

    /// Drops the cached listing of `listed` and its probe's first page.
    mutating func forget(_ listed: String) {
        cache.remove(listed)
        heads[listed] = nil
    }

    /// Entries held: those of the cached listings and the first pages.
    var entriesHeld: Int { cache.entryCount + heads.count }

    /// Drops every cached listing and first page; with `walks`, stops the
    /// walks too (their pages were read before what made the caller drop).
    mutating func removeAll(walks dropWalks: Bool) {
        cache.removeAll()
        heads.removeAll()
        if dropWalks { walks.removeAll() }
    }

    // MARK: - Questions

    /// What a cached listing of `path`'s directory says `path` is: a
    /// directory or a file while the listing is younger than statTTL, absent
    /// while it is younger than the negative TTL (counted from its last
    /// page); nil when no listing can tell. O(1) whatever the directory's
    /// size (the stat cache may have evicted a name the listing holds).
    func node(_ path: String, now: Duration) -> StatCache.Node? {
        guard let listing = cache[parentListed(path)] else { return nil }
        let object = configuration.objectPrefix + path
        if let directory = listing.directory(object + "/") {
            return now - listing.readAt < configuration.ttl ? directory : nil
        }
        if let item = listing.items[object] {
            return now - listing.readAt < configuration.ttl ? .file(item) : nil
        }
        return now - listing.completedAt < configuration.negativeTTL ? .absent : nil
    }
}
