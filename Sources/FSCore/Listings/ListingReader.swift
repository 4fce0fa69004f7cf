import Logging

/// The listings' I/O: reads from the store what the metadata cache's
/// listings lack and feeds it back under the cache's lock:
/// opendir's listing of a directory (whole, or its first page and then
/// the rest, page by page, for the file system to feed to the handle and
/// to the listing kept: `opening`, `rest`), the page that relists a small
/// directory for a lookup, the pages of walks (`ListingReader+Walks.swift`)
/// and the stats that complete a listing without metadata
/// (`ListingReader+EntryMetadata.swift`). It has the store, the clock and
/// the metadata cache in its lock, and nothing else of the file system:
/// the lock is taken only to ask or change the cache, never across an
/// await.
struct ListingReader: Sendable {
    let store: any ObjectStore
    let clock: any MonotonicClock
    let logger: Logger
    let cache: LockedMetadataCache
    /// The very configuration `Listings` has (statTTL, zero: no listing is
    /// kept; the object prefix; whether listings carry metadata).
    let configuration: Listings.Configuration
    /// Stats that complete a listing without metadata, at once
    /// (`MountOptions.listingStatWidth`).
    let statWidth: Int

    /// What opendir of `listed` (the directory at mount path `path`) starts
    /// from.
    enum Opening: Sendable {
        /// The whole listing.
        case listing(ListingCache.Opened)
        /// The first page of a listing that has more, requested at
        /// `readAt`: the rest arrive while readdir answers (`rest`).
        case arriving(ListPage, readAt: Duration)
    }

    /// The listing of `listed` (the directory at mount path `path`) as
    /// opendir starts from it: the cached one when it is younger than
    /// statTTL (0 turns the cache off), else from a walk of the subtree it
    /// lies in (`TreeWalk`), else its first page from the store (or the one
    /// a lookup's probe just read): the whole listing when that is all,
    /// else the page, and `rest` reads the others. A listing whose items
    /// need a stat each (v0's) is read whole.
    func opening(of listed: String, path: String) async throws(FSError) -> Opening {
        let started = clock.now
        var head: Listings.Head?
        if configuration.ttl > .zero {
            let (cached, probed, walkStarted, inFlight) = cache.withLock { s in
                let (cached, probed, walkStarted) = s.opening(listed, path: path, now: started, launch: launch)
                return (cached, probed, walkStarted, cached == nil ? s.listings.arriving[listed]?.task : nil)
            }
            if let walkStarted {
                logger.debug("walking a subtree with flat listings", metadata: ["prefix": "\(walkStarted)"])
            }
            if let cached { return .listing(.kept(cached)) }
            if let inFlight {
                // Another handle is reading this listing page by page: wait
                // for it to be kept (`ls -l` twice in a row).
                guard await inFlight.valueUnlessCancelled() != nil else { throw .interrupted("opendir of /\(listed)") }
                if let kept = cache.withLock({ $0.listings.fresh(listed, now: clock.now) }) { return .listing(.kept(kept)) }
            }
            if probed == nil, let walked = try await listingFromWalk(listed) { return .listing(.kept(walked)) }
            head = probed
        }
        guard configuration.carryMetadata else {
            var whole = try await wholeListing(of: listed, path: path, after: head?.page)
            // Stats for the items only when what they find is kept.
            if configuration.ttl > .zero { whole = try await withEntryMetadata(whole, listed: listed) }
            return .listing(keep(listed, ListingCache.Listing(whole, readAt: head?.readAt ?? started, completedAt: clock.now)))
        }
        if let head { return .arriving(head.page, readAt: head.readAt) }
        let first: ListPage
        do {
            first = try await store.list(prefix: listed, pageToken: nil, maxResults: Listings.pageSize)
        } catch {
            throw failure(error, during: .list, "list", path + "/")
        }
        guard first.nextPageToken == nil else { return .arriving(first, readAt: started) }
        return .listing(keep(listed, ListingCache.Listing(first, readAt: started, completedAt: clock.now)))
    }

    /// The pages of the listing of `listed` after `first` (an `arriving`
    /// opening's), each given to `each` as it arrives.
    func rest(of listed: String, path: String, after first: ListPage, _ each: (ListPage) -> Void) async throws(FSError) {
        do {
            try await store.listPages(prefix: listed, after: first.nextPageToken, maxResults: Listings.pageSize, each)
        } catch {
            // The handle was released first (not a failure to log).
            if case .cancelled = error { throw .interrupted("listing of /\(path)") }
            throw failure(error, during: .list, "list", path + "/")
        }
    }

    /// Keeps `listing` of `listed` when listings are kept and the cache's
    /// budget takes it; as opendir then has it.
    private func keep(_ listed: String, _ listing: ListingCache.Listing) -> ListingCache.Opened {
        guard configuration.ttl > .zero else { return .read(listing) }
        return cache.withLock { c in
            c.apply(.listed(listed, listing), now: listing.readAt)
            // Not kept when over the listing cache's whole budget.
            return c.listings.cache[listed].map { .kept($0) } ?? .read(listing)
        }
    }

