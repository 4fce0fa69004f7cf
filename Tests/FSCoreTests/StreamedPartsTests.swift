import Testing
@testable import FSCore

/// The lifecycle of parts sent while a file is written (`StreamedParts`),
/// event by event: which ranges become parts, the bound on parts in
/// flight, and what a failure, an abandon or a close leaves.
@Suite struct StreamedPartsTests {
    typealias Launch = StreamedParts.Launch

    @Test func eachChunkIsOnePartAndEachPartWaitsForTheOneWidthBefore() throws {
        var parts = StreamedParts(partSize: 10, width: 2)
        #expect(try parts.send(upTo: 10).get() == [Launch(index: 0, range: 0..<10, after: nil)])
        // A send that lagged behind the writer still makes parts of partSize.
        #expect(try parts.send(upTo: 40).get() == [
            Launch(index: 1, range: 10..<20, after: nil),
            Launch(index: 2, range: 20..<30, after: 0),
            Launch(index: 3, range: 30..<40, after: 1),
        ])
        #expect(try parts.send(upTo: 40).get() == [], "nothing new")
        #expect(parts.queuedEnd == 40)
    }

    @Test func aSendMustEndOnAPartBoundaryAtOrAfterWhatIsQueued() throws {
        var parts = StreamedParts(partSize: 10, width: 4)
        _ = try parts.send(upTo: 20).get()
        for end: Int64 in [25, 10] {
            guard case .failure(.invalidArgument) = parts.send(upTo: end) else {
                Issue.record("a send up to \(end) accepted")
                continue
            }
        }
        #expect(parts.queuedEnd == 20 && parts.parts.count == 2)
    }

    @Test func theCloseQueuesTheRestAndComposesEveryPartInOrder() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.send(upTo: 20).get()
        #expect(try parts.finish(size: 45).get() == [
            Launch(index: 2, range: 20..<30, after: nil),
            Launch(index: 3, range: 30..<40, after: nil),
            Launch(index: 4, range: 40..<45, after: nil),
        ])
        for index in [4, 0, 2, 1, 3] { parts.ended(index, .success(UInt32(100 + index))) }
        #expect(parts.outcome() == .compose((0..<5).map {
            StreamedParts.StoredPart(index: $0, crc32c: UInt32(100 + $0), length: $0 == 4 ? 5 : 10)
        }))
        #expect(parts.isOver)
        #expect(parts.send(upTo: 50) == .failure(.cancelled), "over: nothing more is sent")
    }

    @Test func aCloseOnAPartBoundaryAddsNoPart() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.send(upTo: 30).get()
        #expect(try parts.finish(size: 30).get() == [])
        for index in 0..<3 { parts.ended(index, .success(7)) }
        guard case .compose(let stored) = parts.outcome() else {
            Issue.record("not composed")
            return
        }
        #expect(stored.map(\.length) == [10, 10, 10])
    }

    @Test func aFailedPartFailsTheNextSendAndTheClose() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.send(upTo: 20).get()
        parts.ended(0, .success(1))
        parts.ended(1, .failure(.unavailable("503")))
        #expect(parts.send(upTo: 30) == .failure(.unavailable("503")))
        #expect(parts.finish(size: 35) == .failure(.unavailable("503")))
        #expect(parts.isOver)
        #expect(parts.abandon() == [0, 1], "every part started is the owner's to delete")
    }

    @Test func aFailureWhileTheLastPartsGoUpFailsTheOutcome() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.finish(size: 25).get()
        parts.ended(0, .success(1))
        parts.ended(2, .success(3))
        parts.ended(1, .failure(.preconditionFailed("412")))
        #expect(parts.outcome() == .failed(.preconditionFailed("412")))
    }

    @Test func anOutcomeBeforeEveryPartEndedIsAFailureNotAComposeOfMissingBytes() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.finish(size: 20).get()
        parts.ended(0, .success(1))
        guard case .failed = parts.outcome() else {
            Issue.record("composed with a part in flight")
            return
        }
    }

    @Test func aCloseSmallerThanWhatWasSentIsRefused() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.send(upTo: 20).get()
        guard case .failure(.invalidArgument) = parts.finish(size: 15) else {
            Issue.record("finished a file shorter than its parts")
            return
        }
        #expect(parts.isOver)
    }

    @Test func anAbandonedUploadSendsNothingMoreAndIgnoresLateEnds() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.send(upTo: 30).get()
        parts.ended(0, .success(1))
        #expect(parts.abandon() == [0, 1, 2])
        parts.ended(1, .success(2))
        #expect(parts.send(upTo: 40) == .failure(.cancelled))
        #expect(parts.finish(size: 40) == .failure(.cancelled))
        #expect(parts.outcome() == .failed(.cancelled))
    }

    @Test func storedCountsBytesWithoutAGapFromTheStart() throws {
        var parts = StreamedParts(partSize: 10, width: 8)
        _ = try parts.send(upTo: 30).get()
        parts.ended(1, .success(2))
        #expect(parts.stored == 0, "part 0 still in flight")
        parts.ended(0, .success(1))
        #expect(parts.stored == 20)
        parts.ended(2, .success(3))
        parts.ended(2, .failure(.unavailable("late")))
        #expect(parts.stored == 30, "a second end of the same part changes nothing")
    }
}
