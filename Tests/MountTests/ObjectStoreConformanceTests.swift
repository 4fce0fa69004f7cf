import Foundation
import TestServerClient
import FSCore
import StorageKit
import Testing
import Transport
import TestSupport
import FSCoreTesting

/// The conformance suite the in-memory store passes (Tests/FSCoreTests),
/// run against the real store over the emulator, over the fake GCS server
/// and over fake-gcs-server (a server we did not write), so the fake the
/// core's unit tests rely on stays honest.
@Suite struct ObjectStoreConformanceTests {
    static func store(_ variable: String, bucket: String) throws -> StorageKitObjectStore {
        let url = try TestEnvironment.url(variable)
        let transport = HTTPTransport(configuration: TransportConfiguration(
            retry: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(100))))
        return StorageKitObjectStore(storage: Storage(
            bucket: bucket, configuration: StorageConfiguration(endpoint: url, transport: transport)))
    }

    @Test func storageKitStoreOverTheEmulator() async throws {
        // The emulator ignores maxResults, so page sizes are not checked there.
        let store = try Self.store("BUCKETFS_TEST_EMULATOR", bucket: "bucketfs-test")
        try await ObjectStoreConformance.run(
            store, prefix: "conformance-\(UUID().uuidString.prefix(8))/", options: .init(checksPageSize: false))
    }

    @Test func storageKitStoreOverTheFakeServer() async throws {
        let store = try Self.store("BUCKETFS_TEST_FAKE_GCS", bucket: "conformance-\(UUID().uuidString.prefix(8).lowercased())")
        try await ObjectStoreConformance.run(store, prefix: "c/")
    }

    @Test func storageKitStoreOverFakeGCSServer() async throws {
        let bucket = "conformance-\(UUID().uuidString.prefix(8).lowercased())"
        _ = try await DirectGCS.fakeGCSServer(newBucket: bucket)
        let store = try Self.store("BUCKETFS_TEST_FAKE_GCS_SERVER", bucket: bucket)
        // GCS: maxResults is the "maximum combined number of entries in
        // items[] and prefixes[]" of a page
        // (https://cloud.google.com/storage/docs/json_api/v1/objects/list).
        // fake-gcs-server cuts only items[] at maxResults and sends every
        // prefix at or after the page token with them
        // (ListObjectsWithOptionsPaginated, fakestorage/object.go, v1.54.0).
        //
        // GCS: a patch deletes a custom key sent as null and raises the
        // metageneration ("Each time you patch or update the … blob's
        // metadata, its metageneration is incremented";
        // https://cloud.google.com/storage/docs/json_api/v1/objects/patch,
        // https://cloud.google.com/storage/docs/metadata#generation-number).
        // fake-gcs-server decodes the patch's metadata as a Go
        // map[string]string, so null arrives as "" and is merged (the key
        // stays, empty), and keeps the metageneration (patchObject,
        // fakestorage/object.go; StreamingObject.patch,
        // internal/backend/object.go, v1.54.0).
        //
        // GCS refuses an upload whose crc32c is not its bytes' (400);
        // fake-gcs-server stores it with the CRC32C it computes.
        try await ObjectStoreConformance.run(
            store, prefix: "c/",
            options: .init(
                pageSizeCountsPrefixes: false, patchDeletesNullKeys: false, patchRaisesMetageneration: false,
                refusesWrongChecksums: false))
    }

    @Test func preconditionsOverTheFakeServer() async throws {
        let store = try Self.store("BUCKETFS_TEST_FAKE_GCS", bucket: "pre-\(UUID().uuidString.prefix(8).lowercased())")
        let created = try await Self.checkPutPrecondition(store)
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { try await store.delete("f", ifGenerationMatch: created.generation + 1) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        let staged = try Self.staged()
        defer { try? FileManager.default.removeItem(atPath: staged) }
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await store.startStreamingPut("f", from: staged, options: PutOptions(ifGenerationMatch: 0)) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await store.putInOneRequest("f", from: staged, options: PutOptions(ifGenerationMatch: 0)) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        // One request over a growing file (a media upload: nothing but the
        // content type to send): checked when it ends.
        let growing = try await store.startOneRequestStream("f", from: staged, options: PutOptions(ifGenerationMatch: 0))
        try await growing.send(upTo: 4)
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await growing.finish(size: 8) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        #expect(try await store.stat("f").generation == created.generation, "the object is intact")
        let late = try await store.startStreamingPut("g", from: staged, options: PutOptions(ifGenerationMatch: 0))
        _ = try await store.put("g", from: nil, options: PutOptions())
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await late.finish(size: 8) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        #expect(try await store.stat("g").size == 0, "the other writer's object is intact")
        try await store.delete("f", ifGenerationMatch: created.generation)
        await #expect(throws: StoreError.notFound("")) {
            do { _ = try await store.stat("f") } catch StoreError.notFound { throw StoreError.notFound("") }
        }
    }

    /// GCS checks `ifGenerationMatch` on every upload type, on delete and
    /// on rewrite (https://cloud.google.com/storage/docs/json_api/v1/objects/insert,
    /// .../objects/delete, .../objects/rewrite; "Request preconditions",
    /// https://cloud.google.com/storage/docs/request-preconditions).
    /// fake-gcs-server v1.54.0 checks it on multipart uploads only
    /// (wrapUploadPreconditions is called from multipartUpload alone,
    /// fakestorage/upload.go): a resumable session and a delete go ahead
    /// whatever the precondition (resumableUpload, uploadFileContent,
    /// deleteObject). The multipart check is the one bucketfs relies on
    /// for files up to 8 MiB (the mount's ESTALE test there,
    /// FakeGCSServerMountTests); the others are pinned to what this
    /// server does, so that a release that starts checking them shows up
    /// here and the checks can become the GCS ones.
    @Test func preconditionsOverFakeGCSServer() async throws {
        let bucket = "pre-\(UUID().uuidString.prefix(8).lowercased())"
        let gcs = try await DirectGCS.fakeGCSServer(newBucket: bucket)
        let store = try Self.store("BUCKETFS_TEST_FAKE_GCS_SERVER", bucket: bucket)
        let created = try await Self.checkPutPrecondition(store)
        let staged = try Self.staged()
        defer { try? FileManager.default.removeItem(atPath: staged) }
        // GCS: 412 at the start of the session. fake-gcs-server: the
        // session starts and its finish replaces the object.
        let late = try await store.startStreamingPut("f", from: staged, options: PutOptions(ifGenerationMatch: 0))
        let replaced = try await late.finish(size: 8)
        let bytes = try await gcs.download("f")
        #expect(replaced.generation != created.generation && bytes == Data("streamed".utf8))
        // GCS: 412. fake-gcs-server: deleted.
        try await store.delete("f", ifGenerationMatch: replaced.generation + 1)
        #expect(try await gcs.resource("f") == nil)
        // GCS: 412 at the end of a media upload. fake-gcs-server: stored
        // (simpleUpload, fakestorage/upload.go, does not call
        // wrapUploadPreconditions). The mount streams a new file with no
        // metadata to keep as one such request; its precondition is
        // checked on our fake server (preconditionsOverTheFakeServer).
        let first = try await store.put("m", from: nil, options: PutOptions(ifGenerationMatch: 0))
        let media = try await store.startOneRequestStream("m", from: staged, options: PutOptions(ifGenerationMatch: 0))
        let overwritten = try await media.finish(size: 8)
        let stored = try await gcs.download("m")
        #expect(overwritten.generation != first.generation && stored == Data("streamed".utf8))
        let uploads = try FakeGCSServerLog.requests(bucket: bucket).filter { $0.hasPrefix("POST /upload/") && $0.contains("name=m") }
        #expect(uploads.count == 1 && uploads[0].contains("uploadType=media"), "\(uploads)")
    }

    /// A put with ifGenerationMatch 0 makes "f"; a second one is
    /// preconditionFailed (a multipart upload: the object is empty).
    static func checkPutPrecondition(_ store: StorageKitObjectStore) async throws -> ObjectInfo {
        let created = try await store.put("f", from: nil, options: PutOptions(ifGenerationMatch: 0))
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await store.put("f", from: nil, options: PutOptions(ifGenerationMatch: 0)) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        #expect(try await store.stat("f").generation == created.generation, "the first writer's object is intact")
        return created
    }

    /// A local file of 8 bytes ("streamed") to upload from.
    static func staged() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("staged-\(UUID().uuidString)").path
        try Data("streamed".utf8).write(to: URL(fileURLWithPath: path))
        return path
    }
}
