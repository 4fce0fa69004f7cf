import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Download buffers of 1, 2, 4 and 8 MiB kept for reuse, at most
/// `idleLimit` bytes of them idle. The read-ahead budget bounds the ones
/// in use; this bounds the ones waiting, so memory stays flat.
///
/// A mount fills the pool before it answers (`prefill`), so that a cold
/// read does not first touch fresh memory: on the test machine (a
/// virtual machine whose host backs guest memory lazily) first touching
/// a huge page took from 0.1 to 2.3 ms per 2 MiB (128 MiB in 11 to
/// 290 ms, the slow case whenever the guest's free huge pages had been
/// handed back to the host), and in the slow cold reads of a 256 MiB
/// object `clear_page_erms` was the mount's top symbol: 100-150 samples
/// (about 70-100 ms) against 6 in the fast ones, their wall time 0.29-0.31
/// against 0.21 s. A cold read on a fresh mount took 56-70 MiB of fresh
/// buffers; the pool holds 64 MiB.
///
/// The buffers are mappings of their own on 2 MiB boundaries, advised as
/// transparent huge pages (`HugeMappings`): a cold read of 256 MiB first
/// touches about half its bytes in fresh buffers (the read-ahead window
/// and the blocks waiting for the cache writer), and faulting those in
/// 4 KiB at a time was about 9% of all the machine's CPU samples during
/// the read (the fault, the memory cgroup's charge and the clearing of
/// each page); a huge page is one fault and one charge per 2 MiB.
final class ReadBuffers: Sendable {
    static let shared = ReadBuffers()
    static let smallest = 1 << 20
    static let largest = 8 << 20
    let idleLimit = 64 << 20

    private struct Idle: @unchecked Sendable {
        // @unchecked: raw pointers to buffers nobody else holds.
        var free: [Int: [UnsafeMutableRawPointer]] = [:]
        var bytes = 0
    }

    private let idle = OrderedLock("idle readers", Idle())

    /// Bytes of buffers waiting in the pool (tests).
    var idleBytes: Int { idle.withLock { $0.bytes } }

    func serves(_ size: Int) -> Bool { size >= Self.smallest && size <= Self.largest }

    /// The power of two at or above `size`.
    func sizeClass(for size: Int) -> Int {
        var result = Self.smallest
        while result < size { result <<= 1 }
        return result
    }

    /// A buffer for `count` bytes: one of the pool's (its size class, so
    /// `size` may be larger) when the pool serves that size, else exactly
    /// `count` bytes. Nil only if allocation fails.
    func allocate(_ count: Int) -> (pointer: UnsafeMutableRawPointer, size: Int)? {
        guard serves(count) else { return Self.pageAligned(count).map { ($0, count) } }
        let size = sizeClass(for: count)
        return (take(size), size)
    }

    /// Gives back a buffer of `size` bytes from `allocate`: kept for reuse
    /// when `size` is one of the pool's size classes (a mapping of the
    /// pool's), else freed (malloc's).
    func release(_ pointer: UnsafeMutableRawPointer, _ size: Int) {
        if serves(size) && size == sizeClass(for: size) {
            recycle(pointer, size)
        } else {
            free(pointer)
        }
    }

    /// A Data of the first `count` bytes of `pointer`, a buffer of `size`
    /// bytes it owns from here: it is released (above) when the Data's
    /// last copy or slice goes.
    func data(owning pointer: UnsafeMutableRawPointer, count: Int, size: Int) -> Data {
        Data(bytesNoCopy: pointer, count: count, deallocator: .custom { [self] pointer, _ in release(pointer, size) })
    }

    /// Maps and touches buffers of the smallest size (the read path's
    /// blocks, a FUSE write's copy) until `bytes` of them wait in the pool,
    /// at most `idleLimit`; returns how many bytes it added.
    @discardableResult
    func prefill(_ bytes: Int) -> Int {
        let target = min(bytes, idleLimit)
        var added = 0
        while idleBytes + HugeMappings.hugePage <= target, let pair = HugeMappings.map(HugeMappings.hugePage) {
            // One write per page: the fault maps (and clears) it now, not
            // during a read. Sound: `pair` is `hugePage` bytes just mapped.
            for offset in stride(from: 0, to: HugeMappings.hugePage, by: 4096) {
                pair.storeBytes(of: 0, toByteOffset: offset, as: UInt8.self)
            }
            recycle(pair, Self.smallest)
            recycle(pair + Self.smallest, Self.smallest)
            added += HugeMappings.hugePage
        }
        return added
    }

