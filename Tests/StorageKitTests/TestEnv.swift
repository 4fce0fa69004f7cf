import Foundation
import Synchronization
import Testing
import Transport
@testable import StorageKit
import TestServerClient
import TestSupport

/// The loopback servers `scripts/test.sh` starts. A missing one fails the
/// test with instructions; nothing is skipped.
enum TestEnv {
    struct NotConfigured: Error, CustomStringConvertible {
        let variable: String
        var description: String { "\(variable) is not set: run the tests with scripts/test.sh" }
    }

    static func url(_ variable: String) throws -> URL { try TestEnvironment.url(variable) }

    static let emulatorBucket = DirectGCS.emulatorBucket

    /// Fast retries: the schedule is unit-tested, the suites need speed.
    static let transport = HTTPTransport(configuration: TransportConfiguration(
        connectTimeout: .seconds(2), stallTimeout: .seconds(10),
        retry: RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(200), totalTimeout: .seconds(30))))

    static func storage(_ variable: String, bucket: String, chunk: Int64 = 16 << 20, threshold: Int64 = 8 << 20) throws -> Storage {
        Storage(bucket: bucket, configuration: StorageConfiguration(
            endpoint: try url(variable), transport: transport, multipartThreshold: threshold, uploadChunkSize: chunk))
    }

    static func emulator(chunk: Int64 = 16 << 20, threshold: Int64 = 8 << 20) throws -> Storage {
        try storage("BUCKETFS_TEST_EMULATOR", bucket: emulatorBucket, chunk: chunk, threshold: threshold)
    }

    static func fake(bucket: String = "fake") throws -> Storage {
        try storage("BUCKETFS_TEST_FAKE_GCS", bucket: bucket)
    }

    /// Runs `task` to its end, pausing it once when `pauseAfter` bytes are
    /// acknowledged and resuming it once the pause is seen. Returns the
    /// offset the pause reported (nil if the upload finished first), every
    /// status in order, and the stored object.
    static func pauseOnceAndResume(
        _ task: StorageUploadTask, pauseAfter: Int64
    ) async throws -> (pausedAt: Int64?, statuses: [StorageTaskStatus], stored: StorageMetadata) {
        let statuses = Mutex<[StorageTaskStatus]>([])
        let pausedAt = Mutex<Int64?>(nil)
        for status in [StorageTaskStatus.resume, .pause, .success, .failure] {
            task.observe(status) { snapshot in
                statuses.withLock { $0.append(status) }
                if status == .pause { pausedAt.withLock { $0 = snapshot.progress?.completedUnitCount } }
            }
        }
        let pausedOnce = Mutex(false)
        task.observe(.progress) { snapshot in
            guard (snapshot.progress?.completedUnitCount ?? 0) >= pauseAfter else { return }
            if pausedOnce.withLock({ done in defer { done = true }; return !done }) { task.pause() }
        }
        while statuses.withLock({ !$0.contains(.pause) && !$0.contains(.success) && !$0.contains(.failure) }) {
            try await Task.sleep(for: .milliseconds(10))
        }
        task.resume()
        let stored = try await task.completion()
        return (pausedAt.withLock { $0 }, statuses.withLock { $0 }, stored)
    }

    /// A fresh prefix per test, so parallel tests never see each other.
    static func uniquePrefix(_ label: String) -> String { "\(label)-\(UUID().uuidString.prefix(8))" }

    /// Deterministic bytes for `seed`: SplitMix64's stream.
    static func randomData(_ count: Int, seed: UInt64 = 42) -> Data {
        var generator = SplitMix64(seed: seed)
        return GeneratedBytes.random(count, using: &generator)
    }
}

extension DirectGCS {
    /// The listing example: dir/item-00 … dir/item-24, dir/sub/inner and
    /// the placeholder dir/explicit/.
    func seedListingExample() async throws {
        for i in 0..<25 { try await put("dir/item-\(String(format: "%02d", i))", Data([UInt8(i)])) }
        try await put("dir/sub/inner", Data("i".utf8))
        try await put("dir/explicit/", Data())
    }
}

/// `listPages` (each page requested before the previous one is parsed)
/// gives exactly the pages that `list` gives one after another, also when
/// an item's custom metadata has a key named like the page token: its
/// value must never be taken for the next page's.
func expectPipelinedPagesMatchListPages(_ storage: Storage) async throws {
    let tricky = StorageMetadata()
    tricky.customMetadata = ["nextPageToken": "not-a-token"]
    _ = try await storage.reference().child("dir/item-07b").putDataAsync(Data("t".utf8), metadata: tricky)
    let listed = storage.reference().child("dir")
    let stepwise = try await listed.pages(maxResults: 4)
    var pipelined: [StorageListResult] = []
    try await listed.listPages(after: nil, maxResults: 4) { pipelined.append($0) }
    #expect(stepwise.count >= 5)
    #expect(pipelined.map { $0.items.map(\.name) } == stepwise.map { $0.items.map(\.name) })
    #expect(pipelined.map { $0.prefixes.map(\.name) } == stepwise.map { $0.prefixes.map(\.name) })
    #expect(pipelined.map(\.pageToken) == stepwise.map(\.pageToken))
    #expect(pipelined.flatMap(\.items).contains { $0.name == "item-07b" })
    // From a page token on: the rest of the pages.
    let second = try #require(stepwise.first?.pageToken)
    var rest: [StorageListResult] = []
    try await listed.listPages(after: second, maxResults: 4) { rest.append($0) }
    #expect(rest.map { $0.items.map(\.name) } == stepwise.dropFirst().map { $0.items.map(\.name) })
}

extension StorageReference {
    /// Every page of this listing, `maxResults` at a time, in order (at
    /// most `limit` pages, so a server that never ends cannot hang a test).
    func pages(maxResults: Int64, limit: Int = 20) async throws -> [StorageListResult] {
        var pages: [StorageListResult] = []
        var token: String?
        repeat {
            let page: StorageListResult
            if let token {
                page = try await list(maxResults: maxResults, pageToken: token)
            } else {
                page = try await list(maxResults: maxResults)
            }
            pages.append(page)
            token = page.pageToken
        } while token != nil && pages.count < limit
        return pages
    }
}
