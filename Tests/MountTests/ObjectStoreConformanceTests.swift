import Foundation
import FSCore
import StorageKit
import Testing
import Transport

/// The conformance suite the in-memory store passes (Tests/FSCoreTests),
/// run against the real store over the emulator and over the fake GCS
/// server, so the fake the core's unit tests rely on stays honest.
@Suite struct ObjectStoreConformanceTests {
    static func store(_ variable: String, bucket: String) throws -> StorageKitObjectStore {
        guard let value = ProcessInfo.processInfo.environment[variable], let url = URL(string: value) else {
            throw ConformanceSetupError(description: "\(variable) is not set: run the tests with scripts/test.sh")
        }
        let transport = HTTPTransport(configuration: TransportConfiguration(
            retry: RetryPolicy(maxAttempts: 3, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(100))))
        return StorageKitObjectStore(storage: Storage(
            bucket: bucket, configuration: StorageConfiguration(endpoint: url, transport: transport)))
    }

    struct ConformanceSetupError: Error, CustomStringConvertible { let description: String }

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

    @Test func preconditionsOverTheFakeServer() async throws {
        let store = try Self.store("BUCKETFS_TEST_FAKE_GCS", bucket: "pre-\(UUID().uuidString.prefix(8).lowercased())")
        let created = try await store.put("f", from: nil, options: PutOptions(ifGenerationMatch: 0))
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await store.put("f", from: nil, options: PutOptions(ifGenerationMatch: 0)) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { try await store.delete("f", ifGenerationMatch: created.generation + 1) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
        let staged = FileManager.default.temporaryDirectory.appendingPathComponent("staged-\(UUID().uuidString)").path
        try Data("streamed".utf8).write(to: URL(fileURLWithPath: staged))
        defer { try? FileManager.default.removeItem(atPath: staged) }
        await #expect(throws: StoreError.preconditionFailed("")) {
            do { _ = try await store.startStreamingPut("f", from: staged, options: PutOptions(ifGenerationMatch: 0)) }
            catch StoreError.preconditionFailed { throw StoreError.preconditionFailed("") }
        }
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
}
