/// What the mount knows of the bucket's names: each path's metadata and
/// the directories' listings (with the walks that fill them, `Listings`).
///
/// A value in `FileSystem.State`, under its lock. What a name is changes
/// only through `apply`, one event for each thing that happened (this
/// mount created, removed, renamed or changed an object; the store was
/// read), so a path's entry and its directory's listing cannot tell two
/// stories: a change made here shows in the next stat and the next readdir
/// at once, never only after statTTL. The walks' own bookkeeping (which
/// pages are in flight) has its events here too, forwarded to `Listings`.
struct MetadataCache: Sendable {
    typealias Node = StatCache.Node

    private var stats: StatCache
    private(set) var listings: Listings

    init(_ configuration: Listings.Configuration, capacity: Int) {
        stats = StatCache(ttl: configuration.ttl, negativeTTL: configuration.negativeTTL, capacity: capacity)
        listings = Listings(configuration, maxEntries: capacity)
    }

    // MARK: - Questions

    /// What `path` is, if its entry is fresh at `now`.
    func node(_ path: String, now: Duration) -> Node? {
        stats.lookup(path, now: now)
    }

    /// What `path` is, from its entry or else from its directory's
    /// listing (which also knows, for the negative TTL, the names it lacks).
    func answer(_ path: String, now: Duration) -> Node? {
        stats.lookup(path, now: now) ?? listings.node(path, now: now)
    }

    /// Paths with an entry (fresh or not yet dropped).
    var entryCount: Int { stats.count }

    /// Room for `more` entries at once (a listing's entries).
    mutating func reserveCapacity(forMore more: Int) {
        stats.reserveCapacity(forMore: more)
    }

    // MARK: - Changes

    /// Applies `change`, which happened at `now` (a listing: when it was
    /// read, whatever `now` says).
    mutating func apply(_ change: NamespaceChange, now: Duration) {
        switch change {
        case .created(let path, let node):
            stats.insert(path, node, now: now, source: .changedHere)
            listings.created(path, node, now: now)
        case .removed(let path, let directory):
            if directory { stats.invalidate(tree: path) }
            stats.insert(path, .absent, now: now)
            listings.removed(path)
        case .renamed(let source, let target, let file?):
            stats.insert(source, .absent, now: now)
            stats.insert(target, .file(file), now: now)
            listings.amend(source, .removed)
            listings.amend(target, .file(file))
        case .renamed(let source, let target, nil):
            stats.invalidate(tree: source)
            stats.invalidate(tree: target)
            // Every listing below either tree, and the walks that read
            // pages of them, would show the names from before.
            listings.removeAll(walks: true)
        case .patched(let path, let node):
            stats.insert(path, node, now: now, source: .changedHere)
            switch node {
            case .file(let info): listings.amend(path, .file(info))
            case .directory(let placeholder): listings.amend(path, .directory(placeholder: placeholder))
            case .absent: listings.amend(path, .removed)
            }
        case .stated(let path, let node):
            stats.insert(path, node, now: now)
        case .listed(let listed, let listing):
            listings.keep(listed, listing)
        case .forgotten(let path, let listing):
            stats.invalidate(path)
            if listing { listings.forget(listings.parentListed(path)) }
        }
    }

    /// Forgets everything but the walks under way (an operator asked to
    /// drop the caches); returns the paths that were known to be absent,
    /// whose negative entries the kernel may hold too.
    mutating func removeAll() -> [String] {
        let absent = stats.removeAll()
        listings.removeAll(walks: false)
        return absent
    }

    // MARK: - The listings' events (see `Listings`)

    mutating func opening(_ listed: String, path: String, now: Duration, launch: Listings.Launch)
        -> (cached: ListingCache.Listing?, head: Listings.Head?, walkStarted: String?)
    {
        listings.opening(listed, path: path, now: now, launch: launch)
    }

    mutating func keepProbe(of listed: String, _ page: ListPage, readAt: Duration) {
        listings.keepProbe(of: listed, page, readAt: readAt)
    }

    mutating func walkStep(_ listed: String, now: Duration, launch: Listings.Launch) -> Listings.WalkStep {
        listings.walkStep(listed, now: now, launch: launch)
    }

    mutating func pageRead(
        _ request: WalkSchedule.Request, of root: String, walk id: UInt64, _ page: ObjectPage, readAt: Duration,
        launch: Listings.Launch
    ) -> Bool {
        listings.pageRead(request, of: root, walk: id, page, readAt: readAt, launch: launch)
    }

    mutating func walkFailed(_ root: String, walk id: UInt64) {
        listings.walkFailed(root, walk: id)
    }
}

/// The metadata cache inside the lock of the state that holds it: what
/// `ListingReader` may touch, and nothing else of `FileSystem.State`.
struct LockedMetadataCache: Sendable {
    private let state: OrderedLock<FileSystem.State>

    init(_ state: OrderedLock<FileSystem.State>) { self.state = state }

    func withLock<Result>(_ body: (inout MetadataCache) -> sending Result) -> sending Result {
        state.withLock { s in body(&s.metadata) }
    }
}

/// One thing that happened to a name, as `MetadataCache.apply` takes it.
enum NamespaceChange: Sendable {
    /// This mount made `path` (mkdir, symlink, mknod): the store's answer.
    /// A new directory's listing is known at once: empty.
    case created(String, MetadataCache.Node)
    /// This mount removed `path` (unlink, rmdir); for a directory, what
    /// was known below it goes too.
    case removed(String, directory: Bool)
    /// This mount renamed `from` to `to`: a file, with its copy's
    /// metadata; a directory (nil), whose trees are then read again.
    case renamed(from: String, to: String, file: ObjectInfo?)
    /// `path` is now `node`, as the store answered a change this mount
    /// made (chmod, setxattr, an upload) or a stat just made: it replaces
    /// what was known, whatever versions it carries, in the path's entry
    /// and in its directory's listing.
    case patched(String, MetadataCache.Node)
    /// What a lookup's probe, a stat or a listing found `path` to be, at
    /// the time given to `apply` (a directory keeps placeholder metadata
    /// learnt earlier that is newer, or that the reader lacks).
    case stated(String, MetadataCache.Node)
    /// The complete listing of the listed prefix, read from the store.
    case listed(String, ListingCache.Listing)
    /// What is known of `path` may be wrong: a change of it failed
    /// halfway, or a file being written here will say. `listing`: the
    /// object changed behind the mount, so its directory's listing goes too.
    case forgotten(String, listing: Bool)
}
