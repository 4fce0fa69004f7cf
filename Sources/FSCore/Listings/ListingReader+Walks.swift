/// The pages of walks (see `Listings+Walks.swift` for when and how a
/// subtree is walked): read here, outside the lock, and fed back to the
/// walk's schedule.
extension ListingReader {
    /// The listing of `listed` from the walk that covers it, reading pages
    /// as needed; nil when no walk covers it, the walk failed, or it would
    /// take more than `walkPagesPerOpen` pages.
    func listingFromWalk(_ listed: String) async throws(FSError) -> ListingCache.Kept? {
        for _ in 0...Listings.walkPagesPerOpen {
            let now = clock.now
            switch cache.withLock({ s in s.walkStep(listed, now: now, launch: launch) }) {
            case .done(let listing): return listing
            case .wait(let task):
                // The page is the walk's, not this opendir's: an interrupted
                // opendir stops waiting, the walk goes on.
                guard await task.valueUnlessCancelled() != nil else { throw .interrupted("opendir of /\(listed)") }
            }
        }
        return nil
    }

    /// Makes the page request `request` of the walk `id` of `root`: a Task
    /// that reads the page and feeds it back. Called under the state lock
    /// (by `Listings`), so an opendir that waits for the page finds it.
    func launch(_ root: String, _ id: UInt64, _ request: WalkSchedule.Request) -> Task<Void, Never> {
        Task { await readPage(request, of: root, walk: id) }
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
                pageToken: request.pageToken, maxResults: Listings.pageSize)
        } catch {
            logger.debug("flat listing failed; listing directory by directory", metadata: ["prefix": "\(root)", "cause": "\(error)"])
            cache.withLock { $0.walkFailed(root, walk: id) }
            return
        }
        let offsetsIgnored = cache.withLock { s in
            s.pageRead(request, of: root, walk: id, page, readAt: started, launch: launch)
        }
        if offsetsIgnored {
            logger.debug("the server ignores listing offsets; walking without ranges", metadata: ["prefix": "\(root)"])
        }
    }
}
