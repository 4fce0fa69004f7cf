/// What the mount knows of its directories' listings: the listing cache
/// (`ListingCache`, names into the metadata cache's entries), the first
/// pages that lookups' probes read, and the subtrees being listed flat
/// (`Listings+Walks.swift`).
///
/// A part of `MetadataCache`: a listing and its entries' metadata change
/// together (its events that keep or drop a listing take the entries, and
/// pin or unpin them), under the one state lock (nothing nests in it). It
/// does no I/O and reads no clock: its events
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
    /// Listings being read page by page for a directory handle
    /// (`ListingArrival`), by listed prefix: kept page by page, so that
    /// the listing is in the cache as soon as its last page is; an opendir
    /// of the same directory meanwhile waits for that rather than reading
    /// it again.
    private(set) var arriving: [String: Arriving] = [:]

    struct Arriving: Sendable {
        /// The handle reading it.
        let handle: UInt64
        /// Its reading, which ends when the listing is kept (or not).
        let task: Task<Void, Never>
        /// Its names so far, each one's metadata already in the table.
        var kept: ListingCache.Kept
    }
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
    func fresh(_ listed: String, now: Duration) -> ListingCache.Kept? {
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
        -> (cached: ListingCache.Kept?, head: Head?, walkStarted: String?)
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

    /// Keeps `listing` of `listed`, replacing what was kept: its entries'
    /// metadata goes to `entries` (as fresh as the listing), its names to
    /// the cache.
    mutating func keep(_ listed: String, _ listing: ListingCache.Listing, _ entries: inout MetadataCache.Entries) {
        guard keeps else { return }
        let path = mountPath(listed)
        var kept = ListingCache.Kept(path: path, readAt: listing.readAt, completedAt: listing.completedAt)
        // Only a listing the cache's budget takes pins its entries; a
        // larger one still leaves them in the table (bounded by capacity).
        Self.add(listing.children(under: listed, logger: nil, sorted: false), to: &kept, &entries)
        cache.store(listed, kept, &entries)
    }

    /// `children` (names in `kept`'s directory) go to `kept`, and their
    /// metadata to `entries`, as fresh as `kept`'s listing.
    private static func add(
        _ children: [(String, MetadataCache.Node)], to kept: inout ListingCache.Kept, _ entries: inout MetadataCache.Entries
    ) {
        entries.reserveCapacity(forMore: children.count)
        for (name, node) in children {
            let child = PathRules.join(kept.path, name)
            entries.insert(child, node, now: kept.readAt)
            if case .directory = node { kept.directories.insert(child) } else { kept.files.insert(child) }
        }
    }

    /// Directory handle `handle` reads the listing of `listed` (requested
    /// at `readAt`) page by page, in `task`.
    mutating func arriving(_ listed: String, handle: UInt64, task: Task<Void, Never>, readAt: Duration) {
        guard keeps else { return }
        arriving[listed] = Arriving(handle: handle, task: task, kept: ListingCache.Kept(path: mountPath(listed), readAt: readAt, completedAt: readAt))
    }

    /// Names of that listing, as a page settled them (`ListingArrival`):
    /// their metadata goes to `entries` (as fresh as the listing), their
    /// names to the listing, as `keep` does for a whole one.
    mutating func arrivedPage(
        _ listed: String, handle: UInt64, _ children: [(String, MetadataCache.Node)], _ entries: inout MetadataCache.Entries
    ) {
        guard var listing = arriving.removeValue(forKey: listed) else { return }
        // Taken out and put back: its sets change in place.
        defer { arriving[listed] = listing }
        guard listing.handle == handle else { return }
        Self.add(children, to: &listing.kept, &entries)
    }

    /// That listing's last page arrived at `now`: it is kept.
    mutating func arrivedAll(_ listed: String, handle: UInt64, now: Duration, _ entries: inout MetadataCache.Entries) {
        guard var listing = arriving[listed], listing.handle == handle else { return }
        arriving[listed] = nil
        listing.kept.completedAt = max(now, listing.kept.readAt)
        cache.store(listed, listing.kept, &entries)
    }

    /// That reading ended without its last page (failed or cancelled).
    mutating func arrivalEnded(_ listed: String, handle: UInt64) {
        if arriving[listed]?.handle == handle { arriving[listed] = nil }
    }

    /// The mount path of the directory listed as `listed`.
    func mountPath(_ listed: String) -> String {
        let path = listed.dropFirst(configuration.objectPrefix.count)
        return String(path.hasSuffix("/") ? path.dropLast() : path)
    }

    /// Keeps the complete listing of a lookup's probe for opendir, or its
    /// first page when there is more (opendir goes on from the second).
    mutating func keepProbe(of listed: String, _ page: ListPage, readAt: Duration, _ entries: inout MetadataCache.Entries) {
        guard keeps else { return }
        // Items without their metadata (v0 listings) are completed by
        // opendir (`withEntryMetadata`), which goes on from the head.
        if page.nextPageToken == nil && configuration.carryMetadata {
            keep(listed, ListingCache.Listing(page, readAt: readAt), &entries)
            return
        }
        if heads.count >= Self.headLimit, let any = heads.keys.first { heads[any] = nil }
        heads[listed] = Head(page: page, readAt: readAt)
    }

    /// A change this mount made to mount path `path` (now `node`, its entry
    /// already in `entries`): its directory's cached listing, if one is
    /// kept, names it so, and the walks that would list that directory
    /// from pages read before the change stop. O(1) in the directory's
    /// size. Keeps cached listings true to this mount's own changes, so
    /// that an `ls` right after `cp` shows the copy and a lookup of a new
    /// name in a freshly listed directory needs no request.
    mutating func amend(_ path: String, _ node: MetadataCache.Node, _ entries: inout MetadataCache.Entries) {
        let listed = parentListed(path)
        cache.amend(listed, path: path, node, &entries)
        heads[listed] = nil
        if !walks.isEmpty { walks = walks.filter { !$0.value.schedule.contains(listed) } }
        // The listing arriving (if any) names it so too: its pages read
        // already could not, and it is kept at its last page.
        if var listing = arriving.removeValue(forKey: listed) {
            _ = listing.kept.name(path, as: node)
            arriving[listed] = listing
        }
    }

    /// What a read of the store found `path` to be (its entry already in
    /// `entries`): its directory's cached listing names it so. Nothing
    /// changed in the bucket because of it, so no walk stops.
    mutating func restate(_ path: String, _ node: MetadataCache.Node, _ entries: inout MetadataCache.Entries) {
        cache.amend(parentListed(path), path: path, node, &entries)
    }

    /// A new object at mount path `path` (mknod, mkdir, symlink) goes into
    /// its directory's listing.
    mutating func created(_ path: String, _ node: MetadataCache.Node, now: Duration, _ entries: inout MetadataCache.Entries) {
        amend(path, node, &entries)
        if case .directory = node {
            // A new directory is empty: its listing is known.
            keep(PathRules.listingPrefix(configuration.objectPrefix, path), ListingCache.Listing(readAt: now), &entries)
        }
    }

    /// `path` is gone: taken out of its directory's listing, and its own
    /// listing (a directory's) dropped; not its probe's first page.
    mutating func removed(_ path: String, _ entries: inout MetadataCache.Entries) {
        amend(path, .absent, &entries)
        cache.remove(PathRules.listingPrefix(configuration.objectPrefix, path), &entries)
    }

    /// Drops the cached listing of `listed`, its probe's first page, and
    /// the one arriving, if any (it is not kept).
    mutating func forget(_ listed: String, _ entries: inout MetadataCache.Entries) {
        cache.remove(listed, &entries)
        heads[listed] = nil
        arriving[listed] = nil
    }

    /// Entries held: those of the cached listings and the first pages.
    var entriesHeld: Int { cache.entryCount + heads.count }

    /// Drops every cached listing and first page; with `walks`, stops the
    /// walks too (their pages were read before what made the caller drop).
    mutating func removeAll(walks dropWalks: Bool, _ entries: inout MetadataCache.Entries) {
        cache.removeAll(&entries)
        heads.removeAll()
        if dropWalks {
            walks.removeAll()
            // Their pages were read before too: a later opendir reads anew.
            arriving.removeAll()
        }
    }
}
