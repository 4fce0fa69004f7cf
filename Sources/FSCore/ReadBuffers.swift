import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Download buffers of 1, 2, 4 and 8 MiB kept for reuse, at most
/// `idleLimit` bytes of them idle. The read-ahead budget bounds the ones
/// in use; this bounds the ones waiting, so memory stays flat.
final class ReadBuffers: Sendable {
    static let shared = ReadBuffers()
    static let smallest = 1 << 20
    static let largest = 8 << 20
    let idleLimit = 32 << 20

    private struct Idle: @unchecked Sendable {
        // @unchecked: raw pointers to buffers nobody else holds.
        var free: [Int: [UnsafeMutableRawPointer]] = [:]
        var bytes = 0
    }

    private let idle = OrderedLock("idle readers", Idle())

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

    /// Gives back a malloc'd buffer of `size` bytes (from `allocate` or
    /// not): kept for reuse when `size` is one of the pool's size classes,
    /// else freed.
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

    private func take(_ size: Int) -> UnsafeMutableRawPointer {
        let reused = idle.withLock { idle -> UnsafeMutableRawPointer? in
            guard let pointer = idle.free[size]?.popLast() else { return nil }
            idle.bytes -= size
            return pointer
        }
        return reused ?? Self.pageAligned(size)!
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
        if !kept { free(pointer) }
    }
}
