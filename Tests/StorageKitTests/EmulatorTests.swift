import Crypto
import Foundation
import TestServerClient
import Synchronization
import Testing
@testable import StorageKit

/// Every StorageKit call against gcp-storage-emulator on loopback, each
/// result checked through a separate plain HTTP request (`DirectGCS`).
@Suite struct EmulatorTests {
    let raw: DirectGCS
    let storage: Storage
    let prefix = TestEnv.uniquePrefix("sk")

    init() throws {
        raw = try DirectGCS.emulator()
        storage = try TestEnv.emulator()
    }

    static func md5Base64(_ data: Data) -> String { Data(Insecure.MD5.hash(data: data)).base64EncodedString() }

    @Test func putDataStoresBytesMetadataAndInferredType() async throws {
        let ref = storage.reference().child("\(prefix)/notes/hello.txt")
        let metadata = StorageMetadata()
        metadata.customMetadata = ["location": "Yosemite, CA, USA", "activity": "Hiking"]
        let stored = try await ref.putDataAsync(Data("hello, world".utf8), metadata: metadata)
        #expect(stored.size == 12)
        #expect(stored.fullPath == "\(prefix)/notes/hello.txt")
        #expect(stored.name == "hello.txt")
        #expect(stored.contentType == "text/plain")
        let resource = try #require(try await raw.resource(ref.fullPath))
        #expect(resource["contentType"] as? String == "text/plain")
        #expect((resource["metadata"] as? [String: String])?["location"] == "Yosemite, CA, USA")
        #expect(try await raw.media(ref.fullPath) == Data("hello, world".utf8))
    }

    @Test func emptyAndOneByteObjects() async throws {
        for data in [Data(), Data([0x2a])] {
            let ref = storage.reference().child("\(prefix)/size-\(data.count)")
            let stored = try await ref.putDataAsync(data)
            #expect(stored.size == Int64(data.count))
            #expect(try await raw.media(ref.fullPath) == data)
            #expect(try await ref.data(maxSize: 10) == data)
        }
    }

    @Test func observersAttachedAfterCreationSeeTheSuccessOfATinyUpload() async throws {
        let ref = storage.reference().child("\(prefix)/tiny")
        let task = ref.putData(Data("t".utf8))
        let events = Mutex<[StorageTaskStatus]>([])
        let done = AsyncStream<Void>.makeStream()
        task.observe(.resume) { _ in events.withLock { $0.append(.resume) } }
        task.observe(.success) { snapshot in
            events.withLock { $0.append(.success) }
            #expect(snapshot.metadata?.size == 1)
            #expect(snapshot.progress?.completedUnitCount == 1)
            done.continuation.finish()
        }
        task.observe(.failure) { snapshot in Issue.record("failed: \(String(describing: snapshot.error))"); done.continuation.finish() }
        for await _ in done.stream {}
        #expect(events.withLock { $0 } == [.resume, .success])
    }

    @Test func putFileOf100MiBReportsProgressAndArrivesIntact() async throws {
        let data = TestEnv.randomData(100 << 20, seed: 7)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-100m.bin")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let ref = storage.reference().child("\(prefix)/big.bin")
        let progress = Mutex<[Int64]>([])
        let stored = try await ref.putFileAsync(from: file) { p in
            if let p { progress.withLock { $0.append(p.completedUnitCount) } }
        }
        #expect(stored.size == Int64(data.count))
        let seen = progress.withLock { $0 }
        #expect(seen.count >= 6, "a 100 MiB upload reports progress along the way")
        #expect(seen == seen.sorted(), "progress never goes backwards")
        #expect(seen.last == Int64(data.count))
        let resource = try #require(try await raw.resource(ref.fullPath))
        #expect(resource["md5Hash"] as? String == Self.md5Base64(data))
        #expect(resource["contentType"] as? String == "application/octet-stream")
    }

    @Test func pauseAndResumeContinueFromTheAcknowledgedOffset() async throws {
        let storage = try TestEnv.emulator(chunk: 256 * 1024, threshold: 256 * 1024)
        let data = TestEnv.randomData(6 << 20, seed: 9)
        let ref = storage.reference().child("\(prefix)/paused.bin")
        let (pausedAt, statuses, stored) = try await TestEnv.pauseOnceAndResume(ref.putData(data), pauseAfter: 1 << 20)
        let offset = try #require(pausedAt, "the upload paused before it finished")
        #expect(offset > 0 && offset < Int64(data.count))
        #expect(offset % (256 * 1024) == 0, "paused at an acknowledged chunk boundary")
        #expect(stored.size == Int64(data.count))
        #expect(statuses == [.resume, .pause, .resume, .success])
        #expect(try await raw.media(ref.fullPath) == data)
    }

    @Test func cancelEndsInFailureAndLeavesNoObject() async throws {
        let storage = try TestEnv.emulator(chunk: 256 * 1024, threshold: 256 * 1024)
        let ref = storage.reference().child("\(prefix)/cancelled.bin")
        let task = ref.putData(TestEnv.randomData(8 << 20))
        task.observe(.progress) { _ in task.cancel() }
        do {
            _ = try await task.completion()
            Issue.record("a cancelled upload must fail")
        } catch StorageError.cancelled {}
        #expect(task.snapshot.status == .failure)
        #expect(try await raw.resource(ref.fullPath) == nil)
    }

