import Foundation
import Testing
@testable import FSCore

/// Blocks read in place, from mappings of the chunk files: the pins that
/// keep a slot's bytes still while a reader holds them (table tests of
/// `BlockCacheIndex`), and what a mapping cut short does.
@Suite("block cache reads in place")
struct BlockCacheInPlaceTests {
    private func key(_ index: Int64) -> BlockCache.Key {
        BlockCache.Key(objectName: "obj", generation: 1, index: index)
    }

    /// Reserves and publishes `key` (length 5, cost 10); returns its slot.
    private func publish(_ key: BlockCache.Key, into index: inout BlockCacheIndex) throws -> Int {
        let reserved = index.reserve(key, cost: 10)
        let reservation = try #require(reserved)
        let replaced = index.published(key, reservation, cost: 10, length: 5, checksum: 1, tailPunched: false)
        #expect(replaced == nil)
        return reservation.slot
    }

    // MARK: - Pins (the index alone)

    @Test func aPinnedSlotIsNeverTakenByAWriter() throws {
        var index = BlockCacheIndex(capacity: 1 << 30, maxBlocks: 2)
        let a = try publish(key(0), into: &index)
        let b = try publish(key(1), into: &index)
        // Two readers hold block 0; block 1 is used after, so 0 is the
        // least recent when block 2 needs room.
        #expect(index.lookUpPinned(key(0))?.slot == a)
        #expect(index.lookUpPinned(key(0))?.slot == a)
        _ = index.lookUp(key(1))
        let reserved = index.reserve(key(2), cost: 10)
        let reservation = try #require(reserved)
        #expect(reservation.slot == b, "the next unpinned block's slot is taken")
        #expect(reservation.victims.isEmpty, "the pinned slot is not handed out to be punched")
        #expect(index.entries[key(0)] == nil && index.entries[key(1)] == nil, "block 0 was evicted all the same")
        #expect(index.unpin(a) == nil, "a reader still holds it")
        #expect(index.unpin(a) == a, "the last reader hands it on to be punched")
        index.freed(a, emptied: true)
        #expect(try publish(key(3), into: &index) == a, "and it is free again")
    }

    @Test func aDamagedPinnedBlockIsRemovedAndItsSlotWaitsForTheReader() throws {
        var index = BlockCacheIndex(capacity: 1 << 30, maxBlocks: 4)
        let a = try publish(key(0), into: &index)
        #expect(index.lookUpPinned(key(0)) != nil)
        #expect(index.remove(key(0)) == nil, "held, not punched under its reader")
        #expect(index.lookUp(key(0)) == nil, "but no longer served")
        #expect(index.unpin(a) == a)
    }

    @Test func aBlockWrittenAgainWhilePinnedGoesToAnotherSlot() throws {
        var index = BlockCacheIndex(capacity: 1 << 30, maxBlocks: 4)
        let a = try publish(key(0), into: &index)
        #expect(index.lookUpPinned(key(0)) != nil)
        let reserved = index.reserve(key(0), cost: 10)
        let again = try #require(reserved)
        #expect(again.slot != a, "the pinned slot is not rewritten")
        #expect(index.published(key(0), again, cost: 10, length: 5, checksum: 2, tailPunched: false) == nil, "the old slot is held")
        #expect(index.entries[key(0)]?.slot == again.slot)
        #expect(index.unpin(a) == a)
    }

    @Test func aSlotNoOneEvictedIsNotHandedOnByItsReaders() throws {
        var index = BlockCacheIndex(capacity: 1 << 30, maxBlocks: 4)
        let a = try publish(key(0), into: &index)
        #expect(index.lookUpPinned(key(0)) != nil)
        #expect(index.unpin(a) == nil)
        #expect(index.lookUp(key(0))?.entry.slot == a)
    }

    // MARK: - The cache

    @Test func readsAreServedInPlace() throws {
        try #require(ChunkMappings.isAvailable, "this machine can read in place (SSE 4.2 and a SIGBUS handler)")
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let blockSize = 8192
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        cache.write(key(0), bytes(blockSize, seed: 1))
        let read = try #require(cache.read(key(0), range: 0..<blockSize, blockLength: blockSize))
        // The Data shows the file's own pages: a byte written into the
        // file afterwards shows in it (no writer of ours does that while
        // the slot is pinned; this test plays a foreign one).
        let slot = try #require(cache.location(of: key(0)))
        let fd = open(slot.path, O_RDWR)
        defer { close(fd) }
        var marker: UInt8 = ~read[read.startIndex + 7]
        #expect(pwrite(fd, &marker, 1, off_t(slot.offset) + off_t(BlockFile.headerSize + 7)) == 1)
        #expect(read[read.startIndex + 7] == marker)
    }

