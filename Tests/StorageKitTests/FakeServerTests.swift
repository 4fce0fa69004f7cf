import Foundation
import TestServerClient
import Testing
@testable import StorageKit
import Transport

/// What the emulator cannot show (it ignores paging and preconditions),
/// against the tests' own loopback GCS server, which honours both and
/// injects faults on request.
@Suite struct FakeServerTests {
    let raw: DirectGCS
    let storage: Storage
    let bucket = "fake-\(UUID().uuidString.prefix(8).lowercased())"

    init() throws {
        raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket)
        storage = try TestEnv.fake(bucket: bucket)
    }

    func requestCount(containing fragment: String) async throws -> Int {
        try await raw.requests().filter { $0.path.contains(fragment) }.count
    }

    @Test func listAllFollowsEveryPage() async throws {
        try await raw.seedListingExample()
        let pages = try await storage.reference().child("dir").pages(maxResults: 10)
        let seen = pages.flatMap { $0.items.map(\.name) }
        #expect(pages.count >= 3)
        #expect(seen == (0..<25).map { "item-\(String(format: "%02d", $0))" })
        let all = try await storage.reference().child("dir").listAll()
        #expect(all.items.count == 25)
        #expect(all.prefixes.map(\.name).sorted() == ["explicit", "sub"])
        await #expect(throws: StorageError.self) { _ = try await storage.reference().list(maxResults: 1001) }
        await #expect(throws: StorageError.self) { _ = try await storage.reference().list(maxResults: 0) }
    }

    @Test func theShortestWaitForAFirstByteIsTheRoundTripEstimateOfThisInstance() async throws {
        #expect(storage.shortestRoundTrip == nil, "nothing measured before the first request")
        // curl times an upload's first byte sent, not its answer's.
        _ = try await storage.reference(objectName: "uploaded.txt").putDataAsync(Data("x".utf8))
        #expect(storage.shortestRoundTrip == nil, "an upload's answer is not timed")
        let absent = storage.reference(objectName: "absent-\(UUID().uuidString)")
        let started = ContinuousClock.now
        await #expect(throws: StorageError.self) { _ = try await absent.getMetadata() }
        let elapsed = ContinuousClock.now - started
        let first = try #require(storage.shortestRoundTrip, "a 404 is an answer, and timed")
        #expect(first > .zero && first <= elapsed, "\(first) of a request that took \(elapsed)")
        for _ in 0..<3 { _ = try? await absent.getMetadata() }
        #expect(try #require(storage.shortestRoundTrip) <= first, "the shortest so far")
        // Another instance over the same transport has measured nothing.
        #expect(try TestEnv.fake(bucket: bucket).shortestRoundTrip == nil)
    }

    @Test func pipelinedPagesAreThePagesOneAfterAnother() async throws {
        try await raw.seedListingExample()
        try await expectPipelinedPagesMatchListPages(storage)
    }

    // Checks semantics.md#shows-caching
    @Test func listingsAskOnlyForTheFieldsMetadataReadsAndLoseNone() async throws {
        let ref = storage.reference().child("meta/full.txt")
        let sent = StorageMetadata()
        sent.contentType = "text/plain"
        sent.cacheControl = "no-cache"
        sent.contentDisposition = "inline"
        sent.contentEncoding = "identity"
        sent.contentLanguage = "de"
        sent.customMetadata = ["colour": "blue", "goog-reserved-file-mtime": "1700000000"]
        _ = try await ref.putDataAsync(Data("hello".utf8), metadata: sent)
        let stored = try await ref.getMetadata()

        let delimited = try await storage.reference().child("meta").listPage(maxResults: 10, pageToken: nil)
        let flat = try await storage.reference().child("meta").listObjects(maxResults: 10, pageToken: nil)
        for listed in [try #require(delimited.itemMetadata.first), try #require(flat.items.first)] {
            #expect(listed.bucket == stored.bucket && listed.fullPath == stored.fullPath)
            #expect(listed.generation == stored.generation && listed.metageneration == stored.metageneration)
            #expect(listed.size == 5 && listed.size == stored.size)
            #expect(listed.timeCreated == stored.timeCreated && listed.updated == stored.updated && listed.updated != nil)
            #expect(listed.crc32c == stored.crc32c && listed.md5Hash == stored.md5Hash && listed.md5Hash != nil)
            #expect(listed.contentType == "text/plain" && listed.cacheControl == "no-cache")
            #expect(listed.contentDisposition == "inline" && listed.contentEncoding == "identity" && listed.contentLanguage == "de")
            #expect(listed.customMetadata == stored.customMetadata && listed.customMetadata?["colour"] == "blue")
            #expect(listed.isFile)
        }
        // This suite's bucket is its own: no other test lists it.
        let lists = try await raw.requests().filter {
            $0.method == "GET" && $0.path.hasSuffix("/storage/v1/b/\(bucket)/o")
        }
        // Two listings (delimited and flat); a listing the transport sent
        // again after a stall (the shared server is slow under a loaded
        // test run) has the same query.
        #expect(Set(lists.map(\.query)).count == 2, "\(lists.map(\.query))")
        for request in lists {
            let query = request.query.removingPercentEncoding ?? ""
            #expect(query.contains("fields=") && query.contains("items(bucket,name,generation"), "\(query)")
        }
    }

    @Test func generationPreconditionsGuardUploads() async throws {
        let ref = storage.reference().child("guarded.txt")
        let first = try await ref.putDataAsync(Data("one".utf8), ifGenerationMatch: 0)
        do {
            _ = try await ref.putDataAsync(Data("two".utf8), ifGenerationMatch: 0)
            Issue.record("an existing object must not be overwritten with ifGenerationMatch=0")
        } catch StorageError.preconditionFailed {}
        do {
            _ = try await ref.putDataAsync(Data("two".utf8), ifGenerationMatch: first.generation + 1000)
            Issue.record("a stale generation must fail")
        } catch StorageError.preconditionFailed {}
        #expect(try await raw.media("guarded.txt") == Data("one".utf8))
        let second = try await ref.putDataAsync(Data("two".utf8), ifGenerationMatch: first.generation)
        #expect(second.generation != first.generation)
        #expect(try await raw.media("guarded.txt") == Data("two".utf8))
    }

    @Test func resumableUploadsHonourPreconditionsToo() async throws {
        let storage = try TestEnv.storage("BUCKETFS_TEST_FAKE_GCS", bucket: bucket, chunk: 256 * 1024, threshold: 256 * 1024)
        let ref = storage.reference().child("resumable-guarded")
        try await raw.put("resumable-guarded", Data("keep".utf8))
        do {
            _ = try await ref.putDataAsync(TestEnv.randomData(1 << 20), ifGenerationMatch: 0)
            Issue.record("must fail")
        } catch StorageError.preconditionFailed {}
        #expect(try await raw.media("resumable-guarded") == Data("keep".utf8))
    }

    @Test func metagenerationAndDeletePreconditions() async throws {
        try await raw.put("meta", Data("m".utf8))
        let ref = storage.reference().child("meta")
        let current = try await ref.getMetadata()
        let change = StorageMetadata()
        change.contentLanguage = "en"
        do {
            _ = try await ref.updateMetadata(change, ifMetagenerationMatch: current.metageneration + 1)
            Issue.record("must fail")
        } catch StorageError.preconditionFailed {}
        let updated = try await ref.updateMetadata(change, ifMetagenerationMatch: current.metageneration)
        #expect(updated.contentLanguage == "en")
        do {
            try await ref.delete(ifGenerationMatch: current.generation + 1)
            Issue.record("must fail")
        } catch StorageError.preconditionFailed {}
        try await ref.delete(ifGenerationMatch: current.generation)
        #expect(try await raw.resource("meta") == nil)
    }

    @Test func serverErrorsAreRetriedThenSucceed() async throws {
        try await raw.put("flaky", Data("f".utf8))
        try await raw.post("/_faults", json: ["method": "GET", "path_contains": "/o/flaky", "status": 503, "count": 2])
        let metadata = try await storage.reference().child("flaky").getMetadata()
        #expect(metadata.size == 1)
        #expect(try await requestCount(containing: "/o/flaky") >= 3)
    }

    @Test func persistentServerErrorsEndInRetryLimitExceeded() async throws {
        try await raw.post("/_faults", json: ["method": "GET", "path_contains": "/o/down", "status": 503, "count": 20])
        do {
            _ = try await storage.reference().child("down").getMetadata()
            Issue.record("must fail")
        } catch StorageError.retryLimitExceeded {}
    }

    /// A resumable upload in 256 KiB chunks through a transport that allows
    /// 6 attempts, as Google's default policy does.
    func resumableStorage() throws -> Storage {
        let transport = HTTPTransport(configuration: TransportConfiguration(
            connectTimeout: .seconds(2),
            retry: RetryPolicy(maxAttempts: 6, initialBackoff: .milliseconds(10), maxBackoff: .milliseconds(100), totalTimeout: .seconds(30))))
        return Storage(bucket: bucket, configuration: StorageConfiguration(
            endpoint: try TestEnv.url("BUCKETFS_TEST_FAKE_GCS"), transport: transport,
            multipartThreshold: 256 << 10, uploadChunkSize: 256 << 10))
    }

    @Test func aResumableUploadSurvivesServerErrorsThenCutsInsideItsSession() async throws {
        let data = TestEnv.randomData(5 * (256 << 10) + 777, seed: 31)
        let session = "/b/\(bucket)/o?uploadType=resumable"
        // 3 × 503 and 2 connections closed unanswered, in a row: the chunk
        // and the status queries after it share one budget of 6 attempts.
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "status": 503, "count": 3])
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "drop": true, "count": 2])
        let stored = try await resumableStorage().reference().child("faulty.bin").putDataAsync(data)
        #expect(stored.size == Int64(data.count))
        #expect(try await raw.media("faulty.bin") == data)
    }

    @Test func progressRenewsTheRetryBudgetOfAResumableUpload() async throws {
        let data = TestEnv.randomData(6 * (256 << 10), seed: 32)
        let session = "/b/\(bucket)/o?uploadType=resumable"
        // Every chunk fails once, and so do the two status queries after
        // it: 18 failures in all, far more than the 6 attempts, but only 3
        // in a row before a query and the chunk get through. (503s only:
        // curl resends a bodiless query by itself after a dropped
        // connection, which would make the count of faults used vary.)
        for group in 0..<6 {
            try await raw.post("/_faults", json: [
                "method": "PUT", "path_contains": session, "status": 503, "count": 3, "after": group == 0 ? 0 : 2,
            ])
        }
        let stored = try await resumableStorage().reference().child("renewed.bin").putDataAsync(data)
        #expect(stored.size == Int64(data.count))
        #expect(try await raw.media("renewed.bin") == data)
    }

    @Test func aResumableUploadGivesUpOnceItsBudgetIsSpent() async throws {
        let session = "/b/\(bucket)/o?uploadType=resumable"
        try await raw.post("/_faults", json: ["method": "PUT", "path_contains": session, "status": 503, "count": 50])
        do {
            _ = try await resumableStorage().reference().child("never.bin").putDataAsync(TestEnv.randomData(600_000))
            Issue.record("must fail")
        } catch StorageError.retryLimitExceeded {}
        #expect(try await raw.resource("never.bin") == nil)
    }

    @Test func aDownloadCutMidwayResumesAndVerifies() async throws {
        let data = TestEnv.randomData(2 << 20, seed: 11)
        try await raw.put("cut.bin", data)
        try await raw.post("/_faults", json: ["method": "GET", "path_contains": "/o/cut.bin", "cut_after_bytes": 700_000, "count": 1])
        let got = try await storage.reference().child("cut.bin").data(maxSize: 4 << 20)
        #expect(got == data)
        let ranged = try await raw.requests().filter { $0.path.hasSuffix("/o/cut.bin") }
        #expect(ranged.count >= 2, "the download was resumed by a second request")
    }

    @Test func aRangedReadOfAReplacedGenerationFails() async throws {
        try await raw.put("replaced", Data("first".utf8))
        let ref = storage.reference().child("replaced")
        let old = try await ref.getMetadata()
        try await raw.put("replaced", Data("second".utf8))
        do {
            _ = try await ref.data(range: 0..<3, generation: old.generation)
            Issue.record("must fail")
        } catch StorageError.objectNotFound {}
    }

    @Test func copyLoopsOnTheRewriteToken() async throws {
        let data = TestEnv.randomData(3 << 20, seed: 5)
        try await raw.put("src.bin", data, metadata: ["a": "b"], contentType: "application/x-test")
        let copied = try await storage.reference().child("src.bin").copy(to: storage.reference().child("dst.bin"))
        #expect(copied.size == Int64(data.count))
        #expect(copied.contentType == "application/x-test")
        #expect(copied.customMetadata?["a"] == "b")
        #expect(try await raw.media("dst.bin") == data)
        #expect(try await requestCount(containing: "/rewriteTo/") >= 2)
    }

    @Test func aMissingBucketIsBucketNotFound() async throws {
        let missing = try TestEnv.fake(bucket: "missing-\(bucket)")
        do {
            _ = try await missing.reference().listAll()
            Issue.record("must fail")
        } catch StorageError.bucketNotFound {}
    }
}
