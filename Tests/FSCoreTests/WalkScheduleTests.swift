import Foundation
import Testing
@testable import FSCore
import TestSupport
import FSCoreTesting

/// `WalkSchedule`: which pages of a walk are requested, and when. Table
/// tests feed it pages directly; the random test drives it against the
/// in-memory store with pages arriving in any order.
@Suite("walk schedule")
struct WalkScheduleTests {
    typealias Request = WalkSchedule.Request

    private func info(_ name: String) -> ObjectInfo {
        ObjectInfo(name: name, size: 1, generation: 1, updated: Date(timeIntervalSince1970: 0))
    }

    private func page(_ names: [String], token: String? = nil) -> ObjectPage {
        ObjectPage(objects: names.map(info), nextPageToken: token)
    }

    private let children = (0..<6).map { "t/d\($0)/" }

    // Checks semantics.md#shows-tree-walks
    @Test func aTreeThatFitsOnePageTakesOneRequestFromTheOpenedDirectory() {
        var schedule = WalkSchedule(root: "t/", children: children.reversed(), opened: "t/d4/", splits: true)
        #expect(schedule.opened("t/d4/") == [Request(range: 0, startOffset: "t/d4/", endOffset: nil, pageToken: nil)])
        #expect(schedule.demand("t/d4/") == (.wait(range: 0), []), "in flight already")
        #expect(schedule.demand("t/d1/") == (.notCovered, []), "listed before the walk started")
        let outcome = schedule.pageRead(0, page(["t/d4/a", "t/d4/e/f", "t/d5/b", "t/z"]), readAt: .zero)
        #expect(!outcome.offsetsIgnored && outcome.requests.isEmpty && schedule.finished)
        #expect(outcome.listings.map(\.0) == ["t/d4/e/", "t/d4/", "t/d5/"], "never the root's own (it saw part of it)")
        #expect(schedule.requestsMade == 1 && schedule.rangeCount == 1)
    }