    @Test func aBlockHeldByAReaderKeepsItsBytesUntilTheReaderIsDone() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let blockSize = 8192
        let perBlock = BlockCache.diskCost(ofLength: blockSize)
        let cache = try BlockCache(directory: dir, capacity: 2 * perBlock, blockSize: blockSize)
        cache.write(key(0), bytes(blockSize, seed: 0))
        cache.write(key(1), bytes(blockSize, seed: 1))
        var held: Data? = cache.read(key(0), range: 100..<blockSize, blockLength: blockSize)
        for i in 2..<6 { cache.write(key(Int64(i)), bytes(blockSize, seed: i)) }
        #expect(!cache.contains(key(0)), "evicted")
        #expect(held == bytes(blockSize, seed: 0)[100..<blockSize], "yet its reader's bytes never changed")
        #expect(allocatedBytes(dir) == 3 * perBlock, "its slot still holds them")
        held = nil
        #expect(allocatedBytes(dir) == cache.usedBytes && cache.usedBytes == 2 * perBlock, "punched once the reader was done")
        cache.write(key(6), bytes(blockSize, seed: 6))
        #expect(cache.read(key(6), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 6))
    }

    /// A chunk file cut short while the cache has it mapped: touching the
    /// pages past its end raises SIGBUS, which must make the block a miss
    /// (as `pread` coming up short did), never end the process.
    @Test func aChunkFileCutShortUnderItsMappingIsAMissNotACrash() throws {
        try #require(ChunkMappings.isAvailable)
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let blockSize = 8192
        let writer = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        for i in 0..<3 { writer.write(key(Int64(i)), bytes(blockSize, seed: i)) }
        let slots = try (0..<3).map { try #require(writer.location(of: key(Int64($0)))) }
        // A new instance, so every block is checked on its first read.
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        #expect(cache.read(key(0), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 0), "maps the chunk file")
        #expect(slots[1].path == slots[0].path)
        #expect(truncate(slots[1].path, off_t(slots[1].offset) + off_t(BlockFile.headerSize)) == 0, "block 1's payload is past the end now")
        #expect(cache.read(key(1), range: 0..<blockSize, blockLength: blockSize) == nil)
        #expect(cache.read(key(2), range: 0..<blockSize, blockLength: blockSize) == nil)
        #expect(!cache.contains(key(1)) && !cache.contains(key(2)), "dropped as damaged")
        #expect(cache.read(key(0), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 0), "what lies before the cut still reads")
    }

    /// The guarded copy that joins pieces of a read: a source past the end
    /// of a mapped file is a failure to report, not a crash.
    @Test func aGuardedCopyFromPagesPastTheEndFails() throws {
        try #require(ChunkMappings.isAvailable)
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let path = dir + "/file"
        try bytes(3 * 4096, seed: 3).write(to: URL(fileURLWithPath: path))
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        let mappings = ChunkMappings(chunkLength: 3 * 4096)
        let base = try #require(mappings.base(ofChunk: 0, descriptor: fd))
        let destination = UnsafeMutableRawPointer.allocate(byteCount: 3 * 4096, alignment: 16)
        defer { destination.deallocate() }
        #expect(ChunkMappings.copy(UnsafeRawBufferPointer(start: base, count: 3 * 4096), to: destination))
        #expect(Data(bytes: destination, count: 3 * 4096) == bytes(3 * 4096, seed: 3))
        #expect(truncate(path, 4096) == 0)
        #expect(!ChunkMappings.copy(UnsafeRawBufferPointer(start: base, count: 3 * 4096), to: destination))
        #expect(ChunkMappings.copy(UnsafeRawBufferPointer(start: base, count: 4096), to: destination), "the page before the end still copies")
        #expect(ChunkMappings.checksum(UnsafeRawBufferPointer(start: base + 4096, count: 4096)) == nil)
    }
}