    @Test func rangedReadsAndWholeDownloads() async throws {
        let data = TestEnv.randomData(3 << 20, seed: 3)
        let name = "\(prefix)/ranged.bin"
        try await raw.put(name, data)
        let ref = storage.reference().child(name)
        let metadata = try await ref.getMetadata()
        #expect(metadata.size == Int64(data.count))
        for range in [0..<1, 1000..<5096, Int64(data.count) - 10..<Int64(data.count), 1_048_576..<2_097_152] {
            let got = try await ref.data(range: range, generation: metadata.generation)
            #expect(got == data[Int(range.lowerBound)..<Int(range.upperBound)])
        }
        // A range running past the end is cut at the end.
        let tail = try await ref.data(range: Int64(data.count) - 5..<Int64(data.count) + 100, generation: nil)
        #expect(tail == data.suffix(5))
        #expect(try await ref.data(maxSize: Int64(data.count)) == data)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-dl.bin")
        defer { try? FileManager.default.removeItem(at: file) }
        try await ref.write(toFile: file)
        #expect(try Data(contentsOf: file) == data)
    }

    @Test func downloadsLargerThanMaxSizeFail() async throws {
        let name = "\(prefix)/toolarge"
        try await raw.put(name, Data(count: 5000))
        do {
            _ = try await storage.reference().child(name).data(maxSize: 4999)
            Issue.record("must fail")
        } catch StorageError.downloadSizeExceeded(let total, let max) {
            #expect(total == 5000)
            #expect(max == 4999)
        }
    }

    @Test func updateMetadataChangesOnlyWhatWasGivenAndDeletesByNil() async throws {
        let name = "\(prefix)/forest.jpg"
        try await raw.put(name, Data("jpg".utf8), metadata: ["keep": "1", "drop": "2"], contentType: "image/jpeg")
        let ref = storage.reference().child(name)
        let update = StorageMetadata()
        update.cacheControl = "public,max-age=300"
        update.contentLanguage = nil
        update.removeCustomMetadata(forKey: "drop")
        update.customMetadata = ["added": "3"]
        let updated = try await ref.updateMetadata(update)
        #expect(updated.cacheControl == "public,max-age=300")
        let resource = try #require(try await raw.resource(name))
        #expect(resource["cacheControl"] as? String == "public,max-age=300")
        #expect(resource["contentType"] as? String == "image/jpeg", "untouched properties stay")
        let custom = resource["metadata"] as? [String: Any] ?? [:]
        #expect(custom["keep"] as? String == "1")
        #expect(custom["added"] as? String == "3")
        #expect(custom["drop"] == nil || custom["drop"] is NSNull)

        let clear = StorageMetadata()
        clear.cacheControl = nil
        _ = try await ref.updateMetadata(clear)
        let after = try #require(try await raw.resource(name))
        #expect(after["cacheControl"] == nil || after["cacheControl"] is NSNull)
    }

    @Test func listOfTheSeedsExampleBucket() async throws {
        for name in ["correctPrefix/happyItem", "wrongPrefix//sadItem", "lonelyItem/"] {
            try await raw.put("\(prefix)/\(name)", Data("x".utf8))
        }
        let base = storage.reference().child(prefix)
        let root = try await base.listAll()
        #expect(root.prefixes.map(\.name).sorted() == ["correctPrefix", "lonelyItem", "wrongPrefix"])
        #expect(root.items.isEmpty)
        let correct = try await base.child("correctPrefix").listAll()
        #expect(correct.items.map(\.fullPath) == ["\(prefix)/correctPrefix/happyItem"])
        #expect(try await base.child("wrongPrefix").listAll().items.isEmpty)
        #expect(try await base.child("lonelyItem").listAll().items.isEmpty)
        let page = try await base.list(maxResults: 10)
        #expect(page.prefixes.count == 3)
    }

    @Test func deleteAndCopy() async throws {
        let name = "\(prefix)/original.txt"
        try await raw.put(name, Data("copy me".utf8), metadata: ["k": "v"], contentType: "text/plain")
        let source = storage.reference().child(name)
        let destination = storage.reference().child("\(prefix)/copy.txt")
        let copied = try await source.copy(to: destination)
        #expect(copied.fullPath == destination.fullPath)
        #expect(try await raw.media(destination.fullPath) == Data("copy me".utf8))
        let resource = try #require(try await raw.resource(destination.fullPath))
        #expect(resource["contentType"] as? String == "text/plain")
        #expect((resource["metadata"] as? [String: String])?["k"] == "v")
        try await source.delete()
        #expect(try await raw.resource(name) == nil)
        await #expect(throws: StorageError.self) { try await source.delete() }
    }

    @Test func missingObjectsAndBucketsHaveTheirOwnErrors() async throws {
        do {
            _ = try await storage.reference().child("\(prefix)/nothing").getMetadata()
            Issue.record("must fail")
        } catch StorageError.objectNotFound {}
        let missing = try TestEnv.storage("BUCKETFS_TEST_EMULATOR", bucket: "no-such-bucket-\(prefix.lowercased())")
        do {
            _ = try await missing.reference().list(maxResults: 1)
            Issue.record("must fail")
        } catch StorageError.bucketNotFound {}
    }

    @Test func uploadsToTheRootOrOverlongPathsAreRefused() async throws {
        await #expect(throws: StorageError.self) { try await storage.reference().putDataAsync(Data("x".utf8)) }
        let long = storage.reference().child(String(repeating: "a", count: 1025))
        await #expect(throws: StorageError.self) { try await long.putDataAsync(Data("x".utf8)) }
    }
}
