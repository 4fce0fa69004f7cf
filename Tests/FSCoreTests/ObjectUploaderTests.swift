import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// The uploader alone: a plan in, the stored object or the store's error
/// out, with no file system around it.
@Suite struct ObjectUploaderTests {
    func plan(_ path: String, name: String = "plain.bin", size: Int64) -> ObjectUploader.Plan {
        ObjectUploader.Plan(
            name: name, localPath: path, options: PutOptions(customMetadata: ["k": "v"], ifGenerationMatch: 0), size: size,
            stream: nil, streamCarriesContent: false, reason: "test")
    }

    func localFile(_ content: Data) throws -> (String, String) {
        let directory = temporaryDirectory("uploader")
        let path = directory + "/content"
        try content.write(to: URL(fileURLWithPath: path))
        return (directory, path)
    }

    @Test func aTransientFailureIsTriedAgainWithinTheWindow() async throws {
        let content = bytes(20_000, seed: 4)
        let (directory, path) = try localFile(content)
        defer { removeDirectory(directory) }
        let store = InMemoryObjectStore()
        store.failNext(2, with: .unavailable("503"), operations: [.put])
        let uploader = ObjectUploader(store: store, parallel: ParallelUploads(store: store, options: MountOptions(), logger: .init(label: "t")), retryWindow: .seconds(30), logger: .init(label: "t"))
        let result = await uploader.upload(plan(path, size: Int64(content.count)))
        #expect(try result.get().size == Int64(content.count))
        #expect(store.requestCount(.put) == 3)
        #expect(try await Harness(store: store).download("plain.bin") == content)
    }

    @Test func aPermanentFailureIsReturnedAtOnce() async throws {
        let (directory, path) = try localFile(Data("x".utf8))
        defer { removeDirectory(directory) }
        let store = InMemoryObjectStore()
        store.failNext(1, with: .permissionDenied("403"), operations: [.put])
        let uploader = ObjectUploader(store: store, parallel: ParallelUploads(store: store, options: MountOptions(), logger: .init(label: "t")), retryWindow: .seconds(30), logger: .init(label: "t"))
        let result = await uploader.upload(plan(path, size: 1))
        guard case .failure(.permissionDenied) = result else {
            Issue.record("expected permissionDenied, got \(result)")
            return
        }
        #expect(store.requestCount(.put) == 1)
    }

    @Test func pastTheWindowTheLastTransientErrorIsReturned() async throws {
        let (directory, path) = try localFile(Data("y".utf8))
        defer { removeDirectory(directory) }
        let store = InMemoryObjectStore()
        store.setFaultHook { operation, _ in operation == .put ? .unavailable("down") : nil }
        let uploader = ObjectUploader(store: store, parallel: ParallelUploads(store: store, options: MountOptions(), logger: .init(label: "t")), retryWindow: .milliseconds(1200), logger: .init(label: "t"))
        let result = await uploader.upload(plan(path, size: 1))
        guard case .failure(.unavailable) = result else {
            Issue.record("expected unavailable, got \(result)")
            return
        }
        #expect(store.requestCount(.put) == 2, "one attempt, one more after 500 ms, none after the next wait (1 s), which would end past the window")
    }
}
