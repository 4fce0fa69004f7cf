import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// `Listings` alone, with no store and no file system: events in, what the
/// listings answer and the walk requests `launch` was asked for out.
@Suite("listings")
struct ListingsTests {
    private func info(_ name: String) -> ObjectInfo {
        ObjectInfo(name: name, size: 1, generation: 1, updated: Date(timeIntervalSince1970: 0))
    }

    private func listings() -> Listings {
        Listings(.init(MountOptions(statTTL: 60, negativeTTL: 5), InMemoryObjectStore()), maxEntries: 1000)
    }

    @Test func aProbesCompletePageAnswersLookupsAndAPartialOneIsOpendirsHeadOnce() {
        var listings = listings()
        let launch: Listings.Launch = { _, _, _ in Task {} }
        listings.keepProbe(of: "a/", ListPage(prefixes: ["a/s/"], items: [info("a/x")]), readAt: .zero)
        #expect(listings.node("a/x", now: .seconds(1)) == .file(info("a/x")))
        #expect(listings.node("a/s", now: .seconds(1)) == .directory(placeholder: nil))
        #expect(listings.node("a/y", now: .seconds(1)) == .absent)
        #expect(listings.node("a/y", now: .seconds(6)) == nil, "absent for the negative TTL only")
        listings.keepProbe(of: "b/", ListPage(prefixes: [], items: [info("b/x")], nextPageToken: "t"), readAt: .zero)
        #expect(listings.node("b/x", now: .seconds(1)) == nil, "a first page answers no lookup")
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
        listings.keep("", ListingCache.Listing(prefixes: ["d1/", "d2/", "d3/"], items: [], readAt: .zero))
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
        #expect(Array(listing.items.keys) == ["d3/b"])
        #expect(listings.node("d2/a", now: .seconds(2)) == .file(info("d2/a")))
    }

    @Test func aChangeBelowAWalksRootEndsTheWalk() {
        var listings = listings()
        let launch: Listings.Launch = { _, _, _ in Task {} }
        listings.keep("", ListingCache.Listing(prefixes: ["d1/", "d2/", "d3/"], items: [], readAt: .zero))
        _ = listings.opening("d1/", path: "d1", now: .seconds(1), launch: launch)
        _ = listings.opening("d2/", path: "d2", now: .seconds(1), launch: launch)
        listings.amend("d3/new", .file(info("d3/new")))
        guard case .done(nil) = listings.walkStep("d3/", now: .seconds(1), launch: launch) else {
            Issue.record("no walk covers d3 any more: its opendir lists on its own")
            return
        }
    }
}
