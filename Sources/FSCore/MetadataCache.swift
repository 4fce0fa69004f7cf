/// What the mount knows of the bucket's names: one table of object
/// metadata by path (`Entries`), and the directories' listings, which are
/// names pointing into it (`Listings`, with the walks that fill them).
///
/// A value in `FileSystem.State`, under its lock. What a name is changes
/// only through `apply`, one event for each thing that happened (this
/// mount created, removed, renamed or changed an object; the store was
/// read). A path's metadata is held once, so a stat and a readdir cannot
/// tell two stories: a change made here shows in the next of either at
/// once, never only after statTTL. The walks' own bookkeeping (which pages
/// are in flight) has its events here too, forwarded to `Listings`.
struct MetadataCache: Sendable {
    enum Node: Sendable, Equatable {
        case file(ObjectInfo)
        /// `placeholder` is the `dir/` object when its metadata is known.
        case directory(placeholder: ObjectInfo?)
        case absent
    }

    /// Where an entry's metadata comes from.
    enum Source: Sendable {
        /// Read from the store (a listing, a stat, a probe), perhaps before
        /// a change this mount made since: a directory keeps placeholder
        /// metadata learnt earlier that is newer, or that a listing lacks.
        case read
        /// The store's answer to a change this mount made (mkdir, chmod,
        /// setxattr): what the object is now. It replaces what was known
        /// whatever versions it carries: a server may leave them out
        /// (fake-gcs-server's PATCH answer has no metageneration) or not
        /// count them, and an accepted change must show at once.
        case changedHere
    }

    private(set) var entries: Entries
    private(set) var listings: Listings

    init(_ configuration: Listings.Configuration, capacity: Int) {
        entries = Entries(ttl: configuration.ttl, negativeTTL: configuration.negativeTTL, capacity: capacity)
        listings = Listings(configuration, maxEntries: capacity)
    }

    // MARK: - Questions

    /// What `path` is, if its entry is fresh at `now`.
    func node(_ path: String, now: Duration) -> Node? {
        entries.lookup(path, now: now)
    }

    /// What `path` is, from its entry, else from its directory's listing:
    /// a name it holds while it is younger than statTTL, absent while it
    /// is younger than the negative TTL (counted from its last page); nil
    /// when neither can tell. O(1) whatever the directory's size.
    func answer(_ path: String, now: Duration) -> Node? {
        if let node = entries.lookup(path, now: now) { return node }
        guard let listing = listings.cache[listings.parentListed(path)] else { return nil }
        if listing.names(path) {
            return now - listing.readAt < listings.configuration.ttl ? entries.stored(path) : nil
        }
        return now - listing.completedAt < listings.configuration.negativeTTL ? .absent : nil
    }

    /// Paths with an entry (fresh or not yet dropped).
    var entryCount: Int { entries.count }

    // MARK: - Changes

    /// Applies `change`, which happened at `now` (a listing: when it was
    /// read, whatever `now` says).
    mutating func apply(_ change: NamespaceChange, now: Duration) {
        switch change {
        case .created(let path, let node):
            entries.insert(path, node, now: now, source: .changedHere)
            listings.created(path, node, now: now, &entries)
        case .removed(let path, let directory):
            if directory { entries.remove(tree: path) }
            entries.insert(path, .absent, now: now)
            listings.removed(path, &entries)
        case .renamed(let source, let target, let file?):
            entries.insert(source, .absent, now: now)
            entries.insert(target, .file(file), now: now)
            listings.amend(source, .absent, &entries)
            listings.amend(target, .file(file), &entries)
        case .renamed(let source, let target, nil):
            entries.remove(tree: source)
            entries.remove(tree: target)
            // Every listing below either tree, and the walks that read
            // pages of them, would show the names from before.
            listings.removeAll(walks: true, &entries)
        case .patched(let path, let node):
            entries.insert(path, node, now: now, source: .changedHere)
            listings.amend(path, node, &entries)
        case .stated(let path, let node):
            entries.insert(path, node, now: now)
            // The directory's listing names what the entry now says (no
            // walk ends: nothing changed in the bucket because of this).
            listings.restate(path, node, &entries)
        case .listed(let listed, let listing):
            listings.keep(listed, listing, &entries)
        case .forgotten(let path, let listing):
            entries.remove(path)
            // A listing that names it could not give its metadata.
            let parent = listings.parentListed(path)
            if listing || listings.cache[parent]?.names(path) == true { listings.forget(parent, &entries) }
        }
    }

    /// Forgets everything but the walks under way (an operator asked to
    /// drop the caches); returns the paths that were known to be absent,
    /// whose negative entries the kernel may hold too.
    mutating func removeAll() -> [String] {
        listings.removeAll(walks: false, &entries)
        return entries.removeAll()
    }

    // MARK: - The listings' events (see `Listings`)

    mutating func opening(_ listed: String, path: String, now: Duration, launch: Listings.Launch)
        -> (cached: ListingCache.Kept?, head: Listings.Head?, walkStarted: String?)
    {
        listings.opening(listed, path: path, now: now, launch: launch)
    }

    mutating func listingArriving(_ listed: String, handle: UInt64, task: Task<Void, Never>, readAt: Duration) {
        listings.arriving(listed, handle: handle, task: task, readAt: readAt)
    }

    mutating func listingPageArrived(_ listed: String, handle: UInt64, _ children: [(String, Node)], last: Bool, now: Duration) {
        listings.arrivedPage(listed, handle: handle, children, &entries)
        if last { listings.arrivedAll(listed, handle: handle, now: now, &entries) }
    }

    mutating func listingArrivalEnded(_ listed: String, handle: UInt64) {
        listings.arrivalEnded(listed, handle: handle)
    }

    mutating func keepProbe(of listed: String, _ page: ListPage, readAt: Duration) {
        listings.keepProbe(of: listed, page, readAt: readAt, &entries)
    }

    mutating func walkStep(_ listed: String, now: Duration, launch: Listings.Launch) -> Listings.WalkStep {
        listings.walkStep(listed, now: now, launch: launch)
    }

    mutating func pageRead(
        _ request: WalkSchedule.Request, of root: String, walk id: UInt64, _ page: ObjectPage, readAt: Duration,
        launch: Listings.Launch
    ) -> Bool {
        listings.pageRead(request, of: root, walk: id, page, readAt: readAt, launch: launch, &entries)
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
    /// what was known, whatever versions it carries.
    case patched(String, MetadataCache.Node)
    /// What a lookup's probe or a stat found `path` to be, at the time
    /// given to `apply` (a directory keeps placeholder metadata learnt
    /// earlier that is newer, or that the reader lacks).
    case stated(String, MetadataCache.Node)
    /// The complete listing of the listed prefix, read from the store.
    case listed(String, ListingCache.Listing)
    /// What is known of `path` may be wrong: a change of it failed
    /// halfway, or a file being written here will say. `listing`: the
    /// object changed behind the mount, so its directory's listing goes too.
    case forgotten(String, listing: Bool)
}
