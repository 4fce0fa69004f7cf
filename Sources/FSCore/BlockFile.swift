import Foundation
import StorageKit
#if canImport(Glibc)
import Glibc
#endif

/// The on-disk format of one cached block in its slot of a chunk file
/// (`ChunkFiles`), and the POSIX reads and writes of it. A slot is a
/// header page, then the payload:
///
///     magic "BFSC" | version u32 | sequence u64 | payload length u64 |
///     payload checksum u64 | key length u32 | key bytes |
///     header checksum u64 (of everything before it)
///
/// (little endian), padded to `headerSize`; the payload starts at
/// `headerSize`. The key is stored so that a slot is found again at start
/// and never read as another block; the header checksum turns a torn or
/// garbled header into an empty slot, the payload checksum a torn or
/// garbled payload into a miss. Nothing orders the header and the payload
/// on their way to the disk (no fsync: a cache write is only an
/// optimisation), so the checksums, not the order of the writes, are what
/// keep a power cut from serving wrong bytes: an old header over a new
/// payload, or a new header over an old one, fails the payload checksum.
enum BlockFile {
    static let magic: UInt32 = 0x4353_4642  // "BFSC" little endian
    /// 2: checksums are CRC-32C (a slot of version 1 reads as empty).
    static let version: UInt32 = 2
    /// One page: the payload starts page-aligned, so a block occupies
    /// whole pages of the page cache and the disk.
    static let headerSize = 4096
    static let fixedHeaderSize = 36
    /// The longest stored key a header holds (object names are at most
    /// 1,024 bytes, so every real key fits).
    static let maxKeyLength = headerSize - fixedHeaderSize - 8

    /// A valid header: whose block the slot holds, and how to check it.
    struct Header: Equatable {
        var key: String
        var sequence: UInt64
        var payloadLength: Int
        var checksum: UInt64
    }

    /// The header page for a payload of `payloadLength` bytes whose
    /// checksum is `payloadChecksum`, of `key`; nil when the key is too long
    /// to store. (The caller computes the checksum once: it also goes into
    /// the index, and a second pass over 1 MiB was a quarter of a cold
    /// read's instructions.)
    static func encodeHeader(key: String, sequence: UInt64, payloadLength: Int, payloadChecksum: UInt64) -> Data? {
        guard key.utf8.count <= maxKeyLength else { return nil }
        var header = Data(capacity: headerSize)
        func append<T: FixedWidthInteger>(_ value: T) {
            withUnsafeBytes(of: value.littleEndian) { header.append(contentsOf: $0) }
        }
        append(magic)
        append(version)
        append(sequence)
        append(UInt64(payloadLength))
        append(payloadChecksum)
        append(UInt32(key.utf8.count))
        header.append(contentsOf: key.utf8)
        append(checksum(header))
        header.append(Data(count: headerSize - header.count))
        return header
    }

    /// The header in `page` (a slot's first bytes), if it is one whose
    /// checksum holds and whose payload fits in `maxPayload` bytes.
    static func decodeHeader(_ page: Data, maxPayload: Int) -> Header? {
        guard page.count >= fixedHeaderSize else { return nil }
        return page.withUnsafeBytes { raw -> Header? in
            func load<T: FixedWidthInteger>(_ offset: Int, _: T.Type) -> T {
                T(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: T.self))
            }
            guard load(0, UInt32.self) == magic, load(4, UInt32.self) == version else { return nil }
            let keyLength = Int(load(32, UInt32.self))
            let end = fixedHeaderSize + keyLength
            guard keyLength <= maxKeyLength, end + 8 <= raw.count,
                checksum(UnsafeRawBufferPointer(rebasing: raw[0..<end])) == load(end, UInt64.self)
            else { return nil }
            let length = load(16, UInt64.self)
            guard length <= UInt64(maxPayload) else { return nil }
            let key = String(decoding: UnsafeRawBufferPointer(rebasing: raw[fixedHeaderSize..<end]), as: UTF8.self)
            return Header(key: key, sequence: load(8, UInt64.self), payloadLength: Int(length), checksum: load(24, UInt64.self))
        }
    }

    /// `count` bytes at `offset`, read into a buffer that is not zeroed
    /// first (a block is read whole on a first hit: clearing it before
    /// would cost a pass over it for nothing). Blocks come from
    /// `ReadBuffers`: a fresh 1 MiB allocation per hit is fresh pages, and
    /// faulting them in was about 5% of the mount's samples in a
    /// block-cache re-read. Nil when the file is shorter or unreadable.
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

    /// Writes all of `data` at `offset`; false on any failure (a cache
    /// write that fails is only a missed optimisation).
    static func writeAll(_ fd: Int32, _ data: Data, at offset: Int64) -> Bool {
        data.withUnsafeBytes { buffer -> Bool in
            var done = 0
            while done < buffer.count {
                let n = pwrite(fd, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                if n < 0 && wasInterrupted(errno) { continue }
                guard n > 0 else { return false }
                done += n
            }
            return true
        }
    }

    static func checksum(_ data: Data) -> UInt64 {
        data.withUnsafeBytes { checksum($0) }
    }

    /// The CRC-32C of the bytes (in a 64-bit field), to catch torn or
    /// damaged slots; not a defence against tampering. CRC-32C is what
    /// Cloud Storage itself trusts for an object's integrity, and with the
    /// CPU's instruction (`StorageKit.CRC32C`) it runs at about 20 GB/s on
    /// the 2-core test machine, twice the multiply-xorshift hash it
    /// replaced: verifying a block read from the cache must cost far less
    /// than copying it. A damaged payload passes with a chance of 2^-32.
    static func checksum(_ buffer: UnsafeRawBufferPointer) -> UInt64 {
        var crc = CRC32C()
        crc.update(buffer)
        return UInt64(crc.value)
    }
}
