import Foundation
import Logging
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

private let MiB = 1 << 20

/// A sequential reader on a slow link: its refills go out as parts side by
/// side, and it still gets every byte once, in order, of one generation.
@Suite("parallel ranged reads")
struct ParallelReadTests {
    /// Every read's range and generation, and how many ran at once; each
    /// read's body starts `delay` after it is asked (a round trip), and a
    /// read touching an offset in `failing` fails once, before any byte.
    final class SlowLinkStore: ForwardingStore, Sendable {
        struct Log {
            var ranges: [Range<Int64>] = []
            var generations: Set<Int64> = []
            var inFlight = 0
            var peak = 0
            var failing: Set<Int64> = []
            /// When the store began to hand over the body's bytes up to
            /// each offset: no reader can have had them before that instant.
            /// (Taken after the handing over, a reader answered from the
            /// sink on another thread could come first: once in a serial run.)
            var delivered: [(upTo: Int64, at: ContinuousClock.Instant)] = []
        }
        let inner: InMemoryObjectStore
        let delay: Duration
        let log: Mutex<Log>

        /// Bytes per second of each read's body; nil: all at once.
        let rate: Int?

        init(inner: InMemoryObjectStore, delay: Duration, rate: Int? = nil, failing: Set<Int64> = []) {
            self.inner = inner
            self.delay = delay
            self.rate = rate
            self.log = Mutex(Log(failing: failing))
        }

        func read(
            _ name: String, generation: Int64, range: Range<Int64>, into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
        ) async throws(StoreError) -> Int64 {
            let fails = log.withLock { log -> Bool in
                log.ranges.append(range)
                log.generations.insert(generation)
                log.inFlight += 1
                log.peak = max(log.peak, log.inFlight)
                guard let hit = log.failing.first(where: { range.contains($0) }) else { return false }
                log.failing.remove(hit)
                return true
            }
            defer { log.withLock { $0.inFlight -= 1 } }
            try? await Task.sleep(for: delay)
            if fails { throw .unavailable("injected: connection reset") }
            guard let rate else { return try await inner.read(name, generation: generation, range: range, into: sink) }
            // The body in 256 KiB pieces, each when the link has carried it.
            let piece: Int64 = 256 << 10
            let started = ContinuousClock.now
            var at = range.lowerBound
            while at < range.upperBound {
                let next = min(range.upperBound, at + piece)
                log.withLock { $0.delivered.append((next, .now)) }
                _ = try await inner.read(name, generation: generation, range: at..<next, into: sink)
                at = next
                let due = started + .seconds(Double(at - range.lowerBound) / Double(rate))
                try? await Task.sleep(until: due, clock: .continuous)
            }
            return Int64(range.count)
        }
    }

    /// Every link counts as slow (no rate reaches infinity): parts of 4 MiB.
    let readAhead = ReadAhead.Configuration(
        initialWindow: 1 << 20, maxWindow: 8 << 20, singleStreamRate: .infinity,
        minPartSize: 4 << 20, maxPartSize: 4 << 20, maxParallelWindow: 32 << 20)

    private func reader(_ store: SlowLinkStore, _ info: ObjectInfo, name: String = "f") -> FileReader {
        FileReader(objectName: name, info: info, store: store, cache: nil, budget: ReadAheadBudget(limit: 256 << 20),
                   readAhead: readAhead, logger: Logger(label: "test"))
    }

    private func readInOrder(_ reader: FileReader, from start: Int = 0, to end: Int) async throws(StoreError) -> Data {
        var data = Data()
        var offset = start
        while offset < end {
            data.append(try await reader.read(offset: Int64(offset), size: 128 << 10))
            offset += 128 << 10
        }
        return data
    }

    @Test func aSlowLinkIsReadInPartsSideBySideEachByteOnce() async throws {
        let inner = InMemoryObjectStore()
        let content = bytes(96 * MiB + 12345, seed: 29)
        let info = inner.seed("f", content)
        let store = SlowLinkStore(inner: inner, delay: .milliseconds(5))
        let file = reader(store, info)
        #expect(try await readInOrder(file, to: content.count) == content)
        file.close()
        let log = store.log.withLock { $0 }
        let ranges = log.ranges.sorted { $0.lowerBound < $1.lowerBound }
        var end: Int64 = 0
        for range in ranges {
            #expect(range.lowerBound == end, "each byte asked once: \(ranges)")
            end = range.upperBound
        }
        #expect(end == Int64(content.count))
        let parts = ranges.filter { $0.lowerBound >= 16 << 20 }
        #expect(parts.allSatisfy { $0.count <= 4 * MiB }, "parts of 4 MiB: \(parts)")
        #expect(log.peak >= 4, "parts side by side: at most \(log.peak) at once")
        #expect(log.generations == [info.generation], "every part names the generation read first")
    }

