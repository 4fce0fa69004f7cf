import Foundation
import TestServerClient
import Testing
@testable import StorageKit
import Transport

/// Parallel composite uploads' calls (parts from file regions, compose)
/// against both real servers, each result read back with plain requests
/// (`DirectGCS`). Where a server departs from Cloud Storage's documentation,
/// the check says what GCS does and what the server does instead.
@Suite struct ComposeTests {
    /// Each server with a bucket and a prefix of this test's own.
    struct Server: Sendable, CustomStringConvertible {
        let variable: String
        var description: String { variable }

        func connect() async throws -> (DirectGCS, Storage, String) {
            let prefix = TestEnv.uniquePrefix("compose")
            if variable == "BUCKETFS_TEST_FAKE_GCS_SERVER" {
                let bucket = "sk-\(UUID().uuidString.prefix(8).lowercased())"
                let raw = try DirectGCS(variable, bucket: bucket)
                try await raw.post("/storage/v1/b", json: ["name": bucket])
                return (raw, try TestEnv.storage(variable, bucket: bucket, chunk: 256 << 10, threshold: 256 << 10), prefix)
            }
            return (try DirectGCS.emulator(), try TestEnv.emulator(chunk: 256 << 10, threshold: 256 << 10), prefix)
        }
    }

    static let servers = [Server(variable: "BUCKETFS_TEST_FAKE_GCS_SERVER"), Server(variable: "BUCKETFS_TEST_EMULATOR")]

    func file(_ data: Data) throws -> String {
        let path = FileManager.default.temporaryDirectory.path + "/compose-\(UUID().uuidString)"
        try data.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: servers) func partsOfAFileComposeIntoTheObjectWithItsMetadataAndCRC32C(_ server: Server) async throws {
        let (raw, storage, prefix) = try await server.connect()
        let data = TestEnv.randomData(700 << 10, seed: 29)
        let path = try file(data)
        defer { unlink(path) }
        // Two parts below the multipart threshold and one above it (one
        // multipart request all the same: a part is never resumable).
        let ranges: [Range<Int64>] = [0..<(100 << 10), (100 << 10)..<(500 << 10), (500 << 10)..<(700 << 10)]
        var parts: [StorageReference] = []
        var crc = CRC32C().value
        for (index, range) in ranges.enumerated() {
            let part = storage.reference().child("\(prefix)/.parts/\(index)")
            let partCRC = try CRC32C.of(file: path, range: range)
            let stored = try await part.putFile(atPath: path, range: range, crc32c: CRC32C.base64(partCRC), ifGenerationMatch: 0)
            #expect(stored.size == Int64(range.count) && stored.crc32c == CRC32C.base64(partCRC))
            #expect(try await raw.media(part.fullPath) == data.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)))
            crc = CRC32C.combine(crc, partCRC, lengthOfSecond: Int64(range.count))
            parts.append(part)
        }
        #expect(CRC32C.base64(crc) == ObjectHashes.of(data).crc32c, "the parts' checksums combine into the file's")
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-thing"
        metadata.cacheControl = "no-cache"
        metadata.customMetadata = ["goog-reserved-posix-mode": "100640", "k": "v"]
        let destination = storage.reference().child("\(prefix)/whole.bin")
        let composed = try await destination.compose(parts, metadata: metadata, ifGenerationMatch: 0)
        #expect(composed.size == Int64(data.count))
        #expect(composed.crc32c == CRC32C.base64(crc))
        let resource = try #require(try await raw.resource(destination.fullPath))
        #expect(resource["crc32c"] as? String == CRC32C.base64(crc))
        #expect(resource["contentType"] as? String == "application/x-thing")
        #expect(resource["metadata"] as? [String: String] == ["goog-reserved-posix-mode": "100640", "k": "v"])
        // GCS: a composite object has no MD5
        // (https://cloud.google.com/storage/docs/composite-objects); both
        // servers compute one anyway, so its absence is not checked.
        #expect(try await raw.media(destination.fullPath) == data)
        for part in parts { #expect(try await raw.resource(part.fullPath) != nil, "compose keeps its sources") }
    }

    @Test(arguments: servers) func composeWithoutAContentTypeTakesTheOneTheNameImplies(_ server: Server) async throws {
        let (raw, storage, prefix) = try await server.connect()
        let part = storage.reference().child("\(prefix)/.parts/0")
        _ = try await part.putDataAsync(Data("<p>hi</p>".utf8))
        let destination = storage.reference().child("\(prefix)/page.html")
        _ = try await destination.compose([part], ifGenerationMatch: 0)
        #expect(try await raw.resource(destination.fullPath)?["contentType"] as? String == "text/html")
    }

    @Test(arguments: servers) func composeOfAMissingSourceFails(_ server: Server) async throws {
        let (raw, storage, prefix) = try await server.connect()
        let destination = storage.reference().child("\(prefix)/never")
        await #expect(throws: StorageError.self) {
            try await destination.compose([storage.reference().child("\(prefix)/.parts/missing")], ifGenerationMatch: 0)
        }
        #expect(try await raw.resource(destination.fullPath) == nil)
    }

