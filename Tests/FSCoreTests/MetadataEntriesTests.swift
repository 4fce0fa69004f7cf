import Foundation
import Testing
@testable import FSCore

/// The metadata cache's table of entries: TTLs, placeholders kept,
/// eviction (earliest expiry first, O(1) per name), and the entries kept
/// listings pin.
@Suite("metadata entries") struct MetadataEntriesTests {
    func info(_ name: String) -> ObjectInfo {
        ObjectInfo(name: name, size: 1, generation: 1, updated: Date(timeIntervalSince1970: 0))
    }

    func cache(capacity: Int) -> MetadataCache.Entries {
        MetadataCache.Entries(ttl: .seconds(10), negativeTTL: .seconds(2), capacity: capacity)
    }

    @Test func absentNamesExpireSoonerSoTheyGoFirst() {
        var cache = cache(capacity: 10)
        for i in 0..<5 { cache.insert("f\(i)", .file(info("f\(i)")), now: .milliseconds(i)) }
        for i in 0..<5 { cache.insert("gone\(i)", .absent, now: .milliseconds(10 + i)) }
        cache.insert("f5", .file(info("f5")), now: .milliseconds(20))
        // Over capacity: down to 9, the absent names (expiring at ~2 s)
        // before any file (expiring at ~10 s).
        #expect(cache.count == 9)
        #expect(cache.lookup("gone0", now: .milliseconds(30)) == nil)
        #expect(cache.lookup("gone1", now: .milliseconds(30)) == nil)
        #expect(cache.lookup("gone2", now: .milliseconds(30)) == .absent)
        for i in 0...5 { #expect(cache.lookup("f\(i)", now: .milliseconds(30)) == .file(info("f\(i)"))) }
    }

    @Test func expiredEntriesGoAsNewOnesArriveWithoutWaitingForCapacity() {
        var cache = cache(capacity: 100_000)
        cache.insert("old", .file(info("old")), now: .zero)
        cache.insert("new0", .absent, now: .seconds(11))
        #expect(cache.count == 1, "old expired at 10 s")
        #expect(cache.lookup("new0", now: .seconds(12)) == .absent)
        // A stream of names created and deleted (a build, a backup) keeps
        // only those seen within the TTLs: 2 s of absent names at one every
        // 10 ms, 10 s of files at one every 10 ms.
        for i in 0..<5_000 {
            let now = Duration.seconds(20) + .milliseconds(10 * i)
            cache.insert("gone\(i)", .absent, now: now)
            cache.insert("file\(i)", .file(info("file\(i)")), now: now)
        }
        #expect(cache.count <= 200 + 1_000 + 2)
        #expect(cache.queuedRecords <= cache.count + 2)
        #expect(cache.lookup("file4999", now: .seconds(70)) != nil)
    }

    @Test func insertingAgainRenewsAName() {
        var cache = cache(capacity: 10)
        for i in 0..<10 { cache.insert("n\(i)", .file(info("n\(i)")), now: .milliseconds(i)) }
        cache.insert("n0", .file(info("n0")), now: .milliseconds(10))
        cache.insert("n10", .file(info("n10")), now: .milliseconds(11))
        #expect(cache.count == 9)
        #expect(cache.lookup("n0", now: .milliseconds(20)) != nil, "renewed, so no longer the oldest")
        #expect(cache.lookup("n1", now: .milliseconds(20)) == nil)
        #expect(cache.lookup("n2", now: .milliseconds(20)) == nil)
        #expect(cache.lookup("n3", now: .milliseconds(20)) != nil)
    }

    @Test func aNameRemovedIsNotEvictedInPlaceOfAnother() {
        var cache = cache(capacity: 10)
        for i in 0..<10 { cache.insert("n\(i)", .file(info("n\(i)")), now: .milliseconds(i)) }
        cache.remove("n0")
        cache.insert("n10", .file(info("n10")), now: .milliseconds(10))
        #expect(cache.count == 10, "a removal made room")
        cache.insert("n11", .file(info("n11")), now: .milliseconds(11))
        #expect(cache.count == 9)
        #expect(cache.lookup("n1", now: .milliseconds(20)) == nil)
        #expect(cache.lookup("n2", now: .milliseconds(20)) == nil)
        #expect(cache.lookup("n3", now: .milliseconds(20)) != nil)
    }

    @Test func renewingOneNameForeverKeepsTheQueuesBounded() {
        var cache = cache(capacity: 1000)
        for i in 0..<100_000 { cache.insert("hot", .file(info("hot")), now: .microseconds(i)) }
        #expect(cache.count == 1)
        #expect(cache.queuedRecords <= 2 * cache.count + 1025)
    }

    // Checks semantics.md#shows-caching
    @Test func twoHundredThousandNamesThroughACacheOfTenThousand() {
        var cache = cache(capacity: 10_000)
        for i in 0..<200_000 { cache.insert("d\(i / 1000)/f\(i % 1000)", .file(info("x")), now: .microseconds(i)) }
        #expect(cache.count <= 10_000)
        #expect(cache.lookup("d199/f999", now: .seconds(2)) != nil, "the newest survive")
        #expect(cache.lookup("d0/f0", now: .seconds(2)) == nil)
        #expect(cache.queuedRecords <= 2 * cache.count + 1025)
    }


    @Test func entriesExpireAndAbsentUsesItsOwnTTL() {
        var cache = MetadataCache.Entries(ttl: .seconds(10), negativeTTL: .seconds(2), capacity: 100)
        cache.insert("f", .file(info("f")), now: .zero)
        cache.insert("g", .absent, now: .zero)
        #expect(cache.lookup("f", now: .seconds(9)) == .file(info("f")))
        #expect(cache.lookup("g", now: .seconds(1)) == .absent)
        #expect(cache.lookup("g", now: .seconds(2)) == nil)
        #expect(cache.lookup("f", now: .seconds(10)) == nil)
    }

    @Test func aListingKeepsKnownPlaceholderMetadata() {
        var cache = MetadataCache.Entries(ttl: .seconds(10), negativeTTL: .seconds(2), capacity: 100)
        cache.insert("d", .directory(placeholder: info("d/")), now: .zero)
        cache.insert("d", .directory(placeholder: nil), now: .seconds(1))
        #expect(cache.lookup("d", now: .seconds(2)) == .directory(placeholder: info("d/")))
    }

    @Test func aListingReadBeforeAChangeKeepsTheNewerPlaceholder() {
        var cache = MetadataCache.Entries(ttl: .seconds(10), negativeTTL: .seconds(2), capacity: 100)
        var changed = info("d/")
        changed.metageneration += 1
        changed.customMetadata = [AttributeMapper.modeKey: "40700"]
        cache.insert("d", .directory(placeholder: changed), now: .seconds(1))
        cache.insert("d", .directory(placeholder: info("d/")), now: .zero)
        #expect(cache.lookup("d", now: .seconds(2)) == .directory(placeholder: changed), "the older version does not come back")
        var newer = changed
        newer.metageneration += 1
        cache.insert("d", .directory(placeholder: newer), now: .seconds(2))
        #expect(cache.lookup("d", now: .seconds(3)) == .directory(placeholder: newer), "a newer version replaces it")
    }

    @Test func aChangeMadeHereReplacesThePlaceholderWhateverItsVersions() {
        var cache = MetadataCache.Entries(ttl: .seconds(10), negativeTTL: .seconds(2), capacity: 100)
        cache.insert("d", .directory(placeholder: info("d/")), now: .zero, source: .changedHere)
        // The store's answer to a chmod, without a metageneration (as
        // fake-gcs-server gives it): older by its versions, newer in fact.
        var answer = info("d/")
        answer.metageneration = 0
        answer.customMetadata = [AttributeMapper.modeKey: "700"]
        cache.insert("d", .directory(placeholder: answer), now: .seconds(1), source: .changedHere)
        #expect(cache.lookup("d", now: .seconds(2)) == .directory(placeholder: answer), "the answer, not the older attributes")
    }

    @Test func staysWithinCapacity() {
        var cache = MetadataCache.Entries(ttl: .seconds(10), negativeTTL: .seconds(2), capacity: 100)
        for i in 0..<1000 { cache.insert("n\(i)", .absent, now: .milliseconds(i)) }
        #expect(cache.count <= 100)
        #expect(cache.lookup("n999", now: .seconds(1)) == .absent, "the newest survive")
    }

    @Test func pinnedEntriesOutliveCapacityAndExpiryUntilUnpinned() {
        var cache = cache(capacity: 10)
        for i in 0..<5 {
            cache.insert("listed\(i)", .file(info("listed\(i)")), now: .zero)
            cache.pin("listed\(i)")
        }
        #expect(cache.pinnedCount == 5)
        // Ten more names, and time past every TTL: the pinned five stay,
        // stale but there for their listing; the others share what they
        // leave of the capacity.
        for i in 0..<10 { cache.insert("n\(i)", .file(info("n\(i)")), now: .seconds(20) + .milliseconds(i)) }
        #expect(cache.count <= 10 && cache.pinnedCount == 5)
        #expect(cache.lookup("n9", now: .seconds(20) + .milliseconds(10)) != nil, "the newest stays")
        #expect(cache.lookup("listed0", now: .seconds(21)) == nil, "expired for a stat")
        #expect(cache.stored("listed0") == .file(info("listed0")), "kept for the listing")
        for i in 0..<5 { cache.unpin("listed\(i)") }
        #expect(cache.pinnedCount == 0)
        cache.insert("next", .absent, now: .seconds(21))
        #expect(cache.stored("listed0") == nil && cache.count <= 10, "unpinned: evicted like any other")
    }

    @Test func pinnedEntriesLeaveTheOthersATenthAtLeast() {
        var cache = cache(capacity: 100)
        // Listings pin the whole capacity (their budget is the same).
        for i in 0..<100 {
            cache.insert("listed\(i)", .file(info("listed\(i)")), now: .zero)
            cache.pin("listed\(i)")
        }
        for i in 0..<50 { cache.insert("n\(i)", .file(info("n\(i)")), now: .milliseconds(i)) }
        #expect(cache.count <= 110, "all together within 1.1 × capacity")
        #expect(cache.lookup("n49", now: .seconds(1)) != nil, "a stat made now is kept")
        #expect(cache.stored("listed0") != nil, "the listings keep theirs")
    }

    @Test func aPinnedEntryRemovedLeavesNoPinBehind() {
        var cache = cache(capacity: 10)
        cache.insert("d/a", .file(info("d/a")), now: .zero)
        cache.pin("d/a")
        cache.insert("d/b", .file(info("d/b")), now: .zero)
        cache.pin("d/b")
        cache.remove(tree: "d")
        #expect(cache.count == 0 && cache.pinnedCount == 0)
        cache.unpin("d/a")
        #expect(cache.pinnedCount == 0)
    }
}
