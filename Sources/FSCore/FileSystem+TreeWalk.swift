import Foundation

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
/// were read before the change; `amendListing`), as does a failed page. A
/// server that ignores the ranges' offsets is noticed on a walk's first
/// page: that walk and later ones read one range each (the whole root,
/// page after page).
extension FileSystem {
    /// Pages one opendir may read from a walk before listing on its own.
    static let walkPagesPerOpen = 3
    /// Walks kept at once; the oldest goes when another starts.
    static let walkLimit = 4
    /// Page requests of one walk in flight at once (not counting pages an
    /// opendir waits for), and how many ranges ahead of the furthest
    /// directory opened a walk reads (see `WalkSchedule`).
    static let walkRequestsInFlight = 3
    static let walkRangesAhead = 6

    /// Counts the opendir of `listed`, a subdirectory of `parent` (whose
    /// listing is cached when `isListed`); the second one starts a walk of
    /// `parent` unless one covers it already (which then may read further
    /// ahead) or its listing is cached (a walk further up listed it).
    func noteSubdirectoryOpened(_ listed: String, parent: String, listed isListed: Bool, _ s: inout State) {
        let before = s.listings.countOpenedSubdirectory(of: parent)
        if let root = s.walks.first(where: { $0.value.schedule.contains(listed) })?.key {
            var active = s.walks.removeValue(forKey: root)!
            let requests = active.schedule.opened(listed)
            start(requests, of: root, &active)
            s.walks[root] = active
            return
        }
        guard let before, before >= 1, !isListed, store.supportsFlatListing, let children = s.listings[parent]?.prefixes
        else { return }
        if s.walks.count >= Self.walkLimit, let oldest = s.walks.min(by: { $0.value.id < $1.value.id })?.key {
            s.walks[oldest] = nil
        }
        s.nextWalkID += 1
        var active = ActiveWalk(
            id: s.nextWalkID,
            schedule: WalkSchedule(
                root: parent, children: children, opened: listed, splits: !s.listingOffsetsIgnored,
                maxInFlight: Self.walkRequestsInFlight, lookahead: Self.walkRangesAhead))
        start(active.schedule.opened(listed), of: parent, &active)
        s.walks[parent] = active
        logger.debug("walking a subtree with flat listings", metadata: ["prefix": "\(parent)"])
    }

    /// The listing of `listed` from the walk that covers it, reading pages
    /// as needed; nil when no walk covers it, the walk failed, or it would
    /// take more than `walkPagesPerOpen` pages.
    func listingFromWalk(_ listed: String, ttl: Duration) async throws(FSError) -> ListingCache.Listing? {
        enum Step {
            case done(ListingCache.Listing?)
            case wait(Task<Void, Never>)
        }
        for _ in 0...Self.walkPagesPerOpen {
            let now = clock.now
            let step = state.withLock { s -> Step in
                // Listed by a page just read (the walk may be over since).
                if let cached = s.listings[listed], now - cached.readAt < ttl { return .done(cached) }
                guard let root = s.walks.first(where: { $0.value.schedule.contains(listed) })?.key else { return .done(nil) }
                var active = s.walks.removeValue(forKey: root)!
                defer { s.walks[root] = active }
                // Passed and not cached: its listing was evicted (every
                // directory that exists has names, so it was listed).
                let (demand, requests) = active.schedule.demand(listed)
                guard case .wait(let range) = demand else { return .done(nil) }
                start(requests, of: root, &active)
                guard let fetch = active.fetches[range] else { return .done(nil) }
                return .wait(fetch)
            }
            switch step {
            case .done(let listing): return listing
            case .wait(let task):
                // The page is the walk's, not this opendir's: an interrupted
                // opendir stops waiting, the walk goes on.
                guard await task.valueUnlessCancelled() != nil else { throw .interrupted("opendir of /\(listed)") }
            }
        }
        return nil
    }

    /// Makes `requests` of the walk of `root` (each a Task that reads the
    /// page and feeds it back); called under the state lock, with the walk
    /// taken out of it.
    private func start(_ requests: [WalkSchedule.Request], of root: String, _ active: inout ActiveWalk) {
        let id = active.id
        for request in requests {
            active.fetches[request.range] = Task { await self.readPage(request, of: root, walk: id) }
        }
    }

    /// Reads the page `request` of the walk `id` of `root` and keeps the
    /// listings it completes; a failure ends the walk (the opendirs
    /// waiting for it list on their own).
    private func readPage(_ request: WalkSchedule.Request, of root: String, walk id: UInt64) async {
        let started = clock.now
        let page: ObjectPage
        do {
            page = try await store.listFlat(
                prefix: root, startOffset: request.startOffset, endOffset: request.endOffset,
                pageToken: request.pageToken, maxResults: Self.listPageSize)
        } catch {
            logger.debug("flat listing failed; listing directory by directory", metadata: ["prefix": "\(root)", "cause": "\(error)"])
            state.withLock { s in if s.walks[root]?.id == id { s.walks[root] = nil } }
            return
        }
        state.withLock { s in
            // Taken out, so the schedule is changed in place, not copied.
            guard var active = s.walks.removeValue(forKey: root) else { return }
            guard active.id == id else {
                s.walks[root] = active
                return
            }
            active.fetches[request.range] = nil
            let outcome = active.schedule.pageRead(request.range, page, readAt: started)
            if outcome.offsetsIgnored {
                logger.debug("the server ignores listing offsets; walking without ranges", metadata: ["prefix": "\(root)"])
                s.listingOffsetsIgnored = true
            }
            if outcome.ended { return }
            for (listed, listing) in outcome.listings { keepListing(listed, listing, &s) }
            guard !active.schedule.finished else { return }
            start(outcome.requests, of: root, &active)
            s.walks[root] = active
        }
    }
}
