import Dispatch
import Foundation
import TestServerClient
import Synchronization
import Testing
@testable import StorageKit

/// The completion-handler forms against the emulator: each handler runs
/// once, on `storage.callbackQueue`, with NSError-shaped errors; results
/// are checked through the JSON API.
@Suite struct CompletionHandlerTests {
    let raw: DirectGCS
    let storage: Storage
    let prefix = TestEnv.uniquePrefix("cb")

    init() throws {
        raw = try DirectGCS.emulator()
        storage = try TestEnv.emulator()
    }

    /// Waits for `count` completions of the handlers made by `body`.
    static func completions<T: Sendable>(
        _ count: Int = 1, _ body: (@escaping @Sendable (T) -> Void) -> Void
    ) async -> [T] {
        let results = Mutex<[T]>([])
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            body { value in
                let done = results.withLock { r in r.append(value); return r.count == count }
                if done { continuation.resume() }
            }
        }
        return results.withLock { $0 }
    }

    struct Outcome<T: Sendable>: Sendable {
        let value: T?
        let error: NSError?
        let label: String?
    }

    static let queueKey = DispatchSpecificKey<String>()

    /// The name of the test queue the caller runs on, if it does.
    static func queueLabel() -> String? { DispatchQueue.getSpecific(key: queueKey) }

    @Test func everyOperationCompletesOnTheCallbackQueue() async throws {
        let queue = DispatchQueue(label: "completion-test-queue")
        queue.setSpecific(key: Self.queueKey, value: "completion-test-queue")
        storage.callbackQueue = queue
        let ref = storage.reference().child("\(prefix)/file.txt")
        let data = Data("completion handlers".utf8)

        let put = await Self.completions { (done: @escaping @Sendable (Outcome<StorageMetadata>) -> Void) in
            let task = ref.putData(data, metadata: nil) { metadata, error in
                done(Outcome(value: metadata, error: error as? NSError, label: Self.queueLabel()))
            }
            #expect(task.reference == ref)
        }
        #expect(put.count == 1)
        #expect(put[0].value?.size == Int64(data.count))
        #expect(put[0].label == "completion-test-queue")
        #expect(try await raw.media(ref.fullPath) == data)

        let got = await Self.completions { (done: @escaping @Sendable (Outcome<StorageMetadata>) -> Void) in
            ref.getMetadata { metadata, error in done(Outcome(value: metadata, error: error as? NSError, label: Self.queueLabel())) }
        }
        #expect(got[0].value?.contentType == "text/plain")
        #expect(got[0].label == "completion-test-queue")

        let update = StorageMetadata()
        update.cacheControl = "no-cache"
        update.customMetadata = ["k": "v"]
        let updated = await Self.completions { (done: @escaping @Sendable (Outcome<StorageMetadata>) -> Void) in
            ref.updateMetadata(update) { metadata, error in done(Outcome(value: metadata, error: error as? NSError, label: Self.queueLabel())) }
        }
        #expect(updated[0].value?.cacheControl == "no-cache")
        let resource = try #require(try await raw.resource(ref.fullPath))
        #expect(resource["cacheControl"] as? String == "no-cache")
        #expect((resource["metadata"] as? [String: String])?["k"] == "v")

        let downloaded = await Self.completions { (done: @escaping @Sendable (Outcome<Data>) -> Void) in
            ref.getData(maxSize: 1 << 20) { data, error in done(Outcome(value: data, error: error as? NSError, label: Self.queueLabel())) }
        }
        #expect(downloaded[0].value == data)
        let tooSmall = await Self.completions { (done: @escaping @Sendable (Outcome<Data>) -> Void) in
            ref.data(maxSize: 3) { data, error in done(Outcome(value: data, error: error as? NSError, label: Self.queueLabel())) }
        }
        #expect(tooSmall[0].value == nil)
        #expect(tooSmall[0].error?.code == StorageErrorCode.downloadSizeExceeded.rawValue)

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-downloaded.txt")
        defer { try? FileManager.default.removeItem(at: file) }
        let written = await Self.completions { (done: @escaping @Sendable (Outcome<URL>) -> Void) in
            ref.write(toFile: file) { url, error in done(Outcome(value: url, error: error as? NSError, label: Self.queueLabel())) }
        }
        #expect(written[0].value == file)
        #expect(try Data(contentsOf: file) == data)

        let url = await Self.completions { (done: @escaping @Sendable (Outcome<URL>) -> Void) in
            ref.downloadURL { url, error in done(Outcome(value: url, error: error as? NSError, label: Self.queueLabel())) }
        }
        let token = try #require(try await raw.resource(ref.fullPath).flatMap { ($0["metadata"] as? [String: String])?[StorageReference.downloadTokensKey] })
        #expect(url[0].value?.query == "alt=media&token=\(token)")

        let deleted = await Self.completions { (done: @escaping @Sendable (Outcome<Bool>) -> Void) in
            ref.delete { error in done(Outcome(value: error == nil, error: error as? NSError, label: Self.queueLabel())) }
        }
        #expect(deleted[0].value == true)
        #expect(deleted[0].label == "completion-test-queue")
        #expect(try await raw.resource(ref.fullPath) == nil)
    }

    @Test func listingCompletions() async throws {
        let base = storage.reference().child("\(prefix)/list")
        for name in ["a.txt", "b.txt", "sub/c.txt"] {
            try await raw.put("\(base.fullPath)/\(name)", Data(name.utf8))
        }
        let all = await Self.completions { (done: @escaping @Sendable (Outcome<StorageListResult>) -> Void) in
            base.listAll { result, error in done(Outcome(value: result, error: error as? NSError, label: nil)) }
        }
        #expect(all[0].value?.items.map(\.name) == ["a.txt", "b.txt"])
        #expect(all[0].value?.prefixes.map(\.name) == ["sub"])
        let page = await Self.completions { (done: @escaping @Sendable (Outcome<StorageListResult>) -> Void) in
            base.list(maxResults: 10) { result, error in done(Outcome(value: result, error: error as? NSError, label: nil)) }
        }
        #expect(page[0].value?.items.count == 2)
        let invalid = await Self.completions { (done: @escaping @Sendable (Outcome<StorageListResult>) -> Void) in
            base.list(maxResults: 0, pageToken: "x") { result, error in done(Outcome(value: result, error: error as? NSError, label: nil)) }
        }
        #expect(invalid[0].value == nil)
        #expect(invalid[0].error?.code == StorageErrorCode.invalidArgument.rawValue)
    }

    @Test func errorsAreNSErrorsWithFirebaseCodes() async throws {
        let missing = storage.reference().child("\(prefix)/missing.txt")
        let outcome = await Self.completions { (done: @escaping @Sendable (Outcome<StorageMetadata>) -> Void) in
            missing.getMetadata { metadata, error in done(Outcome(value: metadata, error: error as? NSError, label: nil)) }
        }
        let error = try #require(outcome[0].error, "the error is an NSError instance, so `as? NSError` works on Linux")
        #expect(error.domain == "FIRStorageErrorDomain")
        #expect(StorageErrorCode(rawValue: error.code) == .objectNotFound)
        #expect(StorageError(error).code == .objectNotFound)
        #expect(outcome[0].value == nil)
    }

    /// `.main` can be set; the test runner's async main serves the main
    /// queue. (On Linux a process in `dispatchMain()` drains the main queue
    /// from a worker thread, so the check is for the queue, not the thread.)
    @Test func theMainQueueCanBeChosen() async throws {
        let storage = try TestEnv.emulator()
        storage.callbackQueue = .main
        DispatchQueue.main.setSpecific(key: Self.queueKey, value: "main")
        let ref = storage.reference().child("\(prefix)/main.txt")
        try await raw.put(ref.fullPath, Data("m".utf8))
        let labels = await Self.completions { (done: @escaping @Sendable (String?) -> Void) in
            ref.getMetadata { _, _ in done(Self.queueLabel()) }
        }
        #expect(labels == ["main"])
    }

    @Test func theDefaultQueueIsNotTheMainThread() async throws {
        let storage = try TestEnv.emulator()
        let ref = storage.reference().child("\(prefix)/default.txt")
        try await raw.put(ref.fullPath, Data("d".utf8))
        DispatchQueue.main.setSpecific(key: Self.queueKey, value: "main")
        let labels = await Self.completions { (done: @escaping @Sendable (String?) -> Void) in
            ref.getMetadata { _, _ in done(Self.queueLabel()) }
        }
        #expect(labels == [nil], "not the main queue")
    }

    /// An upload that fails at once (root reference) still completes once,
    /// with the error, and its failure observers see the same NSError.
    @Test func aFailedUploadCompletesWithTheError() async throws {
        let outcome = await Self.completions { (done: @escaping @Sendable (Outcome<StorageMetadata>) -> Void) in
            let task = storage.reference().putData(Data("x".utf8), metadata: nil) { metadata, error in
                done(Outcome(value: metadata, error: error as? NSError, label: nil))
            }
            task.observe(.failure) { snapshot in
                #expect((snapshot.error as? NSError)?.code == StorageErrorCode.invalidArgument.rawValue)
            }
        }
        #expect(outcome.count == 1)
        #expect(outcome[0].error?.code == StorageErrorCode.invalidArgument.rawValue)
    }

    /// The seeds pause and resume in one breath: the paused run is still
    /// unwinding when the next starts, and the upload must go on (it used
    /// to fail with the paused run's cancellation).
    @Test func pauseThenResumeAtOnceStillUploads() async throws {
        let storage = try TestEnv.emulator(chunk: 256 * 1024, threshold: 256 * 1024)
        let data = TestEnv.randomData(3 << 20, seed: 11)
        let ref = storage.reference().child("\(prefix)/pause-resume.bin")
        let task = ref.putData(data)
        task.pause()
        task.resume()
        let stored = try await task.completion()
        #expect(stored.size == Int64(data.count))
        #expect(try await raw.media(ref.fullPath) == data)
    }
}
