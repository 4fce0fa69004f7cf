import Foundation
import Testing
import TestSupport
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
        #expect(discards.last == 7 * MiB, "keeps keepBehind (2 MiB) behind the reader")
    }

    /// What a cold read at 50 ms saw: the kernel's 16 MiB window arrives in
    /// any order, and a read far ahead dropped the buffers of the reads
    /// behind it still on their way, each of which then went to the store
    /// on its own. No block is dropped before its read has come; 20 seeds.
    @Test func noBufferIsDroppedBeforeItsReadArrives() {
        let size = 96 * MiB
        for seed in UInt64(1)...20 {
            var random = SplitMix64(seed: seed)
            var machine = ReadAhead(configuration: ReadAhead.Configuration(seekTolerance: 32 * MiB), objectSize: size)
            var droppedBelow: Int64 = 0
            var batchStart: Int64 = 0
            while batchStart < size {
                var batch = Array(stride(from: batchStart, to: min(size, batchStart + 16 * MiB), by: Int(MiB)))
                batch.shuffle(using: &random)
                if batchStart == 0 { batch = [0] + batch.filter { $0 != 0 } }
                for offset in batch {
                    for action in machine.read(offset: offset, size: Int(MiB)) {
                        if case .discard(let below) = action { droppedBelow = max(droppedBelow, below) }
                    }
                    // Checked after the read's own actions: the read that
                    // closes a gap must not drop its own block either.
                    #expect(offset >= droppedBelow, "seed \(seed): the read at \(offset / MiB) MiB found its buffer dropped (below \(droppedBelow / MiB) MiB)")
                }
                batchStart += 16 * MiB
            }
            #expect(droppedBelow >= size - 16 * MiB - 3 * MiB, "seed \(seed): what was read is dropped, but for the last window")
        }
    }

    @Test func abandonedPrefetchIsRetriedLater() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        let first = prefetches(machine.read(offset: 0, size: 128 * KiB))
        machine.prefetchAbandoned(from: first[0].lowerBound)
        #expect(machine.frontier == 0 && machine.isStreaming)
        let retry = prefetches(machine.read(offset: 128 * 1024, size: 128 * KiB))
        #expect(retry.first?.lowerBound == 0)
    }

    /// What the CI machine saw (20 GETs for a 64 MiB cat, the stream
    /// ended twice): the kernel's read-ahead sweep, 16 requests of 1 MiB at
    /// a time, reaching the filesystem in any order after the reader's
    /// first read at 0 (a stream starts there). With the mount's
    /// tolerance (the kernel's 16 MiB window) it stays one stream of
    /// contiguous, growing GETs, whatever the order; 20 seeds of shuffles.
    /// The mount's tolerance is two windows (the kernel issues the next
    /// window while the current one is pending): a sweep of 32 MiB batches
    /// stays one stream with it.
    @Test(arguments: [(16 * MiB, 16 * MiB), (32 * MiB, 32 * MiB)])
    func theKernelsOutOfOrderSweepStaysOneStream(batchSpan: Int64, tolerance: Int64) {
        let size = 96 * MiB
        for seed in UInt64(1)...20 {
            var random = SplitMix64(seed: seed)
            var machine = ReadAhead(configuration: ReadAhead.Configuration(seekTolerance: tolerance), objectSize: size)
            var requests: [Range<Int64>] = []
            var batchStart: Int64 = 0
            while batchStart < size {
                var batch = Array(stride(from: batchStart, to: min(size, batchStart + batchSpan), by: Int(MiB)))
                batch.shuffle(using: &random)
                if batchStart == 0 { batch = [0] + batch.filter { $0 != 0 } }
                for offset in batch {
                    let actions = machine.read(offset: offset, size: Int(MiB))
                    #expect(!actions.contains(.discardAll), "seed \(seed): the read at \(offset) ended the stream")
                    requests += prefetches(actions)
                }
                batchStart += batchSpan
            }
            #expect(machine.isStreaming, "seed \(seed)")
            #expect(requests.first?.lowerBound == 0 && requests.last?.upperBound == size, "seed \(seed)")
            for (a, b) in zip(requests, requests.dropFirst()) {
                #expect(a.upperBound == b.lowerBound, "seed \(seed): contiguous, no gap left to direct reads")
            }
            #expect(requests.count <= 8, "seed \(seed): \(requests.map { $0.count / Int(MiB) }) MiB")
        }
    }

    /// Late and early reads, as a table: the furthest read is at 10 MiB
    /// (window 16 MiB, frontier 21 MiB after the refills).
    @Test func lateAndEarlyReadsAroundTheStream() {
        struct Row {
            let offset: Int64
            let streaming: Bool
            let requests: [Range<Int64>]
        }
        func streamAtTenMiB() -> ReadAhead {
            var machine = ReadAhead(configuration: ReadAhead.Configuration(maxWindow: 16 * MiB), objectSize: 200 * MiB)
            for offset in stride(from: Int64(0), through: 9 * MiB, by: Int(MiB)) { _ = machine.read(offset: offset, size: Int(MiB)) }
            return machine
        }
        let start = streamAtTenMiB()
        #expect(start.expectedOffset == 10 * MiB)
        let frontier = start.frontier
        #expect(frontier == 21 * MiB)
        let rows: [Row] = [
            // 6 MiB behind the furthest read: a late request of the sweep.
            Row(offset: 4 * MiB, streaming: true, requests: []),
            // Past the frontier (21 MiB) but within the kernel's window of
            // the furthest read: the stream grows from its frontier, no gap
            // (to 16 MiB past the read's end).
            Row(offset: 24 * MiB, streaming: true, requests: [frontier..<(41 * MiB)]),
            // Further than the kernel's window from the furthest read, and
            // past the frontier: a seek.
            Row(offset: 27 * MiB, streaming: false, requests: []),
        ]
        for (index, row) in rows.enumerated() {
            var machine = start
            let actions = machine.read(offset: row.offset, size: Int(MiB))
            #expect(machine.isStreaming == row.streaming, "row \(index)")
            #expect(prefetches(actions) == row.requests, "row \(index)")
        }
    }

    @Test func afterAnAbandonedPrefetchTheStreamResumesAtTheReader() {
        var machine = ReadAhead(configuration: configuration, objectSize: 100 * MiB)
        let first = prefetches(machine.read(offset: 0, size: 128 * KiB))
        machine.prefetchAbandoned(from: first[0].lowerBound)
        // The budget stayed spent while the reader read 0..<1.5 MiB directly.
        for offset in stride(from: Int64(128 * 1024), to: 3 * MiB / 2, by: 128 * 1024) {
            _ = machine.read(offset: offset, size: 128 * KiB)
            machine.prefetchAbandoned(from: 0)
        }
        // Budget back: the bytes already read are not fetched again.
        let resumed = prefetches(machine.read(offset: 3 * MiB / 2, size: 128 * KiB))
        #expect(resumed.first?.lowerBound == MiB, "from the reader's block, not from 0: \(resumed)")
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