    @Test func theMeasuredLinkTurnsAStreamIntoParts() async throws {
        let inner = InMemoryObjectStore()
        let content = bytes(64 * MiB, seed: 33)
        let info = inner.seed("f", content)
        // 10 ms round trip, 32 MiB/s per connection: far below one stream's
        // 256 MiB/s, so parts. Their size follows the measured first byte
        // (ReadAheadPartsTests tables it), which a loaded machine stretches
        // past 60 ms and so to 12 MiB parts: pinned to 8 MiB here.
        let store = SlowLinkStore(inner: inner, delay: .milliseconds(10), rate: 32 << 20)
        let file = FileReader(objectName: "f", info: info, store: store, cache: nil, budget: ReadAheadBudget(limit: 256 << 20),
                              readAhead: ReadAhead.Configuration(maxPartSize: 8 << 20), logger: Logger(label: "test"))
        #expect(try await readInOrder(file, to: content.count) == content)
        file.close()
        let log = store.log.withLock { $0 }
        // In the order asked: once a first block has shown the link (how
        // far the stream got before that depends on timing), every
        // request is a part of at most 8 MiB.
        let first = log.ranges.firstIndex { $0.lowerBound % (8 << 20) == 0 && $0.count == 8 * MiB }
        #expect(first != nil, "8 MiB parts once a request has shown the link: \(log.ranges)")
        if let first {
            #expect(log.ranges[first...].allSatisfy { $0.count <= 8 * MiB }, "\(log.ranges)")
        }
        #expect(log.peak >= 2, "side by side: at most \(log.peak) at once")
    }

    @Test func aSmallFirstReadIsAnsweredOnceItsBytesHaveComeNotTheWholeBlock() async throws {
        let inner = InMemoryObjectStore()
        let content = bytes(4 * MiB, seed: 34)
        let info = inner.seed("f", content)
        // 2 MiB/s: the first 1 MiB block takes half a second to come whole,
        // its first 256 KiB a few milliseconds.
        let store = SlowLinkStore(inner: inner, delay: .milliseconds(5), rate: 2 << 20)
        let file = reader(store, info)
        let first = try await file.read(offset: 0, size: 16 << 10)
        let firstAnswered = ContinuousClock.now
        #expect(first == content[0..<(16 << 10)])
        // The rest of the block, to its end: the block itself, whole.
        let rest = try await file.read(offset: 16 << 10, size: MiB - (16 << 10))
        let restAnswered = ContinuousClock.now
        #expect(rest == content[(16 << 10)..<MiB])
        file.close()
        // By the store's clock, not a time limit (a loaded machine stretches both).
        let delivered = store.log.withLock { $0.delivered }
        let whole = try #require(delivered.first { $0.upTo >= Int64(MiB) }?.at)
        #expect(firstAnswered < whole, "the first 16 KiB were answered before the block's last bytes came")
        #expect(restAnswered >= whole, "a read to the block's end waits for all of it")
    }

    @Test func aFailedPartIsAskedAgainAloneWhileLaterPartsStand() async throws {
        let inner = InMemoryObjectStore()
        let content = bytes(64 * MiB, seed: 30)
        let info = inner.seed("f", content)
        let failedAt = Int64(24 << 20) + 5
        let store = SlowLinkStore(inner: inner, delay: .milliseconds(5), failing: [failedAt])
        let file = reader(store, info)
        var data = try await readInOrder(file, to: 24 * MiB)
        // The reader whose bytes the failed part carried hears of it (the
        // store gave up: StorageKit has already resumed it within its
        // retry budget); the next read asks for that part's range again.
        await #expect(throws: StoreError.unavailable("injected: connection reset")) {
            try await file.read(offset: Int64(24 * MiB), size: 128 << 10)
        }
        data.append(try await readInOrder(file, from: 24 * MiB, to: content.count))
        #expect(data == content)
        file.close()
        let ranges = store.log.withLock { $0.ranges }
        let failed = ranges.first { $0.contains(failedAt) }!
        let askedTwice = ranges.filter { $0.overlaps(failed) }
        #expect(askedTwice.count == 2, "the failed part and its retry: \(ranges)")
        let others = ranges.filter { !$0.overlaps(failed) }.sorted { $0.lowerBound < $1.lowerBound }
        for (a, b) in zip(others, others.dropFirst()) {
            #expect(a.upperBound <= b.lowerBound, "no other byte asked twice: \(a) \(b)")
        }
    }

    @Test func aGenerationReplacedMidFileIsStaleForTheRestOfIt() async throws {
        let inner = InMemoryObjectStore()
        let content = bytes(48 * MiB, seed: 31)
        let info = inner.seed("f", content)
        let store = SlowLinkStore(inner: inner, delay: .milliseconds(2))
        let file = reader(store, info)
        _ = try await readInOrder(file, to: 8 * MiB)
        inner.seed("f", bytes(48 * MiB, seed: 32))
        // Parts already delivered may still serve a while; the first read
        // a later part carries fails as the generation gone.
        await #expect(throws: StoreError.self) {
            _ = try await readInOrder(file, from: 8 * MiB, to: content.count)
        }
        file.close()
        #expect(store.log.withLock { $0.generations } == [info.generation])
    }
}
