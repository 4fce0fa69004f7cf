import Foundation
import Testing
@testable import FSCore

private let MiB: Int64 = 1 << 20
private let KiB = 1 << 10

@Suite("read-ahead state machine")
struct ReadAheadTests {
    let configuration = ReadAhead.Configuration(initialWindow: MiB, maxWindow: 8 * MiB, blockSize: MiB, seekTolerance: 2 * MiB)

    private func prefetches(_ actions: [ReadAhead.Action]) -> [Range<Int64>] {
        actions.compactMap { if case .prefetch(let r) = $0 { return r } else { return nil } }
    }

    // Checks semantics.md#shows-reads
    @Test func sequentialReadsGrowTheWindowUpToTheCap() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        var fetched: [Range<Int64>] = []
        var windows: [Int64] = []
        var offset: Int64 = 0
        while offset < 100 * MiB {
            let actions = machine.read(offset: offset, size: 128 * KiB)
            #expect(!actions.contains(.discardAll))
            let parts = prefetches(actions)
            if !parts.isEmpty { windows.append(machine.window) }
            #expect(parts.count <= 1, "a refill is one request")
            for part in parts {
                #expect(part.lowerBound % MiB == 0)
                #expect(part.lowerBound == (fetched.last?.upperBound ?? 0), "contiguous")
                fetched.append(part)
            }
            #expect(fetched.last!.upperBound >= min(100 * MiB, offset + 128 * 1024), "the read is covered")
            #expect(machine.frontier - offset <= 8 * MiB + 2 * MiB, "never far beyond the max window")
            offset += 128 * 1024
        }
        #expect(windows.prefix(4) == [2 * MiB, 4 * MiB, 8 * MiB, 8 * MiB], "doubles from the initial window, then capped")
        #expect(fetched.last!.upperBound == 100 * MiB, "up to the end, never past it")
        var fresh = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        let refills = prefetches(fresh.read(offset: 0, size: 1))
        #expect(refills == [0..<(2 * MiB)], "the first read fetches the initial window past itself")
    }

    @Test func aRefillIsOneRequestHoweverLargeTheWindow() {
        var machine = ReadAhead(configuration: ReadAhead.Configuration(initialWindow: 32 * MiB, maxWindow: 64 * MiB), objectSize: 1 << 40)
        // 32 MiB past a 128 KiB read: 33 MiB, one GET.
        #expect(prefetches(machine.read(offset: 0, size: 128 * KiB)) == [0..<(33 * MiB)])
    }

    /// The stream's lifecycle, as a table: each row a read and the phase,
    /// window and requests it leads to.
    @Test func theStreamsLifecycle() {
        struct Row {
            let offset: Int64, size: Int
            let phase: ReadAhead.Phase, window: Int64, requests: [Range<Int64>], dropsAll: Bool
        }
        let rows: [Row] = [
            // A first read at 0 opens the stream: the initial window past it, then doubled.
            Row(offset: 0, size: 128 * KiB, phase: .streaming, window: 2 * MiB, requests: [0..<(2 * MiB)], dropsAll: false),
            // Reads inside what is on its way ask for nothing...
            Row(offset: 128 * 1024, size: 128 * KiB, phase: .streaming, window: 2 * MiB, requests: [], dropsAll: false),
            // ...until the reader is within half a window of the frontier: the next, larger GET.
            Row(offset: 1 * MiB, size: 128 * KiB, phase: .streaming, window: 4 * MiB, requests: [(2 * MiB)..<(4 * MiB)], dropsAll: false),
            Row(offset: 2 * MiB + 896 * 1024, size: 128 * KiB, phase: .streaming, window: 8 * MiB, requests: [(4 * MiB)..<(7 * MiB)], dropsAll: false),
            // A jump ends the stream: buffers and requests dropped, nothing prefetched.
            Row(offset: 50 * MiB, size: 4 * KiB, phase: .random, window: 0, requests: [], dropsAll: true),
            Row(offset: 20 * MiB, size: 4 * KiB, phase: .random, window: 0, requests: [], dropsAll: false),
            // Reading on from where the last read ended starts a new stream at the initial window.
            Row(offset: 20 * MiB + 4 * 1024, size: 4 * KiB, phase: .streaming, window: 2 * MiB, requests: [(20 * MiB)..<(22 * MiB)], dropsAll: false),
        ]
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        #expect(machine.phase == .starting)
        for (index, row) in rows.enumerated() {
            let actions = machine.read(offset: row.offset, size: row.size)
            #expect(machine.phase == row.phase, "row \(index)")
            #expect(machine.window == row.window, "row \(index)")
            #expect(prefetches(actions) == row.requests, "row \(index)")
            #expect(actions.contains(.discardAll) == row.dropsAll, "row \(index)")
        }
    }

    @Test func aSequentialReadOf64MiBIsAHandfulOfRequests() {
        // The kernel's 1 MiB reads (max_pages 256) of a 64 MiB object, with the mount's defaults.
        var machine = ReadAhead(configuration: ReadAhead.Configuration(), objectSize: 64 * MiB)
        var requests: [Range<Int64>] = []
        for offset in stride(from: Int64(0), to: 64 * MiB, by: Int(MiB)) {
            requests += prefetches(machine.read(offset: offset, size: Int(MiB)))
        }
        #expect(requests.count <= 7, "\(requests.map(\.count))")
        #expect(requests.first?.lowerBound == 0 && requests.last?.upperBound == 64 * MiB)
        for (a, b) in zip(requests, requests.dropFirst()) {
            #expect(a.upperBound == b.lowerBound, "contiguous, no byte twice")
            #expect(b.count >= a.count || b.upperBound == 64 * MiB, "the window grows")
        }
    }

    @Test func randomReadsPrefetchNothing() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        #expect(machine.read(offset: 50 * MiB, size: 4 * KiB).isEmpty, "a first read elsewhere than 0 is random")
        #expect(machine.read(offset: 10 * MiB, size: 4 * KiB).isEmpty)
        #expect(machine.read(offset: 70 * MiB + 5, size: 4 * KiB).isEmpty)
        #expect(!machine.isStreaming)
        // ...until it continues where it stopped.
        let parts = prefetches(machine.read(offset: 70 * MiB + 5 + 4 * 1024, size: 4 * KiB))
        #expect(parts.first?.lowerBound == 70 * MiB && machine.isStreaming)
    }

    @Test func aJumpDropsTheBuffers() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        _ = machine.read(offset: 0, size: 128 * KiB)
        #expect(machine.read(offset: 60 * MiB, size: 128 * KiB) == [.discardAll])
        #expect(!machine.isStreaming && machine.frontier == 0)
    }

    @Test func slightlyOutOfOrderReadsStillStream() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        _ = machine.read(offset: 0, size: 128 * KiB)
        _ = machine.read(offset: 256 * 1024, size: 128 * KiB)
        let late = machine.read(offset: 128 * 1024, size: 128 * KiB)
        #expect(!late.contains(.discardAll) && machine.isStreaming)
        let expected: Int64 = 384 * 1024
        #expect(machine.expectedOffset == expected)
    }

    @Test func consumedBuffersAreDiscarded() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        var discards: [Int64] = []
        for i in 0..<80 {
            for action in machine.read(offset: Int64(i) * 128 * 1024, size: 128 * KiB) {
                if case .discard(let below) = action { discards.append(below) }
            }
        }
        // The last read is at 9.875 MiB: blocks from 7 MiB on are kept.
        #expect(discards.last == 7 * MiB, "keeps the seek tolerance behind the reader")
    }

    @Test func abandonedPrefetchIsRetriedLater() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        let first = prefetches(machine.read(offset: 0, size: 128 * KiB))
        machine.prefetchAbandoned(from: first[0].lowerBound)
        #expect(machine.frontier == 0 && machine.isStreaming)
        let retry = prefetches(machine.read(offset: 128 * 1024, size: 128 * KiB))
        #expect(retry.first?.lowerBound == 0)
    }

    @Test func readsAtOrPastTheEndDoNothing() {
        var machine = ReadAhead(configuration: configuration, objectSize: 10)
        #expect(machine.read(offset: 10, size: 5).isEmpty)
        #expect(prefetches(machine.read(offset: 0, size: 100)) == [0..<10])
    }

    @Test func theBudgetIsAllOrNothing() {
        let budget = ReadAheadBudget(limit: 10)
        #expect(budget.reserve(6) && !budget.reserve(5) && budget.reserve(4))
        #expect(budget.inUse == 10)
        budget.release(6)
        #expect(budget.reserve(5) && budget.inUse == 9)
    }
}
