import Foundation
import Testing
@testable import FSCore

private let MiB: Int64 = 1 << 20
private let KiB = 1 << 10

/// How the read-ahead machine turns a slow link into parts side by side,
/// and keeps one stream on a fast one.
@Suite("read-ahead parts")
struct ReadAheadPartsTests {
    let configuration = ReadAhead.Configuration(
        initialWindow: MiB, maxWindow: 16 * MiB, blockSize: MiB, seekTolerance: 2 * MiB,
        singleStreamRate: 256 * 1_048_576, minPartSize: 8 * MiB, maxPartSize: 16 * MiB, maxParallelWindow: 64 * MiB)

    private func prefetches(_ actions: [ReadAhead.Action]) -> [Range<Int64>] {
        actions.compactMap { if case .prefetch(let r) = $0 { return r } else { return nil } }
    }

    /// Reads `total` bytes in 128 KiB reads from `start`; the requests made.
    private func stream(_ machine: inout ReadAhead, from start: Int64 = 0, to total: Int64) -> [Range<Int64>] {
        var requests: [Range<Int64>] = []
        var offset = start
        while offset < total {
            requests += prefetches(machine.read(offset: offset, size: 128 * KiB))
            offset += 128 * 1024
        }
        return requests
    }

    /// Each row: what one finished request showed, and how refills go out after it.
    @Test func theLinkDecidesHowRefillsGoOut() {
        struct Row {
            let bytes: Int64, firstByte: Double, total: Double
            let transfer: ReadAhead.Transfer
            let why: String
        }
        let rows: [Row] = [
            Row(bytes: 4 * MiB, firstByte: 0.0003, total: 0.004, transfer: .single, why: "loopback: 1 GiB/s on one connection"),
            Row(bytes: 4 * MiB, firstByte: 0.020, total: 0.145, transfer: .parallel(partSize: 8 * MiB),
                why: "20 ms, 32 MiB/s: four round trips are 2.6 MiB, below the smallest part"),
            Row(bytes: 8 * MiB, firstByte: 0.050, total: 0.175, transfer: .parallel(partSize: 13 * MiB),
                why: "50 ms, 64 MiB/s: four round trips are 12.8 MiB, one block up"),
            Row(bytes: 8 * MiB, firstByte: 0.200, total: 0.325, transfer: .parallel(partSize: 16 * MiB),
                why: "200 ms, 64 MiB/s: capped at the largest part"),
            Row(bytes: 512 * 1024, firstByte: 0.020, total: 0.100, transfer: .single, why: "less than a block says nothing"),
            Row(bytes: 4 * MiB, firstByte: 0.020, total: 0.020, transfer: .single, why: "no body time says nothing"),
        ]
        for row in rows {
            var machine = ReadAhead(configuration: configuration, objectSize: 1 << 30)
            machine.linkMeasured(bytes: row.bytes, firstByte: row.firstByte, total: row.total)
            #expect(machine.transfer == row.transfer, "\(row.why)")
        }
    }

