import Foundation

/// When and how a subtree is listed flat (see `TreeWalk`).
///
/// When: an opendir of a *second* subdirectory of a directory whose listing
/// is cached (within statTTL) starts a walk of that directory: a program
/// that opens one subdirectory may be `cd`ing; one that opens two is
/// walking (`find`, `du`, `ls -R`, `cp -r` out of the mount, `rsync`). The
/// store must list without delimiter (`ObjectStore.supportsFlatListing`).
///
/// How: each opendir under the walk's root takes its listing from the walk,
/// reading the next page (1,000 objects) only when the directory is not
/// complete yet, and the page after it meanwhile (one page ahead at most). An opendir reads at most `walkPagesPerOpen` pages for
/// itself; a directory further on (a jump rather than a walk) is listed on
/// its own instead, so a wrong guess never costs more than a few pages.
/// Completed listings go to the listing cache, whose entry budget bounds
/// the memory a walk of a million objects can take; one evicted before its
/// opendir is simply listed again.
///
/// A change this mount makes below a walk's root ends the walk (its pages
/// were read before the change; `amendListing`), as does a failed page.
extension FileSystem {
    /// Pages one opendir may read from a walk before listing on its own.
    static let walkPagesPerOpen = 3
    /// Walks kept at once; the oldest goes when another starts.
    static let walkLimit = 4

    /// Counts the opendir of `listed`, a subdirectory of `parent`; the
    /// second one starts a walk of `parent` unless one covers it already.
    func noteSubdirectoryOpened(_ listed: String, parent: String, _ s: inout State) {
        guard let before = s.listings.countOpenedSubdirectory(of: parent), before >= 1,
            store.supportsFlatListing,
            !s.walks.values.contains(where: { $0.walk.contains(listed) })
        else { return }
        if s.walks.count >= Self.walkLimit, let oldest = s.walks.min(by: { $0.value.id < $1.value.id })?.key {
            s.walks[oldest] = nil
        }
        s.nextWalkID += 1
        s.walks[parent] = ActiveWalk(id: s.nextWalkID, walk: TreeWalk(root: parent), fetch: nil)
        logger.debug("walking a subtree with one flat listing", metadata: ["prefix": "\(parent)"])
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
                guard let (root, active) = s.walks.first(where: { $0.value.walk.contains(listed) }) else { return .done(nil) }
                // Passed and not cached: its listing was evicted (every
                // directory that exists has names, so it was listed).
                if active.walk.hasPassed(listed) { return .done(nil) }
                if let fetch = active.fetch { return .wait(fetch) }
                let task = Task { await self.readNextPage(of: root, walk: active.id, prefetch: false) }
                s.walks[root]?.fetch = task
                return .wait(task)
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

    /// Reads the next page of the walk `id` of `root` and keeps the
    /// listings it completes; a failure ends the walk (the opendirs
    /// waiting for it list on their own). A page an opendir waited for is
    /// followed by a read of the one after (`prefetch`), so the server
    /// works on it while the walker goes through this one; a prefetched
    /// page is not followed, so a walk never runs more than one page ahead
    /// of what was asked of it.
    private func readNextPage(of root: String, walk id: UInt64, prefetch: Bool) async {
        // nil: the walk is gone; .some(nil): its first page.
        guard let token = state.withLock({ s -> String?? in
            guard let active = s.walks[root], active.id == id else { return nil }
            return .some(active.walk.nextPageToken)
        }) else { return }
        let started = clock.now
        let page: ObjectPage
        do {
            page = try await store.listFlat(prefix: root, pageToken: token, maxResults: Self.listPageSize)
        } catch {
            logger.debug("flat listing failed; listing directory by directory", metadata: ["prefix": "\(root)", "cause": "\(error)"])
            state.withLock { s in if s.walks[root]?.id == id { s.walks[root] = nil } }
            return
        }
        state.withLock { s in
            guard var active = s.walks[root], active.id == id else { return }
            for (listed, listing) in active.walk.consume(page, readAt: started) { keepListing(listed, listing, &s) }
            active.fetch = nil
            if !active.walk.finished && !prefetch {
                active.fetch = Task { await self.readNextPage(of: root, walk: id, prefetch: true) }
            }
            s.walks[root] = active.walk.finished ? nil : active
        }
    }
}