    private func take(_ size: Int) -> UnsafeMutableRawPointer {
        let reused = idle.withLock { idle -> UnsafeMutableRawPointer? in
            guard let pointer = idle.free[size]?.popLast() else { return nil }
            idle.bytes -= size
            return pointer
        }
        if let reused { return reused }
        if size >= HugeMappings.hugePage {
            return HugeMappings.map(size)!
        }
        // A buffer smaller than a huge page is half of one (the pool's
        // sizes are powers of two): the other half waits in the pool.
        let pair = HugeMappings.map(HugeMappings.hugePage)!
        recycle(pair + size, size)
        return pair
    }

    /// `size` bytes from malloc, page-aligned when a page or more. The
    /// kernel's copies between these buffers and the page cache (a pread
    /// from the block cache, a pwrite into it) or a FUSE reply's pages run
    /// 4-5 times slower when the buffer is not aligned like the page: on
    /// the 2-core AMD EPYC test machine a 1 MiB pread ran at 1.6 GB/s into
    /// malloc's buffer (16 bytes past a page) and at 7-8 GB/s into an
    /// aligned one. Freed with `free` either way.
    static func pageAligned(_ size: Int) -> UnsafeMutableRawPointer? {
        guard size >= 4096 else { return malloc(size) }
        var pointer: UnsafeMutableRawPointer?
        return posix_memalign(&pointer, 4096, size) == 0 ? pointer : nil
    }

    private func recycle(_ pointer: UnsafeMutableRawPointer, _ size: Int) {
        let kept = idle.withLock { idle -> Bool in
            guard idle.bytes + size <= idleLimit else { return false }
            idle.free[size, default: []].append(pointer)
            idle.bytes += size
            return true
        }
        if !kept { HugeMappings.unmap(pointer, size) }
    }
}

/// Anonymous mappings on 2 MiB boundaries, advised as transparent huge
/// pages (where the kernel's setting is `madvise`, as on Debian, only
/// advised memory gets them). The kernel backs each whole, aligned 2 MiB
/// of such a mapping with one huge page at its first touch; a mapping
/// partly unmapped later is split back into small pages, which stays
/// correct.
enum HugeMappings {
    static let hugePage = 2 << 20

    /// `size` bytes (a multiple of 4 KiB) starting on a 2 MiB boundary; nil
    /// if the kernel refuses the mapping.
    static func map(_ size: Int) -> UnsafeMutableRawPointer? {
        // Map a huge page more than asked, then unmap what lies before the
        // first boundary and after the end: what is left is aligned.
        let span = size + hugePage
        guard let raw = mmap(nil, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), raw != MAP_FAILED else {
            return nil
        }
        let address = UInt(bitPattern: raw)
        let aligned = (address + UInt(hugePage) - 1) & ~UInt(hugePage - 1)
        let head = Int(aligned - address)
        // Sound: both ranges lie inside the `span` bytes just mapped, and
        // nothing else refers to them.
        if head > 0 { munmap(raw, head) }
        let tail = span - head - size
        if tail > 0 { munmap(raw + head + size, tail) }
        let buffer = raw + head
        _ = madvise(buffer, size, MADV_HUGEPAGE)  // advice: small pages if refused
        return buffer
    }

    /// Gives back `size` bytes at `pointer` from `map` (or part of such).
    static func unmap(_ pointer: UnsafeMutableRawPointer, _ size: Int) {
        munmap(pointer, size)
    }
}

/// A copy of `bytes` in a buffer aligned like the page: one of the shared
/// pool's when it serves the size (reused, so no fresh memory to fault in),
/// else `posix_memalign`'s. For a FUSE write's bytes, which libfuse hands
/// over 80 bytes into a request buffer it reuses: the staging file's
/// `pwrite` copies them into the page cache, and from `Data(bytes:count:)`'s
/// buffer (malloc's, 16 bytes past a page) that copy was 35% of the
/// mount's CPU over a 256 MiB `cp` (the misaligned copy `ReadBuffers`
/// describes).
public func pageAlignedCopy(of bytes: UnsafeRawBufferPointer) -> Data {
    let pool = ReadBuffers.shared
    guard let baseAddress = bytes.baseAddress else { return Data() }
    guard bytes.count >= 4096, let (buffer, size) = pool.allocate(bytes.count) else {
        return Data(bytes: baseAddress, count: bytes.count)
    }
    // Sound: `buffer` holds at least `bytes.count` bytes (`allocate`), is
    // ours alone until handed to the Data below, and does not overlap
    // `bytes`.
    buffer.copyMemory(from: baseAddress, byteCount: bytes.count)
    return pool.data(owning: buffer, count: bytes.count, size: size)
}