    /// GCS refuses a compose whose ifGenerationMatch fails with 412
    /// (https://cloud.google.com/storage/docs/json_api/v1/objects/compose).
    /// Neither server checks it: fake-gcs-server (composeObject,
    /// fakestorage/object.go) and gcp-storage-emulator
    /// (handlers/objects.py: compose) overwrite the destination. This
    /// pins that down, because it is why `ParallelUploads` also checks the
    /// precondition before the parts go up, and why the mount's conflict
    /// tests run on the in-memory store.
    @Test(arguments: servers) func theServersIgnoreComposePreconditions(_ server: Server) async throws {
        let (raw, storage, prefix) = try await server.connect()
        let part = storage.reference().child("\(prefix)/.parts/0")
        _ = try await part.putDataAsync(Data("new".utf8))
        try await raw.put("\(prefix)/taken", Data("old".utf8))
        _ = try? await storage.reference().child("\(prefix)/taken").compose([part], ifGenerationMatch: 0)
        #expect(try await raw.media("\(prefix)/taken") == Data("new".utf8), "if this fails, the server checks the precondition now: test the conflict through a mount")
    }

    /// fake_gcs.py checks compose's preconditions; its fault stores the
    /// composite and loses the answer (503), so the resend meets the
    /// object it made and fails ifGenerationMatch=0.
    @Test func aResentComposeThatMeetsItsOwnObjectSucceeds() async throws {
        let bucket = "sk-compose-\(UUID().uuidString.prefix(8).lowercased())"
        let raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket)
        let storage = try TestEnv.fake(bucket: bucket)
        let data = Data("parts of a whole".utf8)
        let part = storage.reference().child(".parts/0")
        _ = try await part.putDataAsync(data)
        let destination = storage.reference().child("whole.bin")
        try await raw.post("/_faults", json: ["method": "POST", "path_contains": "/compose", "status": 503, "apply": true])
        let composed = try await destination.compose([part], ifGenerationMatch: 0, expectedCRC32C: ObjectHashes.of(data).crc32c, expectedSize: Int64(data.count))
        #expect(composed.size == Int64(data.count))
        #expect(try await raw.media("whole.bin") == data)
        let composes = try await raw.requests().filter { $0.path.hasSuffix("/compose") }
        #expect(composes.count == 2, "the first answer lost, the resend refused by the precondition")

        // Without the expected checksum the 412 is someone else's object.
        let other = storage.reference().child("other.bin")
        try await raw.post("/_faults", json: ["method": "POST", "path_contains": "/compose", "status": 503, "apply": true])
        await #expect(throws: StorageError.self) { try await other.compose([part], ifGenerationMatch: 0) }
    }

    @Test func composeTakesOneTo32Sources() async throws {
        let storage = try TestEnv.fake()
        let destination = storage.reference().child("d")
        let sources = (0..<33).map { storage.reference().child("p\($0)") }
        for count in [0, 33] {
            await #expect(throws: StorageError.self) { try await destination.compose(Array(sources.prefix(count))) }
        }
    }

    @Test func theCombinedChecksumIsTheChecksumOfTheConcatenation() {
        let data = TestEnv.randomData(10_000, seed: 3)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<50 {
            let cut = Int.random(in: 0...data.count, using: &generator)
            let first = CRC32C.checksum(data.prefix(cut)), second = CRC32C.checksum(data.dropFirst(cut))
            #expect(CRC32C.combine(first, second, lengthOfSecond: Int64(data.count - cut)) == CRC32C.checksum(data))
        }
    }

    @Test func aBucketsRetentionPeriodIsRead() async throws {
        let bucket = "sk-retention-\(UUID().uuidString.prefix(8).lowercased())"
        let raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket)
        let storage = try TestEnv.fake(bucket: bucket)
        #expect(try await storage.retentionPeriod() == nil)
        try await raw.post("/_retention", json: ["bucket": bucket, "seconds": 86_400])
        #expect(try await storage.retentionPeriod() == 86_400)
    }

    @Test func bucketsOfBothServersReportNoRetentionPolicy() async throws {
        for server in Self.servers {
            let (_, storage, _) = try await server.connect()
            #expect(try await storage.retentionPeriod() == nil, "\(server)")
        }
    }
}
