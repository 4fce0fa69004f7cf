import CMappedBytes
import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Read-only shared mappings of the block cache's chunk files, one per
/// chunk, made on first use and kept until the cache goes away. A block
/// is read in place: its checksum runs over the page cache's own pages,
/// and the kernel copies the reply from them straight into the reader's.
/// With `pread` the bytes were first copied into a buffer: in a perf
/// profile of a block-cache re-read of 256 MiB that copy
/// (`_copy_to_iter`) was 27% of the mount's samples, and reading in place
/// took the mount's CPU from 16-17 ticks to 11-14 (alternating rounds).
///
/// - Pages a read touched stay in the process's page tables, and so in
///   its RSS, until unmapped. Every `dropEvery` bytes read, the chunks
///   read since the last drop are dropped from the page tables
///   (`MADV_DONTNEED`; for a shared file mapping the pages stay in the
///   page cache, and a later touch maps them again), so the mount's RSS
///   does not grow with its cache. A re-read of 1 GiB from the cache took
///   the mount's peak RSS from 106 to 114 MiB, and left it where it was
///   (109 MiB) with drops every 4 MiB; every 64 MiB, to 173 MiB. Dropping
///   after every read instead (one `madvise` per block) cost most of the
///   gain, in TLB flushes.
/// - A page that cannot be read (the file cut short under the mapping by
///   someone else, a failing disk) raises SIGBUS where `pread` returned
///   an error. Bytes of a mapping are therefore touched in user space
///   only through CMappedBytes' guarded functions, which turn the fault
///   into an error; the kernel's own copies (the FUSE reply) fail with
///   EFAULT instead, which the kernel turns into EIO for the reader.
/// - The caller keeps the slot from being rewritten or punched while its
///   bytes are in use (`BlockCacheIndex` pins): a rewrite would change
///   them in place.
final class ChunkMappings: Sendable {
    /// Bytes of every chunk file (each is made at its full size).
    let chunkLength: Int
    let dropEvery: Int
    // Addresses are kept as integers: an address is not Sendable, and a
    // mapping lives as long as `self`.
    private struct Mapped {
        /// Chunk number to the address of its mapping.
        var addresses: [Int: UInt] = [:]
        /// Chunks read since the last drop: only their page tables hold
        /// anything to drop.
        var touched: Set<Int> = []
    }
    /// Leaf lock; held only to look up or record a mapping.
    private let mapped = OrderedLock("block cache chunk mappings", Mapped())
    private let served = Atomic<Int>(0)
    /// The most a page fault maps of a file mapping: the kernel's default
    /// `fault_around_bytes`.
    static let faultAround = 64 << 10

    /// Whether reads in place can run here: the guarded checksum needs the
    /// CPU's CRC-32C instruction and a SIGBUS handler. Asking installs the
    /// handler (once).
    static let isAvailable: Bool = bucketfs_mapped_available() != 0

    init(chunkLength: Int, dropEvery: Int = 4 << 20) {
        self.chunkLength = chunkLength
        self.dropEvery = dropEvery
    }

    deinit {
        // No bytes of a mapping are in use any more: every in-place Data
        // holds the cache (and so `self`) alive.
        for address in mapped.withLock({ Array($0.addresses.values) }) {
            munmap(UnsafeMutableRawPointer(bitPattern: address), chunkLength)
        }
    }

    /// The start of chunk `chunk`'s mapping, made from `descriptor` if
    /// there is none yet; nil where the file cannot be mapped. Say
    /// `finishedReading` once the bytes read from it are no longer in use.
    func base(ofChunk chunk: Int, descriptor: Int32) -> UnsafeRawPointer? {
        if let address = mapped.withLock({ $0.addresses[chunk] }) { return UnsafeRawPointer(bitPattern: address) }
        guard let made = mmap(nil, chunkLength, PROT_READ, MAP_SHARED, descriptor, 0), made != MAP_FAILED else { return nil }
        let kept = mapped.withLock { mapped -> UInt in
            if let raced = mapped.addresses[chunk] { return raced }
            mapped.addresses[chunk] = UInt(bitPattern: made)
            return UInt(bitPattern: made)
        }
        // Another reader mapped it first: keep theirs.
        if kept != UInt(bitPattern: made) { munmap(made, chunkLength) }
        return UnsafeRawPointer(bitPattern: kept)
    }

    /// A read of `count` bytes of chunk `chunk` is done with them (its
    /// pages were touched by now). Each time `dropEvery` more bytes have
    /// been read, the chunks read since the last time are dropped from the
    /// page tables. Counted when a read ends, not when it starts: a chunk
    /// counted at the start would be forgotten by a drop that came while
    /// its read still touched pages.
    func finishedReading(chunk: Int, count: Int) {
        // What a read of `count` bytes may have mapped: a fault maps the
        // 64 KiB around the page (the kernel's fault-around), so 4 KiB
        // reads counted as 4 KiB left 16 times that mapped (in the bench's
        // cached random reads, the mount's peak RSS rose by 170 MiB).
        let span = (count + 2 * Self.faultAround - 1) / Self.faultAround * Self.faultAround
        let total = served.add(span, ordering: .relaxed).newValue
        let due = mapped.withLock { mapped -> [UInt] in
            mapped.touched.insert(chunk)
            guard total / dropEvery != (total - span) / dropEvery else { return [] }
            defer { mapped.touched.removeAll(keepingCapacity: true) }
            return mapped.touched.compactMap { mapped.addresses[$0] }
        }
        for address in due {
            // Harmless for bytes in use: a touch maps the page again.
            madvise(UnsafeMutableRawPointer(bitPattern: address), chunkLength, MADV_DONTNEED)
        }
    }

    /// The CRC-32C of `bytes` (as `BlockFile.checksum` gives it); nil if
    /// reading them faulted.
    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        var crc: UInt32 = 0
        guard bucketfs_mapped_crc32c(bytes.baseAddress, bytes.count, &crc) == 0 else { return nil }
        return UInt64(crc)
    }

    /// Copies `source` to `destination` (at least as long); false if
    /// reading `source` faulted. Any memory may be copied this way.
    static func copy(_ source: UnsafeRawBufferPointer, to destination: UnsafeMutableRawPointer) -> Bool {
        bucketfs_mapped_copy(destination, source.baseAddress, source.count) == 0
    }
}
