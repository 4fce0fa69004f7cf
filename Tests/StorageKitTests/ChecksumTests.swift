import Foundation
import TestSupport
import Testing
@testable import StorageKit

/// CRC32C, MD5 and the x-goog-hash header.
@Suite struct ChecksumTests {
    /// The bitwise definition, to check the table-driven code against.
    static func referenceCRC32C(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = (crc & 1) != 0 ? (crc >> 1) ^ 0x82F6_3B78 : crc >> 1 }
        }
        return ~crc
    }

    @Test func knownVectors() {
        #expect(CRC32C.checksum(Data("123456789".utf8)) == 0xE306_9283)
        #expect(CRC32C.checksum(Data(count: 32)) == 0x8A91_36AA)
        #expect(CRC32C.checksum(Data(repeating: 0xFF, count: 32)) == 0x62A8_AB43)
        #expect(CRC32C.checksum(Data((0..<32).map { UInt8($0) })) == 0x46DD_794E)
        #expect(CRC32C.checksum(Data()) == 0)
    }

    @Test func base64AsCloudStorageWritesIt() {
        var crc = CRC32C()
        crc.update(Data("hello world".utf8))
        #expect(crc.value == 0xC994_65AA)
        #expect(crc.base64 == "yZRlqg==")
        #expect(CRC32C().base64 == "AAAAAA==")
        #expect(CRC32C.base64(0xE306_9283) == "4waSgw==")
    }

    @Test func incrementalEqualsOneShotAndReference() {
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 1000, 4099] {
            let bytes = [UInt8](GeneratedBytes.random(length, using: &generator))
            let whole = CRC32C.checksum(bytes)
            #expect(whole == Self.referenceCRC32C(bytes), "length \(length)")
            var pieces = CRC32C()
            var index = 0
            while index < length {
                let step = Int.random(in: 1...13, using: &generator)
                let end = min(length, index + step)
                bytes[index..<end].withUnsafeBytes { pieces.update($0) }
                index = end
            }
            #expect(pieces.value == whole, "length \(length) in pieces")
        }
    }

    /// The CPU's instruction and the portable loop agree, around the
    /// lengths where the instruction's code changes shape (three
    /// interleaved segments of 256 and of 8,192 bytes) and for a block.
    @Test func instructionAndPortableLoopAgree() {
        #if arch(x86_64)
        #expect(CRC32C.hardware, "x86-64 machines since 2008 have SSE 4.2: the fast path must be the one tested")
        #endif
        var generator = SystemRandomNumberGenerator()
        let bytes = [UInt8](GeneratedBytes.random((1 << 20) + 11, using: &generator))
        let lengths = [0, 1, 8, 767, 768, 769, 775, 1535, 1536, 24_575, 24_576, 24_577, 24_576 + 768, 50_000, 1 << 20]
        for length in lengths {
            for start in [0, 3] {
                bytes[start..<(start + length)].withUnsafeBytes { raw in
                    var fast = CRC32C()
                    fast.update(raw)
                    var portable = CRC32C()
                    if let base = raw.baseAddress { portable.updatePortably(base, count: raw.count) }
                    #expect(fast == portable, "length \(length) from byte \(start)")
                }
            }
        }
        #expect(CRC32C.checksum(bytes) == Self.referenceCRC32C(bytes))
    }

    @Test func unalignedBuffers() {
        let bytes = (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        for start in 0..<8 {
            let slice = Array(bytes[start...])
            var crc = CRC32C()
            bytes.withUnsafeBytes { crc.update(UnsafeRawBufferPointer(rebasing: $0[start...])) }
            #expect(crc.value == Self.referenceCRC32C(slice))
        }
    }

    @Test func md5Base64() {
        var accumulator = ChecksumAccumulator()
        accumulator.update(Data("hello ".utf8))
        accumulator.update(Data("world".utf8))
        #expect(accumulator.md5Base64 == "XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(accumulator.crc32c == "yZRlqg==")
        #expect(accumulator.byteCount == 11)
        #expect(ChecksumAccumulator().md5Base64 == "1B2M2Y8AsgTpgAmY7PhCfg==")
        #expect(ChecksumAccumulator(includeMD5: false).md5Base64 == nil)
        // Reading the digest does not end the accumulation.
        accumulator.update(Data("!".utf8))
        #expect(accumulator.hashes == ObjectHashes.of(Data("hello world!".utf8)))
    }

    @Test func hashHeader() {
        let h = ObjectHashes(hashHeader: "crc32c=yZRlqg==,md5=XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(h.crc32c == "yZRlqg==")
        #expect(h.md5 == "XrY7u+Ae7tCTyyK7j1rNww==")
        let joined = ObjectHashes(hashHeader: "crc32c=yZRlqg==, md5=XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(joined == h)
        let crcOnly = ObjectHashes(hashHeader: "CRC32C=n03x6A==,sha256=zzz")
        #expect(crcOnly.crc32c == "n03x6A==")
        #expect(crcOnly.md5 == nil)
        #expect(ObjectHashes(hashHeader: "").isEmpty)
        #expect(ObjectHashes(hashHeader: "garbage,md5=").isEmpty)
    }

    @Test func fromMetadata() throws {
        let m = StorageMetadata(dictionary: ["name": "x", "crc32c": "yZRlqg==", "md5Hash": "XrY7u+Ae7tCTyyK7j1rNww=="])
        #expect(ObjectHashes(metadata: m) == ObjectHashes(crc32c: "yZRlqg==", md5: "XrY7u+Ae7tCTyyK7j1rNww=="))
    }

    @Test func verifyingAStreamedBody() throws {
        let body = Data("hello world".utf8)
        var accumulator = ChecksumAccumulator()
        for chunk in stride(from: 0, to: body.count, by: 3) {
            body[chunk..<min(chunk + 3, body.count)].withUnsafeBytes { accumulator.update($0) }
        }
        let good = ObjectHashes(hashHeader: "crc32c=yZRlqg==,md5=XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(accumulator.matches(good))
        try accumulator.verify(good)
        // CRC32C decides when present, even if the MD5 is off.
        #expect(accumulator.matches(ObjectHashes(crc32c: "yZRlqg==", md5: "wrong")))
        #expect(!accumulator.matches(ObjectHashes(crc32c: "AAAAAA==", md5: "XrY7u+Ae7tCTyyK7j1rNww==")))
        // MD5 only (some servers), and nothing to compare with.
        #expect(accumulator.matches(ObjectHashes(crc32c: nil, md5: "XrY7u+Ae7tCTyyK7j1rNww==")))
        #expect(!accumulator.matches(ObjectHashes(crc32c: nil, md5: "1B2M2Y8AsgTpgAmY7PhCfg==")))
        #expect(accumulator.matches(ObjectHashes(crc32c: nil, md5: nil)))
        do {
            try accumulator.verify(ObjectHashes(crc32c: "AAAAAA==", md5: nil))
            Issue.record("must fail")
        } catch {
            guard case .nonMatchingChecksum = error else {
                Issue.record("expected nonMatchingChecksum, got \(error)")
                return
            }
        }
    }

    @Test func largeBufferThroughput() {
        // 8 MiB through slicing-by-8 against a bytewise-checked prefix; also
        // a smoke test that nothing is quadratic.
        let data = GeneratedBytes.data(8 << 20) { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 13) }
        var a = CRC32C()
        a.update(data)
        var b = CRC32C()
        b.update(data.prefix(4 << 20))
        b.update(data.suffix(from: 4 << 20))
        #expect(a == b)
    }
}
