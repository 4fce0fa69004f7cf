import Foundation

/// Listings of a store that names its entries without their metadata
/// (Firebase Storage's v0 API: each item is a name and a bucket, no size;
/// a prefix comes without its `dir/` placeholder, as v0 has no
/// `includeTrailingDelimiter`). readdirplus must answer every entry's
/// attributes, and `ls -l` stats every entry, so the metadata is fetched
/// at opendir: one stat per item and per subdirectory's placeholder not
/// fresh in the metadata cache, `MountOptions.listingStatWidth` at a time (16
/// by default; scripts/bench/firebase_ls.sh measures the choice), so that
/// N entries cost N requests but about N / width round trips. Without the
/// placeholder's stat a directory would show the mount's default mode and
/// owner instead of its own (a 0700 directory would open up to others).
extension ListingReader {
    /// `page` with full metadata for every item and the placeholder of
    /// every prefix that has one: from the metadata cache when fresh, else from
    /// the store. An item deleted since it was listed is left out, and so
    /// is one the store lists but will not describe (rules that allow list
    /// but not read): it cannot be shown with a true size. A placeholder
    /// that is absent or may not be read leaves its directory with the
    /// mount's defaults. Any other failure fails the listing.
    func withEntryMetadata(_ page: ListPage, listed: String) async throws(FSError) -> ListPage {
        guard !store.capabilities.listingsCarryMetadata, !page.items.isEmpty || !page.prefixes.isEmpty else { return page }
        let now = clock.now
        let known: [String: ObjectInfo] = cache.withLock { s in
            var known: [String: ObjectInfo] = [:]
            for item in page.items {
                if case .file(let info)? = s.node(mountPath(item.name), now: now), info.name == item.name {
                    known[item.name] = info
                }
            }
            for prefix in page.prefixes {
                if case .directory(let placeholder?)? = s.node(mountPath(String(prefix.dropLast())), now: now),
                    placeholder.name == prefix
                {
                    known[prefix] = placeholder
                }
            }
            return known
        }
        let missing = (page.items.map(\.name) + page.prefixes).filter { known[$0] == nil }
        let store = self.store
        let fetched = await boundedConcurrently(missing, width: statWidth) { name async throws(StoreError) in
            try await store.stat(name)
        }
        var byName = known
        for (name, result) in zip(missing, fetched) {
            let placeholder = name.hasSuffix("/")
            switch result {
            case .success(let info) where info.name == name:
                byName[name] = info
            case .success, .failure(.notFound):
                // Absent, or a reply for another name (a store that
                // normalises `a/` to `a`; `statResult` reads it so too).
                logger.debug(placeholder ? "listed directory has no placeholder" : "listed object gone before its stat", metadata: ["object": "\(name)"])
            case .failure(.permissionDenied(let message)):
                logger.debug(
                    placeholder ? "listed directory's placeholder may not be read" : "listed object may not be read; not shown",
                    metadata: ["object": "\(name)", "cause": "\(message)"])
            case .failure(let error):
                throw failure(error, during: .lookup, "stat", mountPath(name))
            }
        }
        var complete = page
        complete.items = page.items.compactMap { byName[$0.name] }
        for prefix in page.prefixes { complete.placeholders[prefix] = byName[prefix] }
        return complete
    }
}
