import Foundation
import Synchronization
import Testing
@testable import FSCore

@Suite("block cache")
struct BlockCacheTests {
    let blockSize = 1000

    private func key(_ index: Int64, _ name: String = "obj", generation: Int64 = 1) -> BlockCache.Key {
        BlockCache.Key(objectName: name, generation: generation, index: index)
    }

    @Test func storesAndServesRangesOfBlocks() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        let data = bytes(blockSize, seed: 1)
        #expect(cache.read(key(0), range: 0..<10, blockLength: blockSize) == nil)
        cache.write(key(0), data)
        #expect(cache.contains(key(0)))
        #expect(cache.read(key(0), range: 0..<blockSize, blockLength: blockSize) == data)
        #expect(cache.read(key(0), range: 100..<250, blockLength: blockSize) == data[100..<250])
        #expect(cache.read(key(0, generation: 2), range: 0..<10, blockLength: blockSize) == nil, "another generation is another block")
        #expect(cache.read(key(0), range: 0..<10, blockLength: 999) == nil, "a block of another length is a miss")
    }

    @Test func evictsTheLeastRecentlyUsedBlocks() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let perBlock = BlockCache.diskCost(ofLength: blockSize)
        let cache = try BlockCache(directory: dir, capacity: perBlock * 3, blockSize: blockSize)
        for i in 0..<3 { cache.write(key(Int64(i)), bytes(blockSize, seed: i)) }
        _ = cache.read(key(0), range: 0..<1, blockLength: blockSize)  // 0 is now recent; 1 is the oldest
        cache.write(key(3), bytes(blockSize, seed: 3))
        #expect(cache.contains(key(0)) && !cache.contains(key(1)) && cache.contains(key(2)) && cache.contains(key(3)))
        #expect(cache.usedBytes <= perBlock * 3 && cache.blockCount == 3)
        #expect(allocatedBytes(dir) == cache.usedBytes, "the disk holds what the index counts: evicted slots are reused")
        #expect(cache.read(key(3), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 3))
    }

    @Test func smallBlocksAreBoundedByCountAsWellAsBytes() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        // Plenty of bytes, room for three blocks: tiny objects (one small
        // block each) evict by count, least recent first.
        let cache = try BlockCache(directory: dir, capacity: 1 << 30, blockSize: blockSize, maxBlocks: 3)
        for i in 0..<3 { cache.write(key(0, "small-\(i)"), bytes(10, seed: i)) }
        _ = cache.read(key(0, "small-0"), range: 0..<1, blockLength: 10)
        cache.write(key(0, "small-3"), bytes(10, seed: 3))
        #expect(cache.contains(key(0, "small-0")) && !cache.contains(key(0, "small-1")))
        #expect(cache.blockCount == 3)
        #expect(cache.usedBytes == 3 * BlockCache.diskCost(ofLength: 10), "a small block costs its pages, not a slot")
        #expect(allocatedBytes(dir) == cache.usedBytes, "evicted slots are reused")
        // A restart with a lower bound shrinks the cache to it.
        let reopened = try BlockCache(directory: dir, capacity: 1 << 30, blockSize: blockSize, maxBlocks: 2)
        #expect(reopened.blockCount == 2)
        #expect(allocatedBytes(dir) == reopened.usedBytes, "the slot evicted at start is punched")
    }

    /// Slots of 1 MiB blocks later reused for small ones (and freed ones)
    /// give their bytes back: the disk holds what the index counts.
    @Test func reusedAndFreedSlotsGiveTheirBytesBack() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let size = 1 << 20
        let cache = try BlockCache(directory: dir, capacity: 4 * BlockCache.diskCost(ofLength: size), blockSize: size, maxBlocks: 4)
        for i in 0..<4 { cache.write(key(Int64(i), "big"), bytes(size, seed: i)) }
        #expect(allocatedBytes(dir) == 4 * BlockCache.diskCost(ofLength: size))
        for i in 0..<4 { cache.write(key(0, "small-\(i)"), bytes(100, seed: i)) }
        #expect(cache.blockCount == 4 && cache.usedBytes == 4 * BlockCache.diskCost(ofLength: 100))
        #expect(allocatedBytes(dir) == cache.usedBytes)
        for i in 0..<4 { #expect(cache.read(key(0, "small-\(i)"), range: 0..<100, blockLength: 100) == bytes(100, seed: i)) }
    }

    @Test func theDefaultCountBoundGrowsWithALargeCache() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let small = try BlockCache(directory: dir, capacity: 1 << 30, blockSize: 1 << 20)
        #expect(small.maxBlocks == BlockCache.defaultMaxBlocks)
        let large = try BlockCache(directory: dir, capacity: 128 << 30, blockSize: 1 << 20)
        #expect(large.maxBlocks == 128 << 10, "every full block of the capacity fits")
    }

    @Test func persistsAcrossInstancesAndShrinksToANewCapacity() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        do {
            let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
            for i in 0..<4 { cache.write(key(Int64(i)), bytes(blockSize, seed: i)) }
        }
        let reopened = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        #expect(reopened.blockCount == 4)
        #expect(reopened.read(key(2), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 2))
        let bound = 2 * BlockCache.diskCost(ofLength: blockSize) + 200
        let smaller = try BlockCache(directory: dir, capacity: bound, blockSize: blockSize)
        #expect(smaller.blockCount == 2 && smaller.usedBytes <= bound)
        #expect(smaller.read(key(3), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 3), "the newest are kept")
    }

    @Test func backgroundWritesAreReadableAtOnce() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        let data = bytes(3 * blockSize, seed: 9)
        cache.store(key(1), data[blockSize..<(2 * blockSize)])  // a slice, as FileReader passes
        #expect(cache.read(key(1), range: 5..<15, blockLength: blockSize) == data[(blockSize + 5)..<(blockSize + 15)])
        await cache.waitForPendingWrites()
        let reopened = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        #expect(reopened.read(key(1), range: 0..<blockSize, blockLength: blockSize) == data[blockSize..<(2 * blockSize)])
    }

    @Test func concurrentReadersAndWritersAgree() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        // Room for 20 of the 40 blocks: slots are reused while others read them.
        let cache = try BlockCache(directory: dir, capacity: 20 * BlockCache.diskCost(ofLength: blockSize), blockSize: blockSize)
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for i in 0..<200 {
                        let index = Int64((i * 7 + worker) % 40)
                        let expected = bytes(blockSize, seed: Int(index))
                        if let got = cache.read(key(index), range: 0..<blockSize, blockLength: blockSize) {
                            #expect(got == expected)
                        } else {
                            cache.write(key(index), expected)
                        }
                    }
                }
            }
        }
        #expect(cache.usedBytes <= 20 * BlockCache.diskCost(ofLength: blockSize))
    }

    /// Whole blocks of 1 MiB are read into recycled buffers: a block read
    /// later must never land in the buffer of a Data still in use.
    @Test func blocksReadIntoRecycledBuffersStayIntact() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let size = 1 << 20
        let cache = try BlockCache(directory: dir, capacity: 16 << 20, blockSize: size)
        for i in 0..<3 { cache.write(key(Int64(i)), bytes(size, seed: i)) }
        // A new instance: every block is read whole once, to be verified.
        let reopened = try BlockCache(directory: dir, capacity: 16 << 20, blockSize: size)
        var held: [Data] = []
        for round in 0..<4 {
            for i in 0..<3 {
                let range = round == 0 ? 0..<size : 4096..<(size - 4096)
                let got = try #require(reopened.read(key(Int64(i)), range: range, blockLength: size))
                #expect(got == bytes(size, seed: i)[range])
                if round < 2 { held.append(got) } else { held.removeFirst() }
            }
        }
        for (n, data) in held.enumerated() {
            let i = n % 3
            #expect(data == bytes(size, seed: i)[(n < 3 ? 0..<size : 4096..<(size - 4096))], "block \(i) kept its bytes")
        }
    }

    @Test func lruListKeepsOrder() {
        var list = LRUList<Int>()
        for i in 0..<5 { list.touch(i) }
        list.touch(1)
        list.remove(3)
        #expect(list.keysFromOldest == [0, 2, 4, 1] && list.leastRecent == 0 && list.count == 4)
        list.remove(0)
        list.remove(1)
        #expect(list.keysFromOldest == [2, 4])
    }
}

