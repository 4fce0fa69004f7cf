/// When and how a subtree is listed flat (see `TreeWalk`), in key ranges
/// side by side (see `WalkSchedule`).
///
/// When: an opendir of a *second* subdirectory of a directory whose listing
/// is cached (within statTTL) starts a walk of that directory: a program
/// that opens one subdirectory may be `cd`ing; one that opens two is
/// walking (`find`, `du`, `ls -R`, `cp -r` out of the mount, `rsync`). Not
/// when that subdirectory's listing is cached (a walk further up listed
/// it, and likely its siblings too). The store must list without
/// delimiter (`ObjectStore.supportsFlatListing`).
///
/// How: the walk lists the subdirectories from the one just opened on (the
/// cached listing names them), as one key range at first and, once its
/// first page shows the subtree is larger than a page, as several ranges
/// read side by side, a few ahead of the directories opened
/// (`WalkSchedule`). Each opendir under the walk's root takes its listing
/// from the walk, waiting for the page that completes it (requested at
/// once if it is not in flight). An opendir reads at most
/// `walkPagesPerOpen` pages for itself; a directory further on (a jump
/// rather than a walk) is listed on its own instead, so a wrong guess
/// never costs more than a few pages. Completed listings go to the listing
/// cache, whose entry budget bounds the memory a walk of a million objects
/// can take; one evicted before its opendir is simply listed again.
///
/// A change this mount makes below a walk's root ends the walk (its pages
/// were read before the change; `amend`), as does a failed page. A
/// server that ignores the ranges' offsets is noticed on a walk's first
/// page: that walk and later ones read one range each (the whole root,
/// page after page).
///
/// These are the walks' events; `ListingReader` reads the pages they ask
/// for (`ListingReader+Walks.swift`).
extension Listings {
    /// Pages one opendir may read from a walk before listing on its own.
    static let walkPagesPerOpen = 3
    /// Walks kept at once; the oldest goes when another starts.
    static let walkLimit = 4
    /// Page requests of one walk in flight at once (not counting pages an
    /// opendir waits for), and how many ranges ahead of the furthest
    /// directory opened a walk reads (see `WalkSchedule`).
    static let walkRequestsInFlight = 3
    static let walkRangesAhead = 6

    /// A walk under way and its page requests in flight, by range.
    struct ActiveWalk: Sendable {
        let id: UInt64
        var schedule: WalkSchedule
        var fetches: [Int: Task<Void, Never>] = [:]
    }

    /// What an opendir under a walk does next.
    enum WalkStep {
        /// Take this listing, or (nil) list on its own.
        case done(ListingCache.Kept?)
        /// Wait for the page this Task reads, then ask again.
        case wait(Task<Void, Never>)
    }

    /// Counts the opendir of `listed`, a subdirectory of `parent` (whose
    /// listing is cached when `isListed`); the second one starts a walk of
    /// `parent` unless one covers it already (which then may read further
    /// ahead) or its listing is cached (a walk further up listed it).
    /// Returns the root of a walk it started.
    mutating func subdirectoryOpened(_ listed: String, parent: String, listed isListed: Bool, launch: Launch) -> String? {
        let before = cache.countOpenedSubdirectory(of: parent)
        if let root = walks.first(where: { $0.value.schedule.contains(listed) })?.key {
            var active = walks.removeValue(forKey: root)!
            let requests = active.schedule.opened(listed)
            Self.start(requests, of: root, &active, launch)
            walks[root] = active
            return nil
        }
        guard let before, before >= 1, !isListed, configuration.flatListing, let listing = cache[parent] else { return nil }
        let children = Set(listing.directories.map { PathRules.listingPrefix(configuration.objectPrefix, $0) })
        if walks.count >= Self.walkLimit, let oldest = walks.min(by: { $0.value.id < $1.value.id })?.key {
            walks[oldest] = nil
        }
        nextWalkID += 1
        var active = ActiveWalk(
            id: nextWalkID,
            schedule: WalkSchedule(
                root: parent, children: children, opened: listed, splits: !offsetsIgnored,
                maxInFlight: Self.walkRequestsInFlight, lookahead: Self.walkRangesAhead))
        Self.start(active.schedule.opened(listed), of: parent, &active, launch)
        walks[parent] = active
        return parent
    }

    /// The next step of an opendir of `listed` at `now` that takes its
    /// listing from the walk that covers it.
    mutating func walkStep(_ listed: String, now: Duration, launch: Launch) -> WalkStep {
        // Listed by a page just read (the walk may be over since).
        if let cached = fresh(listed, now: now) { return .done(cached) }
        guard let root = walks.first(where: { $0.value.schedule.contains(listed) })?.key else { return .done(nil) }
        var active = walks.removeValue(forKey: root)!
        defer { walks[root] = active }
        // Passed and not cached: its listing was evicted (every
        // directory that exists has names, so it was listed).
        let (demand, requests) = active.schedule.demand(listed)
        guard case .wait(let range) = demand else { return .done(nil) }
        Self.start(requests, of: root, &active, launch)
        guard let fetch = active.fetches[range] else { return .done(nil) }
        return .wait(fetch)
    }

    /// The page `request` of the walk `id` of `root` was read (its request
    /// started at `readAt`): keeps the listings it completes and makes the
    /// requests that follow. Returns whether the page showed that the
    /// server ignores offsets.
    mutating func pageRead(
        _ request: WalkSchedule.Request, of root: String, walk id: UInt64, _ page: ObjectPage, readAt: Duration, launch: Launch,
        _ entries: inout MetadataCache.Entries
    ) -> Bool {
        // Taken out, so the schedule is changed in place, not copied.
        guard var active = walks.removeValue(forKey: root) else { return false }
        guard active.id == id else {
            walks[root] = active
            return false
        }
        active.fetches[request.range] = nil
        let outcome = active.schedule.pageRead(request.range, page, readAt: readAt)
        if outcome.offsetsIgnored { offsetsIgnored = true }
        if outcome.ended { return outcome.offsetsIgnored }
        for (listed, listing) in outcome.listings { keep(listed, listing, &entries) }
        guard !active.schedule.finished else { return outcome.offsetsIgnored }
        Self.start(outcome.requests, of: root, &active, launch)
        walks[root] = active
        return outcome.offsetsIgnored
    }

    /// A page of the walk `id` of `root` failed: the walk ends (the
    /// opendirs waiting for it list on their own).
    mutating func walkFailed(_ root: String, walk id: UInt64) {
        if walks[root]?.id == id { walks[root] = nil }
    }

    /// Makes `requests` of the walk of `root` (each a Task that reads the
    /// page and feeds it back), with the walk taken out of `walks`.
    private static func start(
        _ requests: [WalkSchedule.Request], of root: String, _ active: inout ActiveWalk, _ launch: Launch
    ) {
        for request in requests { active.fetches[request.range] = launch(root, active.id, request) }
    }
}
