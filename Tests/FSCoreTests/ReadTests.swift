import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

private let MiB = 1 << 20

@Suite("open and read")
struct ReadTests {
    @Test func readsRangesAndStopsAtTheEnd() async throws {
        let h = try Harness()
        let content = bytes(3 * MiB + 12345, seed: 1)
        h.store.seed("f", content)
        let inode = try await h.lookup("f").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        #expect(!open.directIO && !open.keepCache, "first open: nothing cached by the kernel yet")
        for (offset, size) in [(0, 4096), (1_000_000, 300_000), (MiB - 10, 20), (3 * MiB, 12345), (3 * MiB + 12000, 4096)] {
            let got = try await h.fs.read(inode, handle: open.handle, offset: Int64(offset), size: size)
            #expect(got == content[offset..<min(content.count, offset + size)], "read \(size) at \(offset)")
        }
        #expect(try await h.fs.read(inode, handle: open.handle, offset: Int64(content.count), size: 10).isEmpty)
        #expect(try await h.fs.read(inode, handle: open.handle, offset: Int64(content.count) + 100, size: 10).isEmpty)
        try await h.fs.release(inode, handle: open.handle)
        await expectErrno(EBADF) { _ = try await h.fs.read(inode, handle: open.handle, offset: 0, size: 1) }
        #expect(h.fs.readAheadBytesInUse == 0, "release returns the budget")
    }

    @Test func sequentialReadsReturnTheWholeFile() async throws {
        let h = try Harness()
        let content = bytes(20 * MiB + 7, seed: 2)
        h.store.seed("big", content)
        let inode = try await h.lookup("big").attributes.inode
        #expect(try await h.readAll(inode) == content)
        #expect(try await h.readAll(inode, chunk: 1_000_000) == content)
        #expect(h.store.requestCount(.read) < 40, "read-ahead fetches parts, not 128 KiB pieces")
    }

    @Test func concurrentReadsOfOneHandle() async throws {
        let h = try Harness()
        let content = bytes(8 * MiB, seed: 3)
        h.store.seed("c", content)
        let inode = try await h.lookup("c").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        let fs = h.fs
        try await withThrowingTaskGroup(of: (Int, Data).self) { group in
            for i in 0..<64 {
                group.addTask {
                    let offset = i * 128 * 1024
                    return (offset, try await fs.read(inode, handle: open.handle, offset: Int64(offset), size: 128 * 1024))
                }
            }
            for try await (offset, data) in group {
                #expect(data == content[offset..<(offset + 128 * 1024)])
            }
        }
        try await h.fs.release(inode, handle: open.handle)
    }

