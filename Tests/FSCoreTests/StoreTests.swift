import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

@Suite("InMemoryObjectStore")
struct StoreTests {
    @Test func passesTheConformanceSuite() async throws {
        let store = InMemoryObjectStore()
        try await ObjectStoreConformance.run(store, prefix: "conformance/")
        #expect(store.objectNames.isEmpty, "the suite cleans up after itself")
    }

    @Test func passesTheConformanceSuiteUnderAPrefixWithNeighbours() async throws {
        let store = InMemoryObjectStore(chunkSize: 1000)
        store.seed("conformance")
        store.seed("conformance0/x")
        store.seed("conformancf")
        try await ObjectStoreConformance.run(store, prefix: "conformance/")
        #expect(store.objectNames == ["conformance", "conformance0/x", "conformancf"])
    }

    @Test func conformanceFailuresAreDescriptive() async throws {
        /// A store that forgets to page.
        struct Broken: ForwardingStore {
            let inner = InMemoryObjectStore()
            func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage {
                try await inner.list(prefix: prefix, pageToken: nil, maxResults: 1000)
            }
        }
        let broken = Broken()
        await #expect(throws: ObjectStoreConformance.Failure.self) {
            try await ObjectStoreConformance.run(broken, prefix: "c/")
        }
        // Without the page-size expectations (the emulator) it passes.
        try await ObjectStoreConformance.run(broken, prefix: "c/", options: .init(checksPageSize: false))
    }

    @Test func pagesCountItemsAndPrefixesAndResumeAfterAPrefix() async throws {
        let store = InMemoryObjectStore()
        for name in ["a", "b/1", "b/2", "b/3", "c", "d/", "e//x", "f"] { store.seed(name) }
        var entries: [[String]] = []
        var token: String?
        repeat {
            let page = try await store.list(prefix: "", pageToken: token, maxResults: 2)
            entries.append(page.prefixes + page.items.map(\.name))
            token = page.nextPageToken
        } while token != nil
        #expect(entries == [["b/", "a"], ["d/", "c"], ["e/", "f"]])  // prefixes, then items, per page
        let root = try await store.list(prefix: "", pageToken: nil, maxResults: 1000)
        #expect(root.placeholderPrefixes == ["d/"])
        let e = try await store.list(prefix: "e/", pageToken: nil, maxResults: 1000)
        #expect(e.prefixes.isEmpty && e.items.isEmpty, "e// has an empty segment")
        let d = try await store.list(prefix: "d/", pageToken: nil, maxResults: 1000)
        #expect(d.items.isEmpty && d.prefixes.isEmpty && d.placeholderPrefixes.isEmpty)
        await #expect(throws: StoreError.self) { _ = try await store.list(prefix: "", pageToken: nil, maxResults: 0) }
    }

    @Test func preconditionsHold() async throws {
        let store = InMemoryObjectStore()
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let file = dir + "/f"
        try bytes(10).write(to: URL(fileURLWithPath: file))

        let v1 = try await store.put("x", from: file, options: PutOptions(ifGenerationMatch: 0))
        await #expect(throws: StoreError.preconditionFailed("x: generation \(v1.generation), expected 0")) {
            _ = try await store.put("x", from: file, options: PutOptions(ifGenerationMatch: 0))
        }
        let v2 = try await store.put("x", from: file, options: PutOptions(ifGenerationMatch: v1.generation))
        #expect(v2.generation > v1.generation)
        await expectPrecondition { _ = try await store.put("x", from: file, options: PutOptions(ifGenerationMatch: v1.generation)) }
        await expectPrecondition { try await store.delete("x", ifGenerationMatch: v1.generation) }
        await expectPrecondition { _ = try await store.copy("x", to: "y", ifSourceGenerationMatch: v1.generation, ifGenerationMatch: nil) }
        await expectPrecondition { _ = try await store.copy("x", to: "x", ifSourceGenerationMatch: nil, ifGenerationMatch: 0) }
        await expectPrecondition { _ = try await store.patch("x", MetadataPatch(), ifMetagenerationMatch: 7) }
        let patched = try await store.patch("x", MetadataPatch(), ifMetagenerationMatch: 1)
        #expect(patched.metageneration == 2 && patched.generation == v2.generation)
        _ = try await store.copy("x", to: "y", ifSourceGenerationMatch: v2.generation, ifGenerationMatch: 0)
        try await store.delete("x", ifGenerationMatch: v2.generation)
        #expect(store.objectNames == ["y"])
    }

    @Test func countsRequestsAndInjectsFaults() async throws {
        let store = InMemoryObjectStore()
        store.seed("a", bytes(100))
        store.failNext(2, with: .unavailable("503"), operations: [.stat])
        await #expect(throws: StoreError.unavailable("503")) { _ = try await store.stat("a") }
        _ = try await store.list(prefix: "", pageToken: nil, maxResults: 10)  // not a stat: unaffected
        await #expect(throws: StoreError.unavailable("503")) { _ = try await store.stat("a") }
        _ = try await store.stat("a")
        #expect(store.requestCount(.stat) == 3 && store.requestCount(.list) == 1 && store.totalRequests == 4)

        store.setFaultHook { operation, name in operation == .read && name == "a" ? .permissionDenied("nope") : nil }
        await #expect(throws: StoreError.permissionDenied("nope")) {
            _ = try await store.read("a", generation: 1, range: 0..<1) { _ in }
        }
        store.setFaultHook(nil)
        store.resetCounters()
        #expect(store.totalRequests == 0)
    }

    @Test func readsArePinnedToAGeneration() async throws {
        let store = InMemoryObjectStore()
        let v1 = store.seed("a", bytes(10, seed: 1))
        let v2 = store.seed("a", bytes(10, seed: 2))
        #expect(v2.generation > v1.generation)
        await #expect(throws: StoreError.notFound("a#\(v1.generation)")) {
            _ = try await store.read("a", generation: v1.generation, range: 0..<10) { _ in }
        }
    }

    @Test func streamingPutsCheckTheirPreconditionAtStartAndAtFinish() async throws {
        let store = InMemoryObjectStore()
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let file = dir + "/staged"
        try bytes(300_000).write(to: URL(fileURLWithPath: file))
        let v1 = store.seed("x", bytes(10, seed: 1))

        await expectPrecondition { _ = try await store.startStreamingPut("x", from: file, options: PutOptions(ifGenerationMatch: 0)) }
        let replaced = try await store.startStreamingPut("x", from: file, options: PutOptions(ifGenerationMatch: v1.generation))
        try await replaced.send(upTo: 256 * 1024)
        let v2 = store.seed("x", bytes(10, seed: 2))  // someone else writes meanwhile
        await expectPrecondition { _ = try await replaced.finish(size: 300_000) }
        #expect(try await store.stat("x").generation == v2.generation, "the other writer's object is intact")

        let created = try await store.startStreamingPut("y", from: file, options: PutOptions(ifGenerationMatch: 0))
        store.seed("y")
        await expectPrecondition { _ = try await created.finish(size: 300_000) }

        let current = try await store.startStreamingPut("x", from: file, options: PutOptions(ifGenerationMatch: v2.generation))
        let v3 = try await current.finish(size: 300_000)
        #expect(v3.size == 300_000 && v3.generation > v2.generation)
    }

    @Test func streamingPutsAreCountedFaultedAndValidated() async throws {
        let store = InMemoryObjectStore()
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let file = dir + "/staged"
        let data = bytes(600_000, seed: 3)
        try data.write(to: URL(fileURLWithPath: file))
        let upload = try await store.startStreamingPut("s", from: file, options: PutOptions())
        store.failNext(1, with: .unavailable("503"), operations: [.streamingSend])
        await #expect(throws: StoreError.unavailable("503")) { try await upload.send(upTo: 256 * 1024) }
        #expect(upload.acknowledged == 0, "a failed send acknowledges nothing")
        try await upload.send(upTo: 512 * 1024)
        #expect(upload.acknowledged == 512 * 1024)
        await #expect(throws: StoreError.self) { try await upload.send(upTo: 512 * 1024) }  // not above acknowledged
        await #expect(throws: StoreError.self) { try await upload.send(upTo: 768 * 1024) }  // past the end of the file
        await #expect(throws: StoreError.self) { _ = try await upload.finish(size: 100) }  // below acknowledged
        #expect(store.objectNames.isEmpty, "nothing exists before finish")
        let info = try await upload.finish(size: 600_000)
        #expect(info.size == 600_000)
        let stored = Mutex(Data())
        _ = try await store.read("s", generation: info.generation, range: 0..<600_000) { bytes in stored.withLock { $0.append(contentsOf: bytes) } }
        #expect(stored.withLock { $0 } == data)
        #expect(store.requestCount(.streamingStart) == 1 && store.requestCount(.streamingSend) == 2 && store.requestCount(.streamingFinish) == 1)
    }

    private func expectPrecondition(_ body: () async throws -> Void) async {
        do {
            try await body()
            Issue.record("expected preconditionFailed")
        } catch let error as StoreError {
            guard case .preconditionFailed = error else { Issue.record("got \(error)"); return }
        } catch {
            Issue.record("got \(error)")
        }
    }
}