    /// A far store (round trip measured by the lookups before the open):
    /// a stream goes parallel as soon as it reads past its first block,
    /// not a round trip later when its first request shows the link; a
    /// read of a file's header stays one small request. Each row: the
    /// store's round trip, the reads (offset, size), the requests made.
    @Test func aFarStoreGoesParallelPastTheFirstBlock() {
        struct Row {
            let roundTrip: Double?
            let reads: [(Int64, Int)]
            let requests: [Range<Int64>]
            let transfer: ReadAhead.Transfer
            let why: String
        }
        let dd = [(Int64(0), Int(MiB)), (MiB, Int(MiB))]
        let rows: [Row] = [
            Row(roundTrip: 0.050, reads: dd, requests: [0..<(2 * MiB)] + (0..<8).map { i in
                    max(2 * MiB, Int64(i) * 8 * MiB)..<(Int64(i + 1) * 8 * MiB)
                } + [(64 * MiB)..<(72 * MiB)], transfer: .parallel(partSize: 8 * MiB),
                why: "50 ms: the second block's read sends eight parts' window (to 2 + 64 MiB, in whole parts)"),
            Row(roundTrip: 0.050, reads: [(0, 4 * KiB)], requests: [0..<(2 * MiB)], transfer: .single,
                why: "50 ms, a 4 KiB header read: one request, no parts"),
            Row(roundTrip: 0.0003, reads: dd, requests: [0..<(2 * MiB), (2 * MiB)..<(4 * MiB)], transfer: .single,
                why: "loopback: one growing stream"),
            Row(roundTrip: nil, reads: dd, requests: [0..<(2 * MiB), (2 * MiB)..<(4 * MiB)], transfer: .single,
                why: "nothing measured yet: one growing stream until a request shows the link"),
        ]
        for row in rows {
            var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB, storeRoundTrip: row.roundTrip)
            var requests: [Range<Int64>] = []
            for (offset, size) in row.reads { requests += prefetches(machine.read(offset: offset, size: size)) }
            #expect(requests == row.requests, "\(row.why): \(requests.map { "\($0.lowerBound / MiB)..<\($0.upperBound / MiB)" })")
            #expect(machine.transfer == row.transfer, "\(row.why)")
        }
    }

    @Test func aFarStoreWhoseLinkShowsItselfFastKeepsOneStream() {
        var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB, storeRoundTrip: 0.050)
        _ = stream(&machine, to: 2 * MiB)
        #expect(machine.transfer == .parallel(partSize: 8 * MiB), "presumed slow")
        machine.linkMeasured(bytes: 4 * MiB, firstByte: 0.050, total: 0.054)
        #expect(machine.transfer == .single, "1 GiB/s on one connection: one stream after all")
        #expect(machine.window <= configuration.maxWindow)
        var fresh = ReadAhead(configuration: configuration, objectSize: 512 * MiB, storeRoundTrip: 0.050)
        _ = stream(&fresh, to: 2 * MiB)
        fresh.linkMeasured(bytes: 8 * MiB, firstByte: 0.050, total: 0.175)
        #expect(fresh.transfer == .parallel(partSize: 13 * MiB), "the measured part size replaces the presumed one")
        #expect(fresh.window == 64 * MiB, "eight parts of 13 MiB, capped at the parallel window")
    }

    @Test func aSlowLinkCutsRefillsIntoAlignedPartsAndWidensTheWindow() {
        var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB)
        var requests = stream(&machine, to: 4 * MiB)
        #expect(machine.transfer == .single, "one stream until a request has finished")
        machine.linkMeasured(bytes: 2 * MiB, firstByte: 0.020, total: 0.082)
        requests += stream(&machine, from: 4 * MiB, to: 400 * MiB)
        // Contiguous from 0, never overlapping: no byte is asked twice.
        var end: Int64 = 0
        for request in requests {
            #expect(request.lowerBound == end, "contiguous: \(request)")
            end = request.upperBound
        }
        let parts = requests.filter { $0.lowerBound >= 32 * MiB }
        #expect(parts.allSatisfy { $0.count == 8 * MiB && $0.lowerBound % (8 * MiB) == 0 }, "whole 8 MiB parts on 8 MiB boundaries: \(parts)")
        #expect(machine.window == 64 * MiB, "the window grows past the single stream's cap, to the parallel one")
        #expect(machine.frontier - 400 * MiB <= 64 * MiB + 8 * MiB)
        #expect(machine.frontier - 400 * MiB >= 32 * MiB - MiB, "half a window and more in flight: \(machine.frontier)")
    }

    /// Refills (reads that sent requests) until the window is at its cap.
    private func refillsToTheCap(_ machine: inout ReadAhead, cap: Int64) -> Int {
        var refills = 0
        var offset: Int64 = 0
        while machine.window < cap {
            if !prefetches(machine.read(offset: offset, size: 128 * KiB)).isEmpty { refills += 1 }
            offset += 128 * 1024
        }
        return refills
    }

    @Test func aSlowLinkWidensTheWindowFourTimesPerRefill() {
        var wide = configuration
        wide.maxParallelWindow = 1024 * MiB
        var slow = ReadAhead(configuration: wide, objectSize: 4096 * MiB)
        slow.linkMeasured(bytes: 4 * MiB, firstByte: 0.020, total: 0.145)
        var windows: [Int64] = []
        var offset: Int64 = 0
        while slow.window < wide.maxParallelWindow {
            if !prefetches(slow.read(offset: offset, size: 128 * KiB)).isEmpty { windows.append(slow.window) }
            offset += 128 * 1024
        }
        // 1 MiB grown to 4; past the stream's first block eight parts at
        // once (64 MiB), then four times per refill: 256, 1024.
        #expect(windows == [4 * MiB, 256 * MiB, 1024 * MiB])
        var fast = ReadAhead(configuration: configuration, objectSize: 1 << 30)
        fast.linkMeasured(bytes: 4 * MiB, firstByte: 0.0003, total: 0.004)
        // 1 MiB, then 2, 4, 8, 16: four refills to the 16 MiB cap.
        #expect(refillsToTheCap(&fast, cap: 16 * MiB) == 4)
    }

    @Test func aLinkFirstSeenSlowSendsEightPartsAtOnce() {
        var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB)
        let stream = stream(&machine, to: 2 * MiB)
        #expect(stream.allSatisfy { $0.upperBound <= 8 * MiB }, "a few MiB on one stream while the link is unknown: \(stream)")
        let frontier = machine.frontier
        // 20 ms, 32 MiB/s: parts of 8 MiB, and the window opens to eight
        // of them (64 MiB, this configuration's cap) at the next read.
        machine.linkMeasured(bytes: MiB, firstByte: 0.020, total: 0.051)
        #expect(machine.window == 64 * MiB)
        let next = prefetches(machine.read(offset: 2 * MiB, size: 128 * KiB))
        #expect(next.first?.lowerBound == frontier && next.count >= 7, "parts side by side at once: \(next)")
        #expect(next.dropFirst().allSatisfy { $0.count == 8 * MiB }, "\(next)")
        #expect(machine.frontier >= 2 * MiB + 64 * MiB)
        // A link measured again (each part's first block) opens nothing more.
        machine.linkMeasured(bytes: MiB, firstByte: 0.020, total: 0.051)
        #expect(prefetches(machine.read(offset: 2 * MiB + Int64(128 * KiB), size: 128 * KiB)).isEmpty)
    }

    @Test func aLinkMeasuredBeforeAStreamLeavesItsFirstWindowSmall() {
        // A random read's direct fetch showed the link; a stream that
        // then starts may be a 4 KiB read: one part, not eight.
        var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB)
        machine.linkMeasured(bytes: MiB, firstByte: 0.020, total: 0.051)
        #expect(prefetches(machine.read(offset: 0, size: 4 * KiB)) == [0..<(8 * MiB)])
        #expect(machine.window == 4 * MiB, "grown from the first window, four times")
    }

    @Test func aStreamThatStartsAfterTheLinkShowedSlowOpensWidePastItsFirstBlock() {
        // The kernel's first reads came out of order: direct reads (one
        // showed the link: 20 ms, 32 MiB/s, parts of 8 MiB), then a stream
        // from 3 MiB. Past its first block it sends eight parts at once,
        // not a window grown one round trip per refill.
        var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB)
        _ = machine.read(offset: MiB, size: Int(MiB))
        _ = machine.read(offset: 0, size: Int(MiB))
        machine.linkMeasured(bytes: MiB, firstByte: 0.020, total: 0.051)
        _ = machine.read(offset: 2 * MiB, size: Int(MiB))
        #expect(machine.phase == .random)
        let first = prefetches(machine.read(offset: 3 * MiB, size: Int(MiB)))
        #expect(machine.phase == .streaming)
        #expect(first == [(3 * MiB)..<(8 * MiB)], "the stream's first read: one part to the part boundary")
        let next = prefetches(machine.read(offset: 4 * MiB, size: Int(MiB)))
        #expect(machine.window == 64 * MiB, "eight parts of 8 MiB (this configuration's cap)")
        #expect(next.count >= 7 && next.allSatisfy { $0.count == 8 * MiB }, "parts side by side at once: \(next)")
        #expect(next.first?.lowerBound == 8 * MiB)
    }

    @Test func aFastLinkKeepsOneRequestPerRefill() {
        var machine = ReadAhead(configuration: configuration, objectSize: 512 * MiB)
        _ = stream(&machine, to: 8 * MiB)
        machine.linkMeasured(bytes: 4 * MiB, firstByte: 0.0003, total: 0.004)
        let refills = stream(&machine, from: 8 * MiB, to: 200 * MiB)
        #expect(refills.count > 5)
        #expect(refills.contains { $0.count > 8 * MiB }, "whole refills, not parts")
        #expect(machine.window == 16 * MiB, "the single stream's cap")
    }

    @Test func aLinkThatSpeedsUpReturnsToOneStreamAndItsWindow() {
        var machine = ReadAhead(configuration: configuration, objectSize: 1 << 30)
        _ = stream(&machine, to: 4 * MiB)
        machine.linkMeasured(bytes: 8 * MiB, firstByte: 0.02, total: 0.27)
        _ = stream(&machine, from: 4 * MiB, to: 300 * MiB)
        #expect(machine.window == 64 * MiB)
        machine.linkMeasured(bytes: 8 * MiB, firstByte: 0.0003, total: 0.01)
        #expect(machine.transfer == .single && machine.window == 16 * MiB)
        let next = stream(&machine, from: 300 * MiB, to: 400 * MiB)
        #expect(!next.isEmpty && next.allSatisfy { $0.count <= 16 * MiB + MiB })
    }

    /// Loopback on a busy host: the first request's block came at 1 GiB/s,
    /// a later one (overlapping the one before, both cores busy) at
    /// 180 MiB/s. The link did not slow down; the stream stays one request
    /// per refill, not two dozen parts in flight.
    @Test func aLinkOnceShownFastKeepsOneStreamWhenALaterBlockComesSlowly() {
        var machine = ReadAhead(configuration: configuration, objectSize: 1 << 30)
        _ = stream(&machine, to: 8 * MiB)
        machine.linkMeasured(bytes: MiB, firstByte: 0.0003, total: 0.0013)
        _ = stream(&machine, from: 8 * MiB, to: 64 * MiB)
        machine.linkMeasured(bytes: MiB, firstByte: 0.0005, total: 0.0060)
        #expect(machine.transfer == .single)
        let next = stream(&machine, from: 64 * MiB, to: 200 * MiB)
        #expect(!next.isEmpty && next.allSatisfy { $0.count <= 16 * MiB + MiB }, "whole refills, not parts: \(next)")
        #expect(machine.window == 16 * MiB, "the single stream's cap")
        // The same slow block as the first measurement is a slow link.
        var slowFirst = ReadAhead(configuration: configuration, objectSize: 1 << 30)
        slowFirst.linkMeasured(bytes: MiB, firstByte: 0.0005, total: 0.0060)
        #expect(slowFirst.transfer == .parallel(partSize: 8 * MiB))
    }

    /// A fast link's window is four round trips of it, from two of the
    /// kernel's windows (`fastLinkWindow`, 32 MiB) to `maxWindow`. Each
    /// row: the request that showed the link, the window the stream
    /// settles at.
    @Test func aFastLinksWindowIsItsBandwidthDelayProduct() {
        var wide = configuration
        wide.maxWindow = 64 * MiB
        wide.fastLinkWindow = 32 * MiB
        struct Row {
            let firstByte: Double, total: Double
            let window: Int64
            let why: String
        }
        let rows: [Row] = [
            Row(firstByte: 0.0003, total: 0.0013, window: 32 * MiB, why: "loopback, 1 GiB/s, 0.3 ms: the kernel's two windows"),
            Row(firstByte: 0.010, total: 0.011, window: 40 * MiB, why: "1 GiB/s, 10 ms: four round trips are 40 MiB"),
            Row(firstByte: 0.020, total: 0.021, window: 64 * MiB, why: "1 GiB/s, 20 ms: 80 MiB, capped at maxWindow"),
        ]
        for row in rows {
            var machine = ReadAhead(configuration: wide, objectSize: 1 << 30)
            _ = stream(&machine, to: 4 * MiB)
            machine.linkMeasured(bytes: MiB, firstByte: row.firstByte, total: row.total)
            let refills = stream(&machine, from: 4 * MiB, to: 512 * MiB)
            #expect(machine.transfer == .single, "\(row.why)")
            #expect(machine.window == row.window, "\(row.why)")
            #expect(refills.allSatisfy { $0.count <= row.window + MiB }, "\(row.why): \(refills.map(\.count))")
        }
        // Nothing shown yet: the stream may grow to maxWindow.
        var unknown = ReadAhead(configuration: wide, objectSize: 1 << 30)
        _ = stream(&unknown, to: 200 * MiB)
        #expect(unknown.window == 64 * MiB)
    }

    @Test func aRandomReaderGetsNoPartsWhateverTheLink() {
        var machine = ReadAhead(configuration: configuration, objectSize: 1 << 30)
        machine.linkMeasured(bytes: 4 * MiB, firstByte: 0.02, total: 0.145)
        #expect(prefetches(machine.read(offset: 100 * MiB, size: 4096)).isEmpty)
        #expect(prefetches(machine.read(offset: 7 * MiB, size: 4096)).isEmpty)
        #expect(machine.phase == .random)
    }
}
