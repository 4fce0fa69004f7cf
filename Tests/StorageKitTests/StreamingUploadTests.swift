import Foundation
import TestServerClient
import Testing
@testable import StorageKit

/// A file on disk that grows as a test appends to it, as bucketfs's staged
/// file does while an application writes.
struct GrowingFile {
    let path: String

    init(_ label: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString.prefix(8))").path
        try Data().write(to: URL(fileURLWithPath: path))
    }

    func append(_ data: Data) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
    }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Streaming uploads against gcp-storage-emulator, checked through plain
/// HTTP requests (`DirectGCS`).
@Suite struct StreamingUploadEmulatorTests {
    let raw: DirectGCS
    let prefix = TestEnv.uniquePrefix("stream")

    init() throws {
        raw = try DirectGCS.emulator()
    }

    @Test func aFortyMiBFileIsSentSixteenMiBAtATimeWhileItIsWritten() async throws {
        let storage = try TestEnv.emulator(chunk: 16 << 20)
        let data = TestEnv.randomData(40 << 20, seed: 21)
        let file = try GrowingFile("\(prefix)-40m")
        defer { file.remove() }
        let ref = storage.reference().child("\(prefix)/growing.bin")
        let upload = try await ref.startStreamingUpload(fromFile: file.path, metadata: nil, ifGenerationMatch: nil)
        let step = 16 << 20
        var written = 0
        var sent = 0
        // Written in 3 MiB pieces; each time 16 MiB more are on disk they go.
        while written < data.count {
            let piece = min(3 << 20, data.count - written)
            try file.append(data[written..<(written + piece)])
            written += piece
            if written - sent >= step {
                sent += step
                try await upload.send(upTo: Int64(sent))
                #expect(upload.acknowledged == Int64(sent))
                #expect(try await raw.resource(ref.fullPath) == nil, "no object before finish")
            }
        }
        #expect(sent == 32 << 20)
        let stored = try await upload.finish(size: Int64(data.count))
        #expect(stored.size == Int64(data.count))
        #expect(upload.acknowledged == Int64(data.count))
        let resource = try #require(try await raw.resource(ref.fullPath))
        #expect(resource["md5Hash"] as? String == EmulatorTests.md5Base64(data))
        #expect(resource["contentType"] as? String == "application/octet-stream")
        #expect(try await raw.media(ref.fullPath) == data)
    }

    @Test func aZeroByteFileFinishesAsAnEmptyObject() async throws {
        let storage = try TestEnv.emulator()
        let file = try GrowingFile("\(prefix)-empty")
        defer { file.remove() }
        let ref = storage.reference().child("\(prefix)/empty")
        let upload = try await ref.startStreamingUpload(fromFile: file.path, metadata: nil, ifGenerationMatch: nil)
        let stored = try await upload.finish(size: 0)
        #expect(stored.size == 0)
        #expect(try await raw.resource(ref.fullPath)?["size"] as? String == "0")
        #expect(try await raw.media(ref.fullPath) == Data())
    }

    @Test func aRemainderThatIsNotAWholeGranuleGoesWithFinish() async throws {
        // 256 KiB chunks: each send is several requests.
        let storage = try TestEnv.emulator(chunk: 256 * 1024)
        let data = TestEnv.randomData((1 << 20) + 1234, seed: 22)
        let file = try GrowingFile("\(prefix)-remainder")
        defer { file.remove() }
        try file.append(data[0..<(700 * 1024)])
        let ref = storage.reference().child("\(prefix)/notes.txt")
        let metadata = StorageMetadata()
        metadata.customMetadata = ["origin": "stream"]
        let upload = try await ref.startStreamingUpload(fromFile: file.path, metadata: metadata, ifGenerationMatch: nil)
        try await upload.send(upTo: 512 * 1024)
        try file.append(data[(700 * 1024)...])
        try await upload.send(upTo: 1 << 20)
        #expect(upload.acknowledged == 1 << 20)
        let stored = try await upload.finish(size: Int64(data.count))
        #expect(stored.size == Int64(data.count))
        #expect(stored.contentType == "text/plain", "the staged file implies no type, so the object's name does")
        let resource = try #require(try await raw.resource(ref.fullPath))
        #expect((resource["metadata"] as? [String: String])?["origin"] == "stream")
        #expect(try await raw.media(ref.fullPath) == data)
    }