    @Test func aReadOnlyMountRefusesDirectoriesAndWrites() async throws {
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, readOnly: true))
        h.store.seed("d/f")
        let d = try await h.lookup("d").attributes.inode
        let f = try await h.lookup("d/f").attributes.inode
        await expectErrno(EISDIR) { _ = try await h.fs.open(d, flags: O_RDONLY) }
        await expectErrno(EROFS) { _ = try await h.fs.open(f, flags: O_WRONLY) }
        await expectErrno(EROFS) { _ = try await h.fs.open(f, flags: O_RDWR) }
        await expectErrno(EROFS) { _ = try await h.fs.open(f, flags: O_RDONLY | O_TRUNC) }
        _ = try await h.fs.open(f, flags: O_RDONLY | O_NOFOLLOW)
    }

    // Checks semantics.md#shows-reads, semantics.md#errno-estale
    @Test func aReplacedObjectMakesTheOpenHandleStale() async throws {
        let h = try Harness()
        let v1 = bytes(20 * MiB, seed: 4)
        h.store.seed("f", v1)
        let inode = try await h.lookup("f").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 0, size: 4096) == v1.prefix(4096))
        h.store.seed("f", bytes(20 * MiB, seed: 5))
        // What was already buffered is of the pinned generation...
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 4096, size: 4096) == v1[4096..<8192])
        // ...and anything still to fetch is refused, never taken from v2.
        await expectErrno(ESTALE) { _ = try await h.fs.read(inode, handle: open.handle, offset: Int64(15 * MiB), size: 4096) }
        await expectErrno(ESTALE) { _ = try await h.fs.read(inode, handle: open.handle, offset: Int64(10 * MiB), size: 4096) }
        // The first block's buffer stays (the reads between it and 15 MiB
        // never came): still v1's bytes, never v2's.
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 0, size: 4096) == v1.prefix(4096))
        try await h.fs.release(inode, handle: open.handle)
    }

    // Checks semantics.md#shows-reads
    @Test func theBlockCacheServesReReadsAndNeverAnOldGeneration() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let h = try Harness(options: MountOptions(uid: 1, gid: 1, cacheDirectory: dir))
        let v1 = bytes(5 * MiB + 100, seed: 6)
        h.store.seed("f", v1)
        let inode = try await h.lookup("f").attributes.inode
        #expect(try await h.readAll(inode) == v1)
        await h.fs.blockCache!.waitForPendingWrites()
        #expect(h.fs.blockCache!.blockCount == 6)

        h.store.resetCounters()
        let again = try await h.fs.open(inode, flags: O_RDONLY)
        #expect(again.keepCache, "same generation: the kernel may keep its pages")
        let second = try await h.fs.read(inode, handle: again.handle, offset: 0, size: 5 * MiB + 100)
        try await h.fs.release(inode, handle: again.handle)
        #expect(second == v1 && h.store.totalRequests == 0, "served by the block cache, no request")

        // Another process replaces the object; once the stat is stale, a
        // new open pins the new generation and must not see v1's blocks.
        let v2 = bytes(5 * MiB + 100, seed: 7)
        h.store.seed("f", v2)
        h.clock.advance(by: .seconds(61))
        let fresh = try await h.fs.open(inode, flags: O_RDONLY)
        #expect(!fresh.keepCache, "new generation: the kernel drops its pages")
        #expect(try await h.fs.read(inode, handle: fresh.handle, offset: 0, size: 5 * MiB + 100) == v2)
        #expect(h.store.requestCount(.read) > 0)
        try await h.fs.release(inode, handle: fresh.handle)
    }

    // Checks semantics.md#shows-reads
    @Test func theCachePersistsAcrossMounts() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let store = InMemoryObjectStore()
        let content = bytes(3 * MiB, seed: 8)
        store.seed("f", content)
        do {
            let h = try Harness(options: MountOptions(cacheDirectory: dir), store: store)
            #expect(try await h.readAll(try await h.lookup("f").attributes.inode) == content)
            await h.fs.blockCache!.waitForPendingWrites()
        }
        let h = try Harness(options: MountOptions(cacheDirectory: dir), store: store)
        let inode = try await h.lookup("f").attributes.inode
        store.resetCounters()
        #expect(try await h.readAll(inode) == content)
        #expect(store.requestCount(.read) == 0)
    }

    // Checks semantics.md#shows-reads
    @Test func randomReadsFetchWholeBlocksAndCacheThem() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let h = try Harness(options: MountOptions(cacheDirectory: dir))
        let content = bytes(64 * MiB, seed: 9)
        h.store.seed("r", content)
        let inode = try await h.lookup("r").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        var offsets: [Int] = []
        var generator = SystemRandomNumberGenerator()
        // 20 blocks at most: within the cache's write queue (96 MiB), so
        // no block is dropped however slow the disk is under test load.
        for _ in 0..<20 { offsets.append(Int.random(in: 1..<(content.count - 4096), using: &generator)) }
        for offset in offsets {
            #expect(try await h.fs.read(inode, handle: open.handle, offset: Int64(offset), size: 4096) == content[offset..<(offset + 4096)])
        }
        #expect(h.fs.readAheadBytesInUse == 0, "no read-ahead for a random reader")
        let reads = h.store.requestCount(.read)
        #expect(reads <= 20)
        await h.fs.blockCache!.waitForPendingWrites()
        for offset in offsets {
            #expect(try await h.fs.read(inode, handle: open.handle, offset: Int64(offset), size: 4096) == content[offset..<(offset + 4096)])
        }
        #expect(h.store.requestCount(.read) == reads, "re-reads come from the block cache")
        try await h.fs.release(inode, handle: open.handle)
    }

    /// The byte ranges every read asked the store for.
    final class RangeRecordingStore: ForwardingStore, Sendable {
        let inner: InMemoryObjectStore
        private let recorded = Mutex<[Range<Int64>]>([])
        init(inner: InMemoryObjectStore) { self.inner = inner }
        var ranges: [Range<Int64>] { recorded.withLock { $0.sorted { $0.lowerBound < $1.lowerBound } } }

        func read(
            _ name: String, generation: Int64, range: Range<Int64>, into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
        ) async throws(StoreError) -> Int64 {
            recorded.withLock { $0.append(range) }
            return try await inner.read(name, generation: generation, range: range, into: sink)
        }
    }

    // Checks semantics.md#shows-reads
    @Test func aSequentialReReadDownloadsOnlyTheBlocksTheCacheLacks() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let inner = InMemoryObjectStore()
        let content = bytes(24 * MiB + 100, seed: 12)
        let info = inner.seed("f", content)
        do {
            let h = try Harness(options: MountOptions(cacheDirectory: dir), store: inner)
            #expect(try await h.readAll(try await h.lookup("f").attributes.inode) == content)
            await h.fs.blockCache!.waitForPendingWrites()
            #expect(h.fs.blockCache!.blockCount == 25)
        }
        // Blocks 5, 6 and 13 are gone (a full write queue dropped them, or
        // they were evicted); the next mount's sequential read streams
        // just those, and reads the other 22 from the cache.
        do {
            let cache = try BlockCache(directory: dir, capacity: 1 << 30)
            for index: Int64 in [5, 6, 13] {
                let slot = try #require(cache.location(of: BlockCache.Key(objectName: "f", generation: info.generation, index: index)))
                // A zeroed header: the slot reads as empty at the next start.
                let fd = open(slot.path, O_WRONLY)
                #expect(pwrite(fd, [UInt8](repeating: 0, count: BlockFile.headerSize), BlockFile.headerSize, off_t(slot.offset)) == BlockFile.headerSize)
                close(fd)
            }
        }
        let store = RangeRecordingStore(inner: inner)
        let clock = ManualClock()
        let h = Harness(store: inner, fs: FileSystem(store: store, options: MountOptions(cacheDirectory: dir), clock: clock), clock: clock)
        #expect(try await h.readAll(try await h.lookup("f").attributes.inode) == content)
        let M = Int64(MiB)
        #expect(store.ranges == [(5 * M)..<(7 * M), (13 * M)..<(14 * M)], "one stream per run of missing blocks, nothing else")
    }

    @Test func withoutACacheRandomReadsFetchJustTheRequest() async throws {
        let h = try Harness()
        let content = bytes(16 * MiB, seed: 10)
        h.store.seed("r", content)
        let inode = try await h.lookup("r").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 5_000_000, size: 4096) == content[5_000_000..<5_004_096])
        #expect(h.store.requestCount(.read) == 1)
        try await h.fs.release(inode, handle: open.handle)
    }

    // Checks semantics.md#shows-reads
    @Test func theBudgetBoundsReadAheadAndExhaustionFallsBackToDirectReads() async throws {
        // Budget for one 2 MiB part at a time across two readers.
        let h = try Harness(options: MountOptions(readAheadBudget: 2 * Int64(MiB), readAheadInitial: Int64(MiB), readAheadMax: 16 * Int64(MiB)))
        let a = bytes(24 * MiB, seed: 11)
        let b = bytes(24 * MiB, seed: 12)
        h.store.seed("a", a)
        h.store.seed("b", b)
        let ia = try await h.lookup("a").attributes.inode
        let ib = try await h.lookup("b").attributes.inode
        let ha = try await h.fs.open(ia, flags: O_RDONLY)
        let hb = try await h.fs.open(ib, flags: O_RDONLY)
        var offset = 0
        var peak: Int64 = 0
        while offset < 24 * MiB {
            let size = 128 * 1024
            #expect(try await h.fs.read(ia, handle: ha.handle, offset: Int64(offset), size: size) == a[offset..<(offset + size)])
            #expect(try await h.fs.read(ib, handle: hb.handle, offset: Int64(offset), size: size) == b[offset..<(offset + size)])
            peak = max(peak, h.fs.readAheadBytesInUse)
            offset += size
        }
        #expect(peak <= 2 * Int64(MiB), "never above the budget")
        try await h.fs.release(ia, handle: ha.handle)
        try await h.fs.release(ib, handle: hb.handle)
        #expect(h.fs.readAheadBytesInUse == 0)

        let none = try Harness(options: MountOptions(readAheadBudget: 0))
        none.store.seed("z", a)
        #expect(try await none.readAll(try await none.lookup("z").attributes.inode) == a, "no budget: direct reads still work")
    }

    @Test func transientFailuresAreReportedAndRetried() async throws {
        let h = try Harness()
        let content = bytes(4 * MiB, seed: 13)
        h.store.seed("f", content)
        let inode = try await h.lookup("f").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        h.store.failNext(1, with: .unavailable("503 after retries"), operations: [.read])
        await expectErrno(EIO) { _ = try await h.fs.read(inode, handle: open.handle, offset: 0, size: 4096) }
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 0, size: 4096) == content.prefix(4096))
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 4096, size: MiB) == content[4096..<(4096 + MiB)])
        try await h.fs.release(inode, handle: open.handle)
    }

    // Checks semantics.md#errno-enoent
    @Test func openOfADeletedFileIsENOENT() async throws {
        let h = try Harness()
        h.store.seed("f", bytes(1))
        let inode = try await h.lookup("f").attributes.inode
        try await h.store.delete("f", ifGenerationMatch: nil)
        h.clock.advance(by: .seconds(61))
        await expectErrno(ENOENT) { _ = try await h.fs.open(inode, flags: O_RDONLY) }
        await expectErrno(ENOENT) { _ = try await h.fs.getattr(inode) }
    }
}
