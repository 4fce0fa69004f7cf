import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The on-disk format of one cached block, and the POSIX calls that read
/// and write it. A block file is a header, the key it belongs to, and the
/// payload:
///
///     magic "BFSB" | version u32 | payload length u64 | checksum u64 |
///     key length u32 | key bytes | payload
///
/// (little endian). The key is stored so that a hash collision of file
/// names reads as a miss, never as another object's bytes; the length and
/// checksum turn a short or corrupt file into a miss.
enum BlockFile {
    static let magic: UInt32 = 0x4253_4642  // "BFSB" little endian
    /// 2: the checksum runs four lanes (files of version 1 read as misses).
    static let version: UInt32 = 2
    static let fixedHeaderSize = 28

    /// The header of a file, once its key matched.
    struct Header {
        var payloadLength: Int64
        var checksum: UInt64
        var payloadOffset: Int64
    }

    static func encodeHeader(key: String, payload: Data) -> Data {
        var header = Data(capacity: fixedHeaderSize + key.utf8.count)
        func append<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { header.append(contentsOf: $0) }
        }
        append(magic)
        append(version)
        append(UInt64(payload.count))
        append(checksum(payload))
        append(UInt32(key.utf8.count))
        header.append(contentsOf: key.utf8)
        return header
    }

    /// Writes header and payload to a new file at `path` (which must not
    /// exist). Throws nothing: returns false on any failure (a cache write
    /// that fails is only a missed optimisation).
    static func write(path: String, header: Data, payload: Data) -> Bool {
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return writeAll(fd, header) && writeAll(fd, payload)
    }

    /// Reads and checks the header of open file `fd` against `key`.
    static func readHeader(_ fd: Int32, key: String) -> Header? {
        guard let fixed = readExactly(fd, count: fixedHeaderSize, at: 0) else { return nil }
        func load<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
            fixed.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
        }
        guard load(0, UInt32.self) == magic, load(4, UInt32.self) == version else { return nil }
        let payloadLength = Int64(load(8, UInt64.self))
        let checksum = load(16, UInt64.self)
        let keyLength = Int(load(24, UInt32.self))
        guard keyLength == key.utf8.count,
            let storedKey = readExactly(fd, count: keyLength, at: Int64(fixedHeaderSize)),
            storedKey.elementsEqual(key.utf8)
        else { return nil }
        let payloadOffset = Int64(fixedHeaderSize + keyLength)
        var info = stat()
        guard fstat(fd, &info) == 0, Int64(info.st_size) == payloadOffset + payloadLength else { return nil }
        return Header(payloadLength: payloadLength, checksum: checksum, payloadOffset: payloadOffset)
    }

    /// `count` bytes at `offset`, read into a buffer that is not zeroed
    /// first (a block is read whole on a hit: clearing it before would
    /// cost a pass over it for nothing). Blocks come from `ReadBuffers`:
    /// a fresh 1 MiB allocation per hit is fresh pages, and faulting them
    /// in was about 5% of the mount's samples in a block-cache re-read.
    static func readExactly(_ fd: Int32, count: Int, at offset: Int64) -> Data? {
        guard count > 0 else { return Data() }
        guard let (buffer, size) = ReadBuffers.shared.allocate(count) else { return nil }
        var done = 0
        while done < count {
            let n = pread(fd, buffer + done, count - done, off_t(offset) + off_t(done))
            if n < 0 && wasInterrupted(errno) { continue }
            guard n > 0 else {
                ReadBuffers.shared.release(buffer, size)
                return nil
            }
            done += n
        }
        // The Data owns the buffer from here.
        return ReadBuffers.shared.data(owning: buffer, count: count, size: size)
    }

    private static func writeAll(_ fd: Int32, _ data: Data) -> Bool {
        data.withUnsafeBytes { buffer -> Bool in
            var done = 0
            while done < buffer.count {
                let n = Glibc.write(fd, buffer.baseAddress! + done, buffer.count - done)
                if n < 0 && wasInterrupted(errno) { continue }
                guard n > 0 else { return false }
                done += n
            }
            return true
        }
    }

    /// A fast 64-bit checksum (multiply-xorshift over 8-byte words), to
    /// catch torn or damaged files; not a defence against tampering. Four
    /// independent lanes over 32-byte strides, so the multiplications
    /// overlap instead of waiting for each other: verifying a block read
    /// from the cache must cost far less than copying it.
    static func checksum(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { buffer -> UInt64 in
            let seed: UInt64 = 0x9E37_79B9_7F4A_7C15 ^ UInt64(buffer.count)
            var lanes: (UInt64, UInt64, UInt64, UInt64) = (seed, seed ^ 1, seed ^ 2, seed ^ 3)
            func mix(_ hash: UInt64, _ word: UInt64) -> UInt64 {
                let h = (hash ^ word) &* 0xFF51_AFD7_ED55_8CCD
                return h ^ (h >> 32)
            }
            let strides = buffer.count / 32
            for i in 0..<strides {
                let base = i * 32
                lanes.0 = mix(lanes.0, buffer.loadUnaligned(fromByteOffset: base, as: UInt64.self))
                lanes.1 = mix(lanes.1, buffer.loadUnaligned(fromByteOffset: base + 8, as: UInt64.self))
                lanes.2 = mix(lanes.2, buffer.loadUnaligned(fromByteOffset: base + 16, as: UInt64.self))
                lanes.3 = mix(lanes.3, buffer.loadUnaligned(fromByteOffset: base + 24, as: UInt64.self))
            }
            var hash = mix(mix(mix(lanes.0, lanes.1), lanes.2), lanes.3)
            for i in (strides * 32)..<buffer.count {
                hash = (hash ^ UInt64(buffer[i])) &* 0xC4CE_B9FE_1A85_EC53
            }
            return hash ^ (hash >> 29)
        }
    }

    /// A 128-bit FNV-1a-style digest of `text`, as 32 hex digits: two
    /// independent 64-bit lanes. Collisions only cost a miss (the key is
    /// checked), so this need not be cryptographic.
    static func fileName(for text: String) -> String {
        var a: UInt64 = 0xCBF2_9CE4_8422_2325
        var b: UInt64 = 0x6C62_272E_07BB_0142
        for byte in text.utf8 {
            a = (a ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            b = (b ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
            b = b ^ (b >> 29)
        }
        func hex(_ v: UInt64) -> String {
            let s = String(v, radix: 16)
            return String(repeating: "0", count: 16 - s.count) + s
        }
        return hex(a) + hex(b)
    }
}
