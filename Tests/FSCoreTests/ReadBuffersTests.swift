import Foundation
import TestSupport
import Testing
@testable import FSCore

/// The download buffer pool: its buffers are huge-page-aligned mappings,
/// reused, and given back to the kernel past the idle limit.
@Suite struct ReadBuffersTests {
    static func isAligned(_ pointer: UnsafeMutableRawPointer, _ boundary: Int) -> Bool {
        Int(bitPattern: pointer) % boundary == 0
    }

    @Test func mappingsStartOnHugePageBoundaries() {
        for size in [2 << 20, 4 << 20, 8 << 20] {
            let pointer = HugeMappings.map(size)!
            #expect(Self.isAligned(pointer, HugeMappings.hugePage), "\(size) bytes")
            // Every byte is writable (the trimmed head and tail were
            // outside it).
            pointer.initializeMemory(as: UInt8.self, repeating: 0xA5, count: size)
            #expect(pointer.load(fromByteOffset: size - 1, as: UInt8.self) == 0xA5)
            HugeMappings.unmap(pointer, size)
        }
    }

    @Test func aMebibyteBufferIsHalfAHugePageAndTheOtherHalfWaits() {
        let pool = ReadBuffers()
        let first = pool.allocate(1 << 20)!
        #expect(first.size == 1 << 20)
        #expect(Self.isAligned(first.pointer, HugeMappings.hugePage))
        let second = pool.allocate(1 << 20)!
        #expect(second.pointer == first.pointer + (1 << 20), "the second half of the same huge page")
        pool.release(second.pointer, second.size)
        pool.release(first.pointer, first.size)
        // Both kept: the next two allocations reuse them.
        let again = [pool.allocate(1 << 20)!.pointer, pool.allocate(1 << 20)!.pointer]
        #expect(Set(again) == Set([first.pointer, second.pointer]))
        for pointer in again { pool.release(pointer, 1 << 20) }
    }

    @Test func sizesRoundUpToTheirClassAndOthersAreExact() {
        let pool = ReadBuffers()
        let grown = pool.allocate(3 << 20)!
        #expect(grown.size == 4 << 20)
        #expect(Self.isAligned(grown.pointer, HugeMappings.hugePage))
        pool.release(grown.pointer, grown.size)
        let small = pool.allocate(64 << 10)!
        #expect(small.size == 64 << 10)
        #expect(Self.isAligned(small.pointer, 4096))
        pool.release(small.pointer, small.size)
        let large = pool.allocate(9 << 20)!
        #expect(large.size == 9 << 20)
        pool.release(large.pointer, large.size)
    }

    @Test func pastTheIdleLimitBuffersGoBackToTheKernel() {
        let pool = ReadBuffers()
        let count = pool.idleLimit / (8 << 20) + 2
        let buffers = (0..<count).map { _ in pool.allocate(8 << 20)!.pointer }
        #expect(pool.idleBytes == 0)
        for pointer in buffers { pool.release(pointer, 8 << 20) }
        #expect(pool.idleBytes == pool.idleLimit, "the last two were unmapped")
        // Taking them again empties the pool.
        let reused = (0..<(count - 2)).map { _ in pool.allocate(8 << 20)!.pointer }
        #expect(pool.idleBytes == 0)
        #expect(Set(reused).isSubset(of: Set(buffers)))
        for pointer in reused { pool.release(pointer, 8 << 20) }
    }

    /// What a mount does before it answers: the pool holds the bytes asked
    /// for, at most its idle limit, as 1 MiB buffers whose every page is
    /// already resident (mincore), and the read path's allocations take
    /// them instead of mapping fresh memory.
    @Test func prefillMapsTouchedBuffersThatAllocationsReuse() {
        let pool = ReadBuffers()
        #expect(pool.prefill(10 << 20) == 10 << 20)
        #expect(pool.idleBytes == 10 << 20)
        #expect(pool.prefill(10 << 20) == 0, "already full to that size")
        let taken = (0..<10).map { _ in pool.allocate(1 << 20)! }
        #expect(pool.idleBytes == 0, "every buffer came from the pool")
        for buffer in taken {
            #expect(buffer.size == 1 << 20)
            #expect(Self.residentPages(buffer.pointer, buffer.size) == buffer.size / 4096, "touched before use")
        }
        for buffer in taken { pool.release(buffer.pointer, buffer.size) }
        #expect(pool.prefill(1 << 30) == pool.idleLimit - (10 << 20), "never past the idle limit")
        #expect(pool.idleBytes == pool.idleLimit)
    }

    /// A mount fills the pool with a quarter of its read-ahead budget, so a
    /// small budget keeps a small pool.
    @Test func aMountsPrefillFollowsItsReadAheadBudget() {
        #expect(FileSystem.readBufferPrefill(budget: 256 << 20) == 64 << 20)
        #expect(FileSystem.readBufferPrefill(budget: 16 << 20) == 4 << 20)
        #expect(FileSystem.readBufferPrefill(budget: 0) == 0)
        #expect(FileSystem.readBufferPrefill(budget: 4 << 30) == ReadBuffers.shared.idleLimit)
    }

    /// How many of the pages from `pointer` on are resident.
    static func residentPages(_ pointer: UnsafeMutableRawPointer, _ size: Int) -> Int {
        var vector = [UInt8](repeating: 0, count: size / 4096)
        // Sound: `pointer` is page-aligned and `size` bytes of one mapping;
        // mincore writes one byte per page into `vector`, which has them.
        guard mincore(pointer, size, &vector) == 0 else { return -1 }
        return vector.filter { $0 & 1 == 1 }.count
    }

    /// A FUSE write's bytes, copied for the staging file's pwrite: the same
    /// bytes, in a buffer aligned like the page from a page up (the pool's
    /// for its sizes, posix_memalign's otherwise, both freed with the Data).
    @Test func aWritesCopyIsPageAlignedAndTheSameBytes() {
        for size in [100, 4096, (128 << 10) + 3, 1 << 20, (3 << 20) + 5, 9 << 20] {
            let source = GeneratedBytes.array(size) { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            // Misaligned like libfuse's: 80 bytes into a request buffer.
            let request = [UInt8](repeating: 0, count: 80) + source
            let copy = request.withUnsafeBytes { pageAlignedCopy(of: UnsafeRawBufferPointer(rebasing: $0[80...])) }
            #expect(copy.count == size)
            #expect(copy == Data(source), "\(size) bytes")
            if size >= 4096 {
                copy.withUnsafeBytes { #expect(Int(bitPattern: $0.baseAddress) % 4096 == 0, "\(size) bytes") }
            }
        }
    }
}
