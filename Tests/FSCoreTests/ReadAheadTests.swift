import Foundation
import Testing
@testable import FSCore

private let MiB: Int64 = 1 << 20
private let KiB = 1 << 10

@Suite("read-ahead state machine")
struct ReadAheadTests {
    let configuration = ReadAhead.Configuration(initialWindow: MiB, maxWindow: 8 * MiB, partSize: 2 * MiB, blockSize: MiB, seekTolerance: 2 * MiB)

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
            for part in parts {
                #expect(part.count <= 2 * MiB && part.lowerBound % MiB == 0)
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

    @Test func largeWindowsAreSplitIntoConcurrentParts() {
        var machine = ReadAhead(configuration: ReadAhead.Configuration(initialWindow: 32 * MiB, maxWindow: 64 * MiB, partSize: 8 * MiB), objectSize: 1 << 40)
        let parts = prefetches(machine.read(offset: 0, size: 128 * KiB))
        // 32 MiB past a 128 KiB read: 33 MiB, as four 8 MiB parts and one of 1 MiB.
        #expect(parts.map(\.count) == [8 * MiB, 8 * MiB, 8 * MiB, 8 * MiB, MiB].map(Int.init))
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
