import Foundation
import Testing
@testable import FSCore

/// What a crash, a power cut or a damaged disk can leave in the chunk
/// files, and that every such block reads as a miss, never as wrong bytes.
@Suite("block cache damage")
struct BlockCacheDamageTests {
    let blockSize = 1000

    private func key(_ index: Int64, _ name: String = "obj") -> BlockCache.Key {
        BlockCache.Key(objectName: name, generation: 1, index: index)
    }

    /// Writes blocks 0..<count and returns where each slot is.
    private func populate(_ dir: String, count: Int) throws -> [(path: String, offset: Int64)] {
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        for i in 0..<count { cache.write(key(Int64(i)), bytes(blockSize, seed: i)) }
        return try (0..<count).map { try #require(cache.location(of: key(Int64($0)))) }
    }

    @Test func damagedOrShortBlocksAreMisses() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let slots = try populate(dir, count: 2)
        // Flip a payload byte of block 0; cut the file inside block 1's payload.
        try flip(slots[0].path, at: slots[0].offset + Int64(BlockFile.headerSize + blockSize - 10))
        #expect(truncate(slots[1].path, off_t(slots[1].offset) + off_t(BlockFile.headerSize + blockSize - 1)) == 0)

        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        #expect(cache.read(key(0), range: 0..<10, blockLength: blockSize) == nil, "checksum mismatch")
        #expect(cache.read(key(1), range: 0..<10, blockLength: blockSize) == nil, "short slot")
        #expect(cache.blockCount == 0 && cache.usedBytes == 0, "damaged blocks are removed")
        #expect(allocatedBytes(dir) == 0, "and their slots punched")
        cache.write(key(0), bytes(blockSize, seed: 0))
        #expect(cache.read(key(0), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 0), "a freed slot is reused")
    }

    /// A power cut while blocks were being written: the last chunk file
    /// ends inside a slot (its later slots never reached the disk), and
    /// other slots hold a mix of old and new pages. Every damaged block is
    /// a miss after a restart; every intact one reads right.
    @Test func aPowerCutLeavesMissesNeverWrongBytes() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let count = 16
        let slots = try populate(dir, count: count)
        let header = Int64(BlockFile.headerSize)
        var damaged: Set<Int> = []
        // 2: a payload byte garbled.
        try flip(slots[2].path, at: slots[2].offset + header + 500)
        damaged.insert(2)
        // 4: a byte of the stored key garbled (the header checksum fails).
        try flip(slots[4].path, at: slots[4].offset + Int64(BlockFile.fixedHeaderSize) + 1)
        damaged.insert(4)
        // 6: the header's length garbled.
        try flip(slots[6].path, at: slots[6].offset + 16)
        damaged.insert(6)
        // 8: a new header reached the disk, its payload did not (the
        // payload of block 3 stands in for what the slot held before).
        let stale = try read(slots[3].path, at: slots[3].offset + header, count: blockSize)
        try overwrite(slots[8].path, at: slots[8].offset + header, with: stale)
        damaged.insert(8)
        // 10: the payload's last page is zeros (a page that never reached
        // the disk reads as a hole).
        try overwrite(slots[10].path, at: slots[10].offset + header + Int64(blockSize - 100), with: Data(count: 100))
        damaged.insert(10)
        // 13: the file ends in the middle of its payload; 14 and 15 lie
        // beyond the end.
        #expect(slots[13].path == slots[15].path && slots[13].offset < slots[15].offset, "one chunk file holds them")
        #expect(truncate(slots[13].path, off_t(slots[13].offset + header + 300)) == 0)
        damaged.formUnion([13, 14, 15])

        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        for i in 0..<count {
            let whole = cache.read(key(Int64(i)), range: 0..<blockSize, blockLength: blockSize)
            if damaged.contains(i) {
                #expect(whole == nil, "block \(i) was damaged: a miss")
            } else {
                #expect(whole == bytes(blockSize, seed: i), "block \(i) is intact")
            }
        }
        #expect(cache.blockCount == count - damaged.count)
        // A second restart agrees, and partial reads of intact blocks too.
        let again = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        #expect(again.blockCount == count - damaged.count)
        for i in 0..<count where !damaged.contains(i) {
            #expect(again.read(key(Int64(i)), range: 100..<200, blockLength: blockSize) == bytes(blockSize, seed: i)[100..<200])
        }
        #expect(allocatedBytes(dir) == again.usedBytes, "damaged slots were punched")
    }

    /// A cache directory of the one-file-per-block layout: never read (its
    /// files would be misses anyway), removed in the background.
    @Test func anOldLayoutIsRemovedUnread() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        try FileManager.default.createDirectory(atPath: dir + "/blocks/ab", withIntermediateDirectories: true)
        try bytes(blockSize + 60, seed: 1).write(to: URL(fileURLWithPath: dir + "/blocks/ab/ab0123456789abcdef0123456789abcd"))
        let cache = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: blockSize)
        #expect(cache.blockCount == 0 && cache.read(key(0), range: 0..<10, blockLength: blockSize) == nil)
        await cache.waitForPendingWrites()
        #expect(!FileManager.default.fileExists(atPath: dir + "/blocks"))
    }

    /// Chunk files of another slot size are removed, not read at the
    /// wrong offsets.
    @Test func chunkFilesOfAnotherGeometryAreRemoved() throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        _ = try populate(dir, count: 3)
        let larger = try BlockCache(directory: dir, capacity: 1 << 20, blockSize: 2 * blockSize + 8192)
        #expect(larger.blockCount == 0 && allocatedBytes(dir) == 0)
        larger.write(key(0), bytes(blockSize, seed: 7))
        #expect(larger.read(key(0), range: 0..<blockSize, blockLength: blockSize) == bytes(blockSize, seed: 7))
    }

    // MARK: - Byte surgery

    private func flip(_ path: String, at offset: Int64) throws {
        var byte = try read(path, at: offset, count: 1)
        byte[byte.startIndex] ^= 0xFF
        try overwrite(path, at: offset, with: byte)
    }

    private func read(_ path: String, at offset: Int64, count: Int) throws -> Data {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        return try handle.read(upToCount: count) ?? Data()
    }

    private func overwrite(_ path: String, at offset: Int64, with data: Data) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: UInt64(offset))
        try handle.write(contentsOf: data)
    }
}

/// Bytes of data the cache's chunk files hold (holes and punched slots
/// count nothing).
func allocatedBytes(_ cacheDirectory: String) -> Int64 {
    let chunks = cacheDirectory + "/chunks"
    var total: Int64 = 0
    for name in (try? FileManager.default.contentsOfDirectory(atPath: chunks)) ?? [] where name != "layout" {
        let fd = open(chunks + "/" + name, O_RDONLY)
        guard fd >= 0 else { continue }
        defer { close(fd) }
        // The data ranges (SEEK_DATA 3, SEEK_HOLE 4), not st_blocks: that
        // also counts the blocks of ext4's extent tree, which the slots'
        // unwritten extents (`ChunkFiles.write` allocates before writing)
        // can grow past the inode's four in-place extents.
        var at: off_t = 0
        while true {
            let data = lseek(fd, at, 3)
            guard data >= 0 else { break }
            let hole = lseek(fd, data, 4)
            guard hole > data else { break }
            total += Int64(hole - data)
            at = hole
        }
    }
    return total
}