    /// The listing of `listed` (the directory at mount path `path`) from
    /// the store, every page, whatever is cached, and not kept.
    func readListing(of listed: String, path: String) async throws(FSError) -> ListingCache.Listing {
        let started = clock.now
        let whole = try await withEntryMetadata(wholeListing(of: listed, path: path), listed: listed)
        return ListingCache.Listing(whole, readAt: started, completedAt: clock.now)
    }

    /// Every page of the listing of `listed` (the directory at mount path
    /// `path`), as one page; after `head` (its first page) when given.
    func wholeListing(of listed: String, path: String, after head: ListPage? = nil) async throws(FSError) -> ListPage {
        var whole = head ?? ListPage(prefixes: [], items: [])
        let token = head?.nextPageToken
        whole.nextPageToken = nil
        if head != nil && token == nil { return whole }
        do {
            try await store.listPages(prefix: listed, after: token, maxResults: Listings.pageSize) { page in
                whole.prefixes += page.prefixes
                whole.items += page.items
                whole.placeholders.merge(page.placeholders) { _, later in later }
            }
        } catch {
            throw failure(error, during: .list, "list", path + "/")
        }
        return whole
    }

    /// Every object whose name starts with `path/`, the placeholder
    /// `path/` itself included, by walking the delimiter listings.
    func objectsBelow(_ path: String) async throws(FSError) -> [ObjectInfo] {
        var found: [ObjectInfo] = []
        if case .success(let own) = await store.statResult(configuration.objectPrefix + path + "/") { found.append(own) }
        var queue = [configuration.objectPrefix + path + "/"]
        while let prefix = queue.popLast() {
            let page = try await wholeListing(of: prefix, path: String(mountPath(prefix).dropLast()))
            found += page.items
            queue += page.prefixes
            for placeholder in page.placeholders.keys {
                if case .success(let info) = await store.statResult(placeholder) { found.append(info) }
                if !page.prefixes.contains(placeholder) { queue.append(placeholder) }
            }
        }
        return found
    }

    /// What `path` is, from a new listing of its directory, when the mount
    /// keeps a listing of it that is too old to answer and small (one
    /// page): one request that answers this lookup and, for the next
    /// negative TTL, every other name there. A program creating many files
    /// in one directory (a shell loop, `tar x`, `cp -r` into the mount)
    /// then costs one listing per negative TTL instead of a probe (three
    /// requests) per new name. nil: no such listing; the caller probes.
    func relistedNode(_ path: String) async throws(FSError) -> MetadataCache.Node? {
        let directory = PathRules.parent(of: path)
        let listed = PathRules.listingPrefix(configuration.objectPrefix, directory)
        guard configuration.ttl > .zero, configuration.carryMetadata,
            let old = cache.withLock({ $0.listings.cache[listed] }), old.entryCount < Listings.pageSize
        else { return nil }
        let started = clock.now
        let page: ListPage
        do {
            page = try await store.list(prefix: listed, pageToken: nil, maxResults: Listings.pageSize)
        } catch {
            throw failure(error, during: .lookup, "list", directory + "/")
        }
        guard page.nextPageToken == nil else { return nil }
        let listing = ListingCache.Listing(page, readAt: started, completedAt: clock.now)
        return cache.withLock { s in
            s.apply(.listed(listed, listing), now: started)
            return s.answer(path, now: started)
        }
    }

    /// The first page of the listing of `prefix`, for a lookup's probe
    /// (whether a directory has names below it), kept for opendir.
    func probe(_ prefix: String) async -> Result<ListPage, StoreError> {
        do {
            let started = clock.now
            // A whole page, not one entry: the opendir that usually follows
            // a directory's lookup then asks nothing (a directory of up to
            // 1,000 entries) or goes on from the second page.
            let page = try await store.list(prefix: prefix, pageToken: nil, maxResults: Listings.pageSize)
            if configuration.ttl > .zero { cache.withLock { $0.keepProbe(of: prefix, page, readAt: started) } }
            return .success(page)
        } catch {
            return .failure(error)
        }
    }

    /// Whether the store lists any name below directory `path` (one
    /// small page: an object, a subdirectory or a placeholder).
    func listsNames(below path: String) async throws(FSError) -> Bool {
        do {
            let page = try await store.list(prefix: configuration.objectPrefix + path + "/", pageToken: nil, maxResults: 2)
            return !page.items.isEmpty || !page.prefixes.isEmpty || !page.placeholders.isEmpty
        } catch {
            throw failure(error, during: .list, "list", path + "/")
        }
    }

    /// The mount path of object `name` (below the mounted prefix).
    func mountPath(_ name: String) -> String { String(name.dropFirst(configuration.objectPrefix.count)) }

    /// The errno for a store failure at mount path `path`, logged.
    func failure(_ error: StoreError, during storeOperation: StoreOperation, _ operation: String, _ path: String) -> FSError {
        .logged(error, during: storeOperation, operation, path: path, object: configuration.objectPrefix + path, logger: logger)
    }
}