    @Test func sendsOutsideTheRulesAreRefusedBeforeAnyRequest() async throws {
        let storage = try TestEnv.emulator()
        let file = try GrowingFile("\(prefix)-rules")
        defer { file.remove() }
        try file.append(TestEnv.randomData(300 * 1024))
        let ref = storage.reference().child("\(prefix)/rules")
        let upload = try await ref.startStreamingUpload(fromFile: file.path, metadata: nil, ifGenerationMatch: nil)
        for end: Int64 in [0, 1000, 512 * 1024] {  // not above 0, not a granule, past the file's end
            do {
                try await upload.send(upTo: end)
                Issue.record("send(upTo: \(end)) must fail")
            } catch StorageError.invalidArgument {}
        }
        do {
            _ = try await upload.finish(size: 400 * 1024)
            Issue.record("a finish past the file's end must fail")
        } catch StorageError.invalidArgument {}
        #expect(upload.acknowledged == 0)
        let stored = try await upload.finish(size: 300 * 1024)
        #expect(stored.size == 300 * 1024)
        do {
            _ = try await storage.reference().child("\(prefix)/nofile").startStreamingUpload(
                fromFile: file.path + "-missing", metadata: nil, ifGenerationMatch: nil)
            Issue.record("a missing file must fail")
        } catch StorageError.invalidArgument {}
    }
}

/// What the emulator cannot show: preconditions and lost chunks, against
/// the tests' own loopback GCS server.
@Suite struct StreamingUploadFakeServerTests {
    let raw: DirectGCS
    let bucket = "stream-\(UUID().uuidString.prefix(8).lowercased())"
    let storage: Storage

    init() throws {
        raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket)
        storage = try TestEnv.storage("BUCKETFS_TEST_FAKE_GCS", bucket: bucket, chunk: 256 * 1024)
    }

    @Test func aFailedPreconditionIsReportedAndTheObjectKept() async throws {
        let file = try GrowingFile("pre")
        defer { file.remove() }
        let data = TestEnv.randomData(600 * 1024, seed: 23)
        try file.append(data)
        try await raw.put("kept", Data("keep".utf8))
        let kept = storage.reference().child("kept")
        do {
            _ = try await kept.startStreamingUpload(fromFile: file.path, metadata: nil, ifGenerationMatch: 0)
            Issue.record("the object exists: the start must fail")
        } catch StorageError.preconditionFailed {}

        // Absent at the start, created by someone else before the finish.
        let raced = storage.reference().child("raced")
        let upload = try await raced.startStreamingUpload(fromFile: file.path, metadata: nil, ifGenerationMatch: 0)
        try await upload.send(upTo: 512 * 1024)
        try await raw.put("raced", Data("theirs".utf8))
        do {
            _ = try await upload.finish(size: Int64(data.count))
            Issue.record("the object appeared meanwhile: the finish must fail")
        } catch StorageError.preconditionFailed {}
        #expect(try await raw.media("kept") == Data("keep".utf8))
        #expect(try await raw.media("raced") == Data("theirs".utf8))

        let current = try await kept.getMetadata()
        let replace = try await kept.startStreamingUpload(fromFile: file.path, metadata: nil, ifGenerationMatch: current.generation)
        let replaced = try await replace.finish(size: Int64(data.count))
        #expect(replaced.generation != current.generation)
        #expect(try await raw.media("kept") == data)
    }

    @Test func lostAndFailedChunksAreResentFromTheServersOffset() async throws {
        let file = try GrowingFile("lost")
        defer { file.remove() }
        let granule = 256 * 1024
        let data = TestEnv.randomData(5 * granule + 1000, seed: 24)
        try file.append(data[0..<(2 * granule)])
        let upload = try await storage.reference().child("lost.bin").startStreamingUpload(
            fromFile: file.path, metadata: nil, ifGenerationMatch: nil)
        // Faults are global to the server: match only this bucket's sessions.
        let session = "/b/\(bucket)/o?uploadType=resumable"

        // The chunk lands but its answer is lost: the status query finds
        // the server one granule further than the client knew.
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "drop": true, "apply": true])
        try await upload.send(upTo: Int64(2 * granule))
        #expect(upload.acknowledged == Int64(2 * granule))

        // The chunk never arrives (connection dropped), then a 503.
        try file.append(data[(2 * granule)...])
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "drop": true])
        try await upload.send(upTo: Int64(3 * granule))
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "status": 503])
        try await upload.send(upTo: Int64(5 * granule))
        #expect(try await raw.resource("lost.bin") == nil, "no object before finish")

        // And the last chunk's answer is lost too: the finish learns from
        // the status query that the object exists.
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "drop": true, "apply": true])
        let stored = try await upload.finish(size: Int64(data.count))
        #expect(stored.size == Int64(data.count))
        #expect(try await raw.media("lost.bin") == data)

        let puts = try await raw.requests().filter {
            $0.method == "PUT" && $0.path.contains("/b/\(bucket)/")
        }
        // 6 chunks that landed, 2 that did not (drop, 503), and after each
        // of the 4 faults one status query.
        #expect(puts.count == 6 + 2 + 4, "\(puts.count) PUTs")
    }
}
