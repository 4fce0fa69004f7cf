import Foundation
import Testing
@testable import FSCore
import TestSupport
import FSCoreTesting

@Suite("listing cache and tree walks")
struct TreeWalkTests {
    private func info(_ name: String) -> ObjectInfo {
        ObjectInfo(name: name, size: 1, generation: 1, updated: Date(timeIntervalSince1970: 0))
    }

    // Checks semantics.md#shows-caching
    @Test func listingCacheIsBoundedByEntriesAndAmendsInPlace() {
        var entries = MetadataCache.Entries(ttl: .seconds(60), negativeTTL: .seconds(5), capacity: 100)
        /// A kept listing of `path` naming `files` and `directories`, their
        /// entries in the one table first (as `Listings.keep` does).
        func kept(_ path: String, files: [String], directories: [String] = []) -> ListingCache.Kept {
            var kept = ListingCache.Kept(path: path, readAt: .zero, completedAt: .zero)
            for file in files {
                entries.insert(file, .file(info(file)), now: .zero)
                kept.files.insert(file)
            }
            for directory in directories {
                entries.insert(directory, .directory(placeholder: nil), now: .zero)
                kept.directories.insert(directory)
            }
            return kept
        }
        var cache = ListingCache(maxEntries: 10, maxListings: 3)
        cache.store("a/", kept("a", files: ["a/1", "a/2"], directories: ["a/x"]), &entries)
        cache.store("b/", kept("b", files: (0..<5).map { "b/\($0)" }), &entries)
        #expect(cache.entryCount == 8 && entries.pinnedCount == 8, "a kept listing pins the entries it names")
        cache.store("c/", kept("c", files: (0..<4).map { "c/\($0)" }), &entries)
        #expect(cache["a/"] == nil, "the oldest listing went to make room")
        #expect(cache.entryCount == 9 && cache.count == 2)
        #expect(entries.pinnedCount == 9, "and unpinned its entries")
        cache.store("huge/", kept("huge", files: (0..<11).map { "huge/\($0)" }), &entries)
        #expect(cache["huge/"] == nil && cache.count == 2, "a listing over the whole budget is not kept")
        #expect(entries.pinnedCount == 9)

        entries.insert("b/new", .file(info("b/new")), now: .zero)
        cache.amend("b/", path: "b/new", .file(info("b/new")), &entries)
        entries.insert("b/0", .absent, now: .zero)
        cache.amend("b/", path: "b/0", .absent, &entries)
        entries.insert("b/sub", .directory(placeholder: info("b/sub/")), now: .zero)
        cache.amend("b/", path: "b/sub", .directory(placeholder: info("b/sub/")), &entries)
        #expect(cache["b/"]!.names("b/new") && !cache["b/"]!.names("b/0") && cache["b/"]!.directories.contains("b/sub"))
        #expect(entries.stored("b/sub") == .directory(placeholder: info("b/sub/")), "with its placeholder, in the one table")
        #expect(cache.entryCount == 10 && entries.pinnedCount == 10)
        cache.amend("missing/", path: "missing/x", .file(info("missing/x")), &entries)
        #expect(cache["missing/"] == nil, "only kept listings are amended")
        #expect(cache.countOpenedSubdirectory(of: "b/") == 0 && cache.countOpenedSubdirectory(of: "b/") == 1)
        #expect(cache.countOpenedSubdirectory(of: "missing/") == nil)
    }

    /// Random trees, listed flat in small pages and cut by the walk, give
    /// every valid directory exactly the listing a delimited listing gives.
    // Checks semantics.md#shows-tree-walks
    @Test(arguments: [1, 2, 3, 4, 5])
    func aWalkGivesEachDirectoryItsDelimitedListing(seed: Int) async throws {
        var rng = SplitMix64(seed: UInt64(seed))
        let store = InMemoryObjectStore()
        let segments = ["a", "b", "a.b", "a-", "z", "", ".", "é"]
        for _ in 0..<120 {
            let depth = Int(rng.next() % 4) + 1
            var name = (0..<depth).map { _ in segments[Int(rng.next() % UInt64(segments.count))] }.joined(separator: "/")
            if rng.next() % 7 == 0 { name += "/" }  // a placeholder
            if !name.isEmpty && name != "/" { store.seed("t/" + name) }
        }
        var walk = TreeWalk(root: "t/")
        var completed: [String: ListingCache.Listing] = [:]
        var token: String?
        repeat {
            let page = try await store.listFlat(prefix: "t/", pageToken: token, maxResults: 3)
            for (listed, listing) in walk.consume(page, readAt: .zero) {
                #expect(completed[listed] == nil, "\(listed) completed twice")
                completed[listed] = listing
                #expect(walk.hasPassed(listed) || walk.finished)
            }
            token = page.nextPageToken
        } while token != nil
        #expect(walk.finished)

        // Every directory a delimited walk reaches through valid names.
        var queue = ["t/"]
        var checked = 0
        while let listed = queue.popLast() {
            let prefixes = try await expectWalked(completed[listed], asListed: listed, in: store)
            checked += 1
            queue += prefixes.filter { PathRules.entryName(ofPrefix: $0, under: listed) != nil }
        }
        #expect(checked > 5)
    }

    @Test func aRangedWalkKeepsToItsRangeAndNeverReturnsTheRoot() {
        var walk = TreeWalk(root: "t/", from: "t/b/", to: "t/d/")
        #expect(!walk.isWhole && TreeWalk(root: "t/").isWhole)
        var done = walk.consume(
            ObjectPage(objects: [info("t/a/1"), info("t/b/1"), info("t/b/x/2"), info("t/c")], nextPageToken: "t/c"), readAt: .zero)
        #expect(done.map(\.0) == ["t/b/x/", "t/b/"], "t/a/1 is before the range; t/c is the root's")
        #expect(walk.lastName == "t/c" && !walk.finished)
        // Read again from the last name (after `narrow`): it is skipped.
        walk.narrow(to: "t/c0/")
        #expect(walk.end == "t/c0/")
        walk.narrow(to: "t/z/")
        #expect(walk.end == "t/c0/", "a range only narrows")
        done = walk.consume(ObjectPage(objects: [info("t/c"), info("t/c/1"), info("t/c0/1"), info("t/c0/2")], nextPageToken: "more"), readAt: .zero)
        #expect(done.map(\.0) == ["t/c/"] && walk.finished, "a name past the end finishes it, token or not")
        #expect(walk.nextPageToken == nil && walk.lastName == "t/c/1")
    }

    @Test func aWalkPassesDirectoriesInNameOrder() {
        var walk = TreeWalk(root: "")
        let page = ObjectPage(objects: [info("a/1"), info("a/2"), info("b/1")], nextPageToken: "b/1")
        let done = walk.consume(page, readAt: .zero).map(\.0)
        #expect(done == ["a/"], "a/ is complete once a name outside it arrived; b/ is still open")
        #expect(walk.hasPassed("a/") && walk.hasPassed("a-/") && !walk.hasPassed("b/") && !walk.hasPassed("c/"))
        #expect(walk.contains("b/x/") && TreeWalk(root: "b/").contains("b/x/") && !TreeWalk(root: "b/").contains("c/"))
    }
}
