import Foundation
import Logging
import Testing
import FSCoreTesting
@testable import FSCore

private let MiB = 1 << 20

@Suite("a cold read and the block cache's writer")
struct CacheBackpressureTests {
    /// A reader faster than the cache's writer (held here: a suspended
    /// queue) is held back once the writer is `readsWaitAbove` behind, so
    /// its read-ahead asks for no more than fits under `maxPendingBytes`,
    /// and every block ends up cached. Without the wait, 40 MiB read at
    /// memory speed would overrun the 16 MiB queue and leave blocks out.
    @Test func aReaderAheadOfTheWriterWaitsAndEveryBlockIsCached() async throws {
        let dir = temporaryDirectory()
        defer { removeDirectory(dir) }
        let writer = DispatchQueue(label: "held writes")
        writer.suspend()
        let cache = try BlockCache(directory: dir, capacity: 1 << 30, maxPendingBytes: 16 * MiB, readsWaitAbove: 2 * MiB,
                                   longestWait: .seconds(60), writer: writer)
        let store = InMemoryObjectStore()
        let content = bytes(40 * MiB, seed: 41)
        let info = store.seed("f", content)
        let file = FileReader(objectName: "f", info: info, store: store, cache: cache, budget: ReadAheadBudget(limit: 256 << 20),
                              readAhead: ReadAhead.Configuration(maxWindow: 4 << 20, fastLinkWindow: 4 << 20), logger: Logger(label: "test"))
        let reading = Task { () throws(StoreError) -> Data in
            var data = Data()
            while data.count < content.count {
                data.append(try await file.read(offset: Int64(data.count), size: 128 << 10))
            }
            return data
        }
        try await Task.sleep(for: .milliseconds(300))
        let heldAt = file.bufferedBytes
        writer.resume()
        let read = try await reading.value
        file.close()
        await cache.waitForPendingWrites()
        #expect(read == content)
        #expect(cache.blockCount == 40, "every block cached")
        #expect(heldAt <= 16 * Int64(MiB), "the read-ahead stopped while the writer was held: \(heldAt) bytes buffered")
        // Each block reads back from its slot as the bytes downloaded.
        for index in [0, 17, 39] {
            let key = BlockCache.Key(objectName: "f", generation: info.generation, index: Int64(index))
            #expect(cache.read(key, range: 0..<MiB, blockLength: MiB) == content[(index * MiB)..<((index + 1) * MiB)])
        }
    }
}
