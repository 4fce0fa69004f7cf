import Foundation

/// Listings of a store that names its items without their metadata
/// (Firebase Storage's v0 API: each item is a name and a bucket, no size).
/// readdirplus must answer every entry's attributes, and `ls -l` stats
/// every entry, so the metadata is fetched at opendir: one stat per item
/// not fresh in the stat cache, `MountOptions.listingStatWidth` at a time
/// (16 by default; scripts/bench/firebase_ls.sh measures the choice), so
/// that N objects cost N requests but about N / width round trips.
extension FileSystem {
    /// `page` with full metadata for every item: from the stat cache when
    /// fresh, else from the store. An item deleted since it was listed is
    /// left out, and so is one the store lists but will not describe
    /// (rules that allow list but not read): it cannot be shown with a
    /// true size. Any other failure fails the listing.
    func withItemMetadata(_ page: ListPage, listed: String) async throws(FSError) -> ListPage {
        guard !store.capabilities.listingsCarryMetadata, !page.items.isEmpty else { return page }
        let now = clock.now
        let known: [String: ObjectInfo] = state.withLock { s in
            var known: [String: ObjectInfo] = [:]
            for item in page.items {
                if case .file(let info)? = s.stats.lookup(mountPath(item.name), now: now), info.name == item.name {
                    known[item.name] = info
                }
            }
            return known
        }
        let missing = page.items.map(\.name).filter { known[$0] == nil }
        let store = self.store
        let fetched = await boundedConcurrently(missing, width: options.listingStatWidth) { name async throws(StoreError) in
            try await store.stat(name)
        }
        var byName = known
        for (name, result) in zip(missing, fetched) {
            switch result {
            case .success(let info):
                byName[name] = info
            case .failure(.notFound):
                logger.debug("listed object gone before its stat", metadata: ["object": "\(name)"])
            case .failure(.permissionDenied(let message)):
                logger.debug("listed object may not be read; not shown", metadata: ["object": "\(name)", "cause": "\(message)"])
            case .failure(let error):
                throw failure(error, "stat", mountPath(name))
            }
        }
        var complete = page
        complete.items = page.items.compactMap { byName[$0.name] }
        return complete
    }

    /// The mount path of object `name` (below the mounted prefix).
    func mountPath(_ name: String) -> String { String(name.dropFirst(objectPrefix.count)) }
}
