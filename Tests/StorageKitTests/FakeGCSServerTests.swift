import Foundation
import TestServerClient
import Testing
@testable import StorageKit
import Transport

/// StorageKit's calls against fake-gcs-server (the Go emulator many
/// projects test against; scripts/fake_gcs_server.sh), a server whose
/// reading of the JSON API is not ours. Each test uses a bucket of its own.
/// Where this server departs from Cloud Storage's documentation, the check
/// says what GCS does and what this server does instead.
@Suite struct FakeGCSServerTests {
    let raw: DirectGCS
    let storage: Storage

    init() async throws {
        let bucket = "sk-\(UUID().uuidString.prefix(8).lowercased())"
        raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS_SERVER", bucket: bucket)
        try await raw.post("/storage/v1/b", json: ["name": bucket])
        storage = try TestEnv.storage("BUCKETFS_TEST_FAKE_GCS_SERVER", bucket: bucket, chunk: 256 * 1024, threshold: 256 * 1024)
    }

    @Test func listPagesWithMaxResultsAndListAll() async throws {
        try await raw.seedListingExample()
        let pages = try await storage.reference().child("dir").pages(maxResults: 10)
        // GCS: at most maxResults entries of items and prefixes together
        // (https://cloud.google.com/storage/docs/json_api/v1/objects/list).
        // fake-gcs-server cuts items only and sends the prefixes at or
        // after the page token with them (ListObjectsWithOptionsPaginated,
        // fakestorage/object.go, v1.54.0), so only items are bounded here.
        for page in pages { #expect(page.items.count <= 10, "\(page.items.count) items") }
        let items = pages.flatMap { $0.items.map(\.name) }
        let prefixes = pages.flatMap { $0.prefixes.map(\.name) }
        #expect(pages.count == 3)
        #expect(items == (0..<25).map { "item-\(String(format: "%02d", $0))" })
        // GCS lists each prefix once across the pages. fake-gcs-server
        // sends every prefix at or after the page token (the next item's
        // name) on each page, so "sub" comes again on pages 2 and 3.
        #expect(Set(prefixes) == ["explicit", "sub"], "\(prefixes)")
        let all = try await storage.reference().child("dir").listAll()
        #expect(all.items.count == 25)
        #expect(all.prefixes.map(\.name).sorted() == ["explicit", "sub"])
    }

    /// A listing whose Task is cancelled (its directory handle released,
    /// or the reader interrupted) asks for no page after: the page
    /// requests run as Tasks of their own, which the cancellation must be
    /// passed on to.
    @Test func aCancelledListingEndsAtOnceAndAsksForNoFurtherPage() async throws {
        try await raw.seedListingExample()
        let listed = storage.reference().child("dir")
        let listing = Task { () -> (pages: Int, error: (any Error)?) in
            var pages = 0
            do {
                try await listed.listPages(after: nil, maxResults: 10) { _ in
                    pages += 1
                    withUnsafeCurrentTask { $0?.cancel() }
                }
            } catch {
                return (pages, error)
            }
            return (pages, nil)
        }
        let (pages, error) = await listing.value
        #expect(pages == 1, "no page handed over after the cancellation")
        #expect(error is CancellationError || (error as? TransportError).map { if case .cancelled = $0 { true } else { false } } == true,
            "\(String(describing: error))")
    }

    @Test func pipelinedPagesAreThePagesOneAfterAnother() async throws {
        try await raw.seedListingExample()
        try await expectPipelinedPagesMatchListPages(storage)
    }

    @Test func updateMetadataMergesCustomKeysAndChangesOnlyWhatWasGiven() async throws {
        try await raw.put("forest.jpg", Data("jpg".utf8), metadata: ["keep": "1", "drop": "2"], contentType: "image/jpeg")
        let ref = storage.reference().child("forest.jpg")
        let update = StorageMetadata()
        update.cacheControl = "public,max-age=300"
        update.removeCustomMetadata(forKey: "drop")
        update.customMetadata = ["added": "3"]
        let updated = try await ref.updateMetadata(update)
        #expect(updated.cacheControl == "public,max-age=300")
        let resource = try #require(try await raw.resource("forest.jpg"))
        #expect(resource["cacheControl"] as? String == "public,max-age=300")
        #expect(resource["contentType"] as? String == "image/jpeg", "untouched properties stay")
        let custom = resource["metadata"] as? [String: String] ?? [:]
        // GCS deletes a key patched to null
        // (https://cloud.google.com/storage/docs/json_api/v1/objects/patch);
        // fake-gcs-server decodes the metadata as map[string]string and
        // merges it, so the key stays with "" (patchObject,
        // fakestorage/object.go, v1.54.0).
        #expect(custom == ["keep": "1", "added": "3", "drop": ""], "\(custom)")
        #expect(updated.customMetadata?["keep"] == "1" && updated.customMetadata?["added"] == "3")
    }

    @Test func aResumableUploadInChunksArrivesIntact() async throws {
        let data = TestEnv.randomData((3 << 20) + 12_345, seed: 21)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("fgs-\(UUID().uuidString).bin")
        try data.write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        let ref = storage.reference().child("up/chunks.bin")
        let metadata = StorageMetadata()
        metadata.contentType = "application/x-chunks"
        metadata.customMetadata = ["k": "v"]
        let stored = try await ref.putFileAsync(from: file, metadata: metadata)
        #expect(stored.size == Int64(data.count))
        let resource = try #require(try await raw.resource("up/chunks.bin"))
        #expect(resource["size"] as? String == "\(data.count)")
        #expect(resource["contentType"] as? String == "application/x-chunks")
        #expect(resource["metadata"] as? [String: String] == ["k": "v"])
        let bytes = try await raw.media("up/chunks.bin")
        #expect(bytes == data, "\(bytes?.count ?? -1) bytes")
    }

    /// GCS answers a status check (`Content-Range: bytes */TOTAL`, no
    /// body) with 308 and the bytes it holds
    /// (https://cloud.google.com/storage/docs/performing-resumable-uploads#status-check).
    /// fake-gcs-server makes the object from the bytes received so far
    /// (uploadFileContent commits when the Content-Range has no byte range,
    /// fakestorage/upload.go, v1.54.0). A resume after a pause asks for the
    /// status, so here the object is cut at the pause: the upload must fail,
    /// not report success with a truncated object.
    @Test func aResumeThatFindsATruncatedObjectFails() async throws {
        let data = TestEnv.randomData(6 << 20, seed: 22)
        let ref = storage.reference().child("up/paused.bin")
        await #expect(throws: StorageError.self) {
            _ = try await TestEnv.pauseOnceAndResume(ref.putData(data), pauseAfter: 1 << 20)
        }
        let resource = try await raw.resource("up/paused.bin")
        let size = (resource?["size"] as? String).flatMap { Int($0) }
        #expect(size.map { $0 > 0 && $0 < data.count } ?? false, "fake-gcs-server made the object at the pause: \(resource ?? [:])")
    }
}