@Suite("block cache write queue")
struct BlockCacheQueueTests {
    @Test func aFullQueueDropsBlocksInsteadOfGrowing() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: 100, maxPendingBytes: 0)
        cache.store(BlockCache.Key(objectName: "o", generation: 1, index: 0), bytes(100))
        await cache.waitForPendingWrites()
        #expect(cache.blockCount == 0)
    }

    /// The queue holds at most `maxPendingBytes` of buffers while the
    /// writer is behind (held here: a suspended queue); what does not fit
    /// is not cached, what does is readable at once and lands later.
    @Test func aWriterBehindKeepsWhatFitsAndDropsTheRest() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let writer = DispatchQueue(label: "held writes")
        writer.suspend()
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: 100, maxPendingBytes: 250, writer: writer)
        func key(_ index: Int64) -> BlockCache.Key { BlockCache.Key(objectName: "o", generation: 1, index: index) }
        let buffer = bytes(200, seed: 3)
        cache.store(blocks: [(key(0), 0..<100), (key(1), 100..<200)], of: buffer)
        cache.store(blocks: [(key(2), 0..<100)], of: bytes(100, seed: 4))
        #expect(cache.contains(key(0)) && cache.contains(key(1)) && !cache.contains(key(2)), "200 of 250 taken; 100 more do not fit")
        #expect(cache.read(key(1), range: 0..<100, blockLength: 100) == buffer[100..<200], "readable while queued")
        #expect(cache.blockCount == 0, "nothing on disk yet")
        writer.resume()
        await cache.waitForPendingWrites()
        #expect(cache.blockCount == 2)
        cache.store(blocks: [(key(2), 0..<100)], of: bytes(100, seed: 4))
        await cache.waitForPendingWrites()
        #expect(cache.blockCount == 3, "the queue has room again once written")
    }

    /// Whether `task` is still running after `delay`.
    private func stillRunning(_ task: Task<Void, Never>, after delay: Duration) async -> Bool {
        let done = Mutex(false)
        let watcher = Task { await task.value; done.withLock { $0 = true } }
        try? await Task.sleep(for: delay)
        defer { watcher.cancel() }
        return !done.withLock { $0 }
    }

    /// A cache of 100-byte blocks whose writer is held (a suspended queue)
    /// with `queued` blocks in its queue; reads wait past 150 queued bytes.
    private struct HeldWriter {
        let dir = temporaryDirectory()
        let writer = DispatchQueue(label: "held writes")
        let cache: BlockCache

        init(queued: Int, longestWait: Duration = .seconds(60)) throws {
            writer.suspend()
            cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: 100, maxPendingBytes: 1000, readsWaitAbove: 150,
                                   longestWait: longestWait, writer: writer)
            for index in 0..<queued { store(index) }
        }

        func store(_ index: Int) {
            cache.store(BlockCache.Key(objectName: "o", generation: 1, index: Int64(index)), bytes(100, seed: index))
        }
    }

    /// A read waits while the writer is more than `readsWaitAbove` behind,
    /// and goes on once the writer has caught up.
    @Test func aReadWaitsForAWriterFarBehind() async throws {
        let held = try HeldWriter(queued: 1)
        defer { removeDirectory(held.dir) }
        await held.cache.waitForWriter()  // 100 queued: under the bound, no wait
        held.store(1)
        let read = Task { await held.cache.waitForWriter() }
        #expect(await stillRunning(read, after: .milliseconds(200)), "200 queued: the read waits")
        held.writer.resume()
        await read.value
        await held.cache.waitForPendingWrites()
        #expect(held.cache.blockCount == 2)
    }

    /// A writer that finishes nothing (a disk that hangs) holds a read for
    /// `longestWait` at most; after that reads go on until it writes again.
    @Test func aStalledWriterHoldsAReadNoLongerThanTheLongestWait() async throws {
        let held = try HeldWriter(queued: 2, longestWait: .milliseconds(100))
        defer { removeDirectory(held.dir) }
        let clock = ContinuousClock()
        let waited = await clock.measure { await held.cache.waitForWriter() }
        #expect(waited >= .milliseconds(100) && waited < .seconds(30), "\(waited)")
        let next = await clock.measure { await held.cache.waitForWriter() }
        #expect(next < .milliseconds(100), "a stalled writer holds no more reads: \(next)")
        held.writer.resume()
        await held.cache.waitForPendingWrites()
        #expect(held.cache.blockCount == 2)
    }

    /// An interrupted read stops waiting at once; the writer is not marked
    /// stalled, so the next read still waits.
    @Test func anInterruptedReadStopsWaiting() async throws {
        let held = try HeldWriter(queued: 2)
        defer { removeDirectory(held.dir) }
        let interrupted = Task { await held.cache.waitForWriter() }
        try await Task.sleep(for: .milliseconds(50))
        interrupted.cancel()
        await interrupted.value
        let next = Task { await held.cache.waitForWriter() }
        #expect(await stillRunning(next, after: .milliseconds(200)))
        held.writer.resume()
        await next.value
    }
}