    // Checks semantics.md#shows-tree-walks
    @Test func aLargeWalkIsSplitIntoRangesReadAheadOfTheDirectoriesOpened() {
        var schedule = WalkSchedule(root: "t/", children: children, opened: "t/d1/", splits: true, maxInFlight: 3, lookahead: 2)
        #expect(schedule.opened("t/d1/") == [Request(range: 0, startOffset: "t/d1/", endOffset: nil, pageToken: nil)])
        // The first page holds only part of d1: one directory a range from
        // here on; range 0 is cut after d1 and read on from its last name.
        var outcome = schedule.pageRead(0, page(["t/d1/0", "t/d1/1", "t/d1/2"], token: "p2"), readAt: .zero)
        #expect(outcome.listings.isEmpty && schedule.rangeCount == 5)
        #expect(outcome.requests == [
            Request(range: 0, startOffset: "t/d1/2", endOffset: "t/d2/", pageToken: nil),
            Request(range: 1, startOffset: "t/d2/", endOffset: "t/d3/", pageToken: nil),
            Request(range: 2, startOffset: "t/d3/", endOffset: "t/d4/", pageToken: nil),
        ], "three in flight, no range more than two ahead of the one opened")
        // A demanded page does not wait for a free slot.
        #expect(schedule.demand("t/d5/x/") == (.wait(range: 4), [Request(range: 4, startOffset: "t/d5/", endOffset: nil, pageToken: nil)]))
        #expect(schedule.inFlight == 4)
        outcome = schedule.pageRead(0, page(["t/d1/2", "t/d1/3"]), readAt: .zero)
        #expect(outcome.listings.map(\.0) == ["t/d1/"] && outcome.listings[0].1.items.count == 4, "the repeated name once")
        #expect(outcome.requests.isEmpty, "d4 is three ranges ahead of d1")
        // Opening d2 moves the window on, to d4 when a slot is free.
        #expect(schedule.opened("t/d2/") == [], "d2, d3 and d5 in flight")
        outcome = schedule.pageRead(1, page(["t/d2/a", "t/d2/s/b"]), readAt: .zero)
        #expect(outcome.listings.map(\.0) == ["t/d2/s/", "t/d2/"])
        #expect(outcome.requests == [Request(range: 3, startOffset: "t/d4/", endOffset: "t/d5/", pageToken: nil)])
        // A range larger than one page reads on when an opendir waits.
        outcome = schedule.pageRead(2, page(["t/d3/a", "t/d3/b"], token: "d3"), readAt: .zero)
        #expect(outcome.listings.isEmpty && outcome.requests.isEmpty, "a one-directory range is not split further")
        #expect(schedule.demand("t/d3/") == (.wait(range: 2), [Request(range: 2, startOffset: "t/d3/", endOffset: "t/d4/", pageToken: "d3")]))
        outcome = schedule.pageRead(2, page(["t/d3/c"]), readAt: .zero)
        #expect(outcome.listings.map(\.0) == ["t/d3/"])
        #expect(schedule.demand("t/d3/") == (.notCovered, []), "passed: its listing was kept, or evicted")
        _ = schedule.pageRead(3, page(["t/d4/a"]), readAt: .zero)
        #expect(!schedule.finished)
        outcome = schedule.pageRead(4, page(["t/d5/x/a", "t/e"]), readAt: .zero)
        #expect(outcome.listings.map(\.0) == ["t/d5/x/", "t/d5/"] && schedule.finished && schedule.inFlight == 0)
    }

    @Test func rangesAreAsLargeAsTheFirstPageShowedOnePageIs() {
        let many = (0..<20).map { "t/d\(String(format: "%02d", $0))/" }
        var schedule = WalkSchedule(root: "t/", children: many, opened: "t/d00/", splits: true, maxInFlight: 10, lookahead: 10)
        _ = schedule.opened("t/d00/")
        // Three directories passed whole, the fourth open: ranges of three.
        let outcome = schedule.pageRead(0, page(["t/d00/a", "t/d01/a", "t/d02/a", "t/d03/a"], token: "x"), readAt: .zero)
        #expect(outcome.listings.map(\.0) == ["t/d00/", "t/d01/", "t/d02/"])
        #expect(outcome.requests.map { [$0.startOffset, $0.endOffset] } == [
            ["t/d03/a", "t/d04/"], ["t/d04/", "t/d07/"], ["t/d07/", "t/d10/"], ["t/d10/", "t/d13/"],
            ["t/d13/", "t/d16/"], ["t/d16/", "t/d19/"], ["t/d19/", nil],
        ])
    }

    @Test func aServerThatIgnoresOffsetsIsNoticed() {
        var schedule = WalkSchedule(root: "t/", children: children, opened: "t/d2/", splits: true)
        _ = schedule.opened("t/d2/")
        var outcome = schedule.pageRead(0, page(["t/d0/a", "t/d1/a", "t/d2/a"], token: "x"), readAt: .zero)
        // The root from its first name: a walk without ranges goes on.
        #expect(outcome.offsetsIgnored && !outcome.ended && !schedule.splits)
        #expect(outcome.listings.map(\.0) == ["t/d0/", "t/d1/"] && outcome.requests.isEmpty)
        #expect(schedule.demand("t/d2/") == (.wait(range: 0), [Request(range: 0, startOffset: nil, endOffset: nil, pageToken: "x")]))
        outcome = schedule.pageRead(0, page(["t/d5/a"]), readAt: .zero)
        #expect(outcome.listings.map(\.0) == ["t/d2/", "t/d5/", "t/"] && schedule.finished)
        // After a split, a range whose offsets are ignored ends the walk.
        var split = WalkSchedule(root: "t/", children: children, opened: "t/d1/", splits: true)
        _ = split.opened("t/d1/")
        _ = split.pageRead(0, page(["t/d1/a"], token: "t/d1/a"), readAt: .zero)
        #expect(split.rangeCount == 5)
        outcome = split.pageRead(1, page(["t/d0/a", "t/d2/a"]), readAt: .zero)
        #expect(outcome.offsetsIgnored && outcome.ended)
        // Without offsets: the whole root, page after page, as before.
        var whole = WalkSchedule(root: "t/", children: children, opened: "t/d2/", splits: false)
        #expect(whole.opened("t/d2/") == [Request(range: 0, startOffset: nil, endOffset: nil, pageToken: nil)])
        var done = whole.pageRead(0, page(["t/d0/a", "t/d1/a"], token: "t/d1/a"), readAt: .zero)
        #expect(done.listings.map(\.0) == ["t/d0/"] && done.requests.isEmpty && whole.rangeCount == 1)
        #expect(whole.demand("t/d1/") == (.wait(range: 0), [Request(range: 0, startOffset: nil, endOffset: nil, pageToken: "t/d1/a")]))
        done = whole.pageRead(0, page(["t/d2/a", "t/f"]), readAt: .zero)
        #expect(done.listings.map(\.0) == ["t/d1/", "t/d2/", "t/"] && whole.finished, "and the root's listing at the end")
    }

    /// Random trees, listed in ranges of small pages that arrive in random
    /// order while directories are opened at random, give every directory
    /// from the opened one on the listing a delimited listing gives, once.
    // Checks semantics.md#shows-tree-walks
    @Test(arguments: [1, 2, 3, 4, 5, 6, 7, 8])
    func rangesInAnyOrderGiveEachDirectoryItsDelimitedListing(seed: Int) async throws {
        var rng = SplitMix64(seed: UInt64(seed))
        let store = InMemoryObjectStore()
        let segments = ["a", "b", "a.b", "a-", "z", "", ".", "é", "c", "d"]
        for _ in 0..<200 {
            let depth = Int(rng.next() % 4) + 1
            var name = (0..<depth).map { _ in segments[Int(rng.next() % UInt64(segments.count))] }.joined(separator: "/")
            if rng.next() % 7 == 0 { name += "/" }
            if !name.isEmpty && name != "/" { store.seed("t/" + name) }
        }
        var rootListing: [String] = []
        var token: String?
        repeat {
            let page = try await store.list(prefix: "t/", pageToken: token, maxResults: 1000)
            rootListing += page.prefixes
            token = page.nextPageToken
        } while token != nil
        let children = rootListing.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        let opened = children[Int(rng.next() % UInt64(children.count))]
        var schedule = WalkSchedule(
            root: "t/", children: children.shuffled(using: &rng), opened: opened, splits: true,
            maxInFlight: Int(rng.next() % 3) + 1, lookahead: Int(rng.next() % 3))
        var pending = schedule.opened(opened)
        var completed: [String: ListingCache.Listing] = [:]
        let walked = children.filter { !$0.utf8.lexicographicallyPrecedes(opened.utf8) }
        var steps = 0
        while true {
            steps += 1
            try #require(steps < 10_000)
            if pending.isEmpty || rng.next() % 4 == 0 {
                // An opendir: of the next directory not listed yet (none
                // left: done), or of any one.
                let next = walked.first { completed[$0] == nil }
                if pending.isEmpty && next == nil { break }
                let listed = next != nil && (pending.isEmpty || rng.next() % 2 == 0) ? next! : children.randomElement(using: &rng)!
                pending += schedule.opened(listed)
                if completed[listed] == nil {
                    let (demand, requests) = schedule.demand(listed)
                    #expect(demand != .notCovered || !walked.contains(listed), "\(listed) not covered")
                    if demand == .notCovered && walked.contains(listed) { break }
                    pending += requests
                }
                continue
            }
            let request = pending.remove(at: Int(rng.next() % UInt64(pending.count)))
            let page = try await store.listFlat(
                prefix: "t/", startOffset: request.startOffset, endOffset: request.endOffset,
                pageToken: request.pageToken, maxResults: 3)
            let outcome = schedule.pageRead(request.range, page, readAt: .zero)
            #expect(!outcome.offsetsIgnored)
            for (listed, listing) in outcome.listings {
                #expect(completed[listed] == nil, "\(listed) completed twice")
                completed[listed] = listing
            }
            pending += outcome.requests
        }
        #expect(schedule.inFlight == 0)
        #expect(completed["t/"] == nil)
        var queue = walked.map { ($0, "t/") }
        var checked = 0
        while let (listed, parent) = queue.popLast() {
            // Only directories a delimited walk reaches through valid names.
            guard PathRules.entryName(ofPrefix: listed, under: parent) != nil else { continue }
            let prefixes = try await expectWalked(completed[listed], asListed: listed, in: store)
            checked += 1
            queue += prefixes.map { ($0, listed) }
        }
        #expect(checked > 3)
    }
}
