import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// The listings in the metadata cache, with no store and no file system:
/// events in, what the cache answers and the walk requests `launch` was
/// asked for out.
@Suite("listings")
struct ListingsTests {
    private func info(_ name: String) -> ObjectInfo {
        ObjectInfo(name: name, size: 1, generation: 1, updated: Date(timeIntervalSince1970: 0))
    }

    private func listings() -> MetadataCache {
        MetadataCache(.init(MountOptions(statTTL: 60, negativeTTL: 5), InMemoryObjectStore()), capacity: 1000)
    }

    @Test func aProbesCompletePageAnswersLookupsAndAPartialOneIsOpendirsHeadOnce() {
        var listings = listings()
        let launch: Listings.Launch = { _, _, _ in Task {} }
        listings.keepProbe(of: "a/", ListPage(prefixes: ["a/s/"], items: [info("a/x")]), readAt: .zero)
        #expect(listings.answer("a/x", now: .seconds(1)) == .file(info("a/x")))
        #expect(listings.answer("a/s", now: .seconds(1)) == .directory(placeholder: nil))
        #expect(listings.answer("a/y", now: .seconds(1)) == .absent)
        #expect(listings.answer("a/y", now: .seconds(6)) == nil, "absent for the negative TTL only")
        listings.keepProbe(of: "b/", ListPage(prefixes: [], items: [info("b/x")], nextPageToken: "t"), readAt: .zero)
        #expect(listings.answer("b/x", now: .seconds(1)) == nil, "a first page answers no lookup")
        let opening = listings.opening("b/", path: "b", now: .seconds(1), launch: launch)
        #expect(opening.cached == nil && opening.head?.page.nextPageToken == "t")
        #expect(listings.opening("b/", path: "b", now: .seconds(1), launch: launch).head == nil, "taken by one opendir")
    }

    @Test func aSecondSubdirectoryOpenedStartsAWalkWhosePagesAnswerTheOpendirs() {
        var listings = listings()
        var launched: [WalkSchedule.Request] = []
        let launch: Listings.Launch = { _, _, request in
            launched.append(request)
            return Task {}
        }
        listings.apply(.listed("", ListingCache.Listing(prefixes: ["d1/", "d2/", "d3/"], items: [], readAt: .zero)), now: .zero)
        #expect(listings.opening("d1/", path: "d1", now: .seconds(1), launch: launch).walkStarted == nil, "maybe a cd")
        #expect(listings.opening("d2/", path: "d2", now: .seconds(1), launch: launch).walkStarted == "")
        #expect(launched.map(\.startOffset) == ["d2/"])
        guard case .wait = listings.walkStep("d3/", now: .seconds(1), launch: launch) else {
            Issue.record("d3's listing is the walk's page in flight")
            return
        }
        let ignored = listings.pageRead(
            launched[0], of: "", walk: 1, ObjectPage(objects: [info("d2/a"), info("d3/b")]), readAt: .seconds(1), launch: launch)
        #expect(!ignored)
        guard case .done(let listing?) = listings.walkStep("d3/", now: .seconds(2), launch: launch) else {
            Issue.record("the page completed d3's listing")
            return
        }
        #expect(listing.files == ["d3/b"] && listing.directories.isEmpty)
        #expect(listings.answer("d2/a", now: .seconds(2)) == .file(info("d2/a")))
    }

    @Test func aChangeBelowAWalksRootEndsTheWalk() {
        var listings = listings()
        let launch: Listings.Launch = { _, _, _ in Task {} }
        listings.apply(.listed("", ListingCache.Listing(prefixes: ["d1/", "d2/", "d3/"], items: [], readAt: .zero)), now: .zero)
        _ = listings.opening("d1/", path: "d1", now: .seconds(1), launch: launch)
        _ = listings.opening("d2/", path: "d2", now: .seconds(1), launch: launch)
        listings.apply(.created("d3/new", .file(info("d3/new"))), now: .seconds(1))
        guard case .done(nil) = listings.walkStep("d3/", now: .seconds(1), launch: launch) else {
            Issue.record("no walk covers d3 any more: its opendir lists on its own")
            return
        }
    }

    @Test func aListingIsNamesIntoTheOneTableSoAChangeShowsInBoth() {
        var cache = listings()
        cache.apply(.listed("d/", ListingCache.Listing(prefixes: ["d/s/"], items: [info("d/f")], readAt: .zero)), now: .zero)
        #expect(cache.node("d/f", now: .seconds(1)) == .file(info("d/f")), "the listing's metadata is the entry")
        var chmodded = info("d/s/")
        chmodded.customMetadata = [AttributeMapper.modeKey: "700"]
        cache.apply(.patched("d/s", .directory(placeholder: chmodded)), now: .seconds(1))
        #expect(cache.answer("d/s", now: .seconds(2)) == .directory(placeholder: chmodded))
        #expect(cache.listings.cache["d/"]?.directories == ["d/s"], "still named by the listing")
        #expect(cache.entries.stored("d/s") == .directory(placeholder: chmodded), "whose entry is the one just changed")
        cache.apply(.removed("d/f", directory: false), now: .seconds(2))
        #expect(cache.listings.cache["d/"]?.files == [])
        #expect(cache.answer("d/f", now: .seconds(3)) == .absent)
        cache.apply(.stated("d/g", .file(info("d/g"))), now: .seconds(3))
        #expect(cache.listings.cache["d/"]?.files == ["d/g"], "a stat's finding names it in the listing too")
        #expect(cache.entries.pinnedCount == 2)
        cache.apply(.forgotten("d/g", listing: false), now: .seconds(4))
        #expect(cache.listings.cache["d/"] == nil, "a listing that names a forgotten entry goes")
        #expect(cache.entries.pinnedCount == 0)
    }
}
