import Foundation
import Testing
@testable import FSCore

/// The write-back machine as tables: events in, what each returns and the
/// phase after it. The races fixed one at a time in the write path (each
/// table names the commit) are rows here, next to the end-to-end tests
/// that found them.
@Suite("write-back state machine")
struct WriteBackTests {
    private static let MiB: Int64 = 1 << 20

    typealias Event = WriteBack.Event

    /// What an event returned, comparable in a table.
    enum Outcome: Equatable {
        case done
        case actions([WriteBack.Action])
        case accepted(Bool)
        case upload(WriteBack.UploadStep)
        case retire(WriteBack.RetireStep)
        case unlinked(uploadInFlight: Bool, [WriteBack.Action])
        case streamStarted(kept: Bool, [WriteBack.Action])
        case take(WriteBack.StreamTake)
        case refused
    }

    struct Row {
        let event: Event
        let outcome: Outcome
        let phase: WriteBack.Phase
        init(_ event: Event, _ outcome: Outcome, _ phase: WriteBack.Phase) {
            self.event = event
            self.outcome = outcome
            self.phase = phase
        }
    }

    /// The machine's effects as the rows write them.
    static func apply(_ event: Event, to machine: inout WriteBack) -> Outcome {
        let effects = machine.handle(event)
        switch (event, effects.answer) {
        case (.truncated, .refused): return .refused
        case (.streamStarted, .accepted(let kept)): return .streamStarted(kept: kept, effects.actions)
        case (_, .accepted(let accepted)): return .accepted(accepted)
        case (_, .upload(let step)): return .upload(step)
        case (_, .retire(let step)): return .retire(step)
        case (_, .unlinked(let inFlight)): return .unlinked(uploadInFlight: inFlight, effects.actions)
        case (_, .take(let take)): return .take(take)
        case (_, .refused): return .refused
        case (.wrote, .none), (.truncated, .none), (.uploadStored, .none), (.renamed, .none): return .actions(effects.actions)
        case (_, .none): return effects.actions.isEmpty ? .done : .actions(effects.actions)
        }
    }

    func run(_ rows: [Row], _ machine: WriteBack = WriteBack(streamChunk: 8 * MiB, emptyAtStart: true), sourceLocation: SourceLocation = #_sourceLocation) {
        var machine = machine
        for (index, row) in rows.enumerated() {
            let outcome = Self.apply(row.event, to: &machine)
            #expect(outcome == row.outcome, "row \(index): \(row.event)", sourceLocation: sourceLocation)
            #expect(machine.phase == row.phase, "row \(index): \(row.event)", sourceLocation: sourceLocation)
        }
    }

    @Test func aNewFileWrittenClosedAndRetired() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.created, .done, .dirty),
            Row(.wrote(0..<100), .actions([.writeJournal]), .dirty),
            // Only the first change after an upload writes the journal.
            Row(.wrote(100..<200), .actions([]), .dirty),
            Row(.uploadRequested, .upload(.start(version: 3)), .uploading),
            Row(.uploadRequested, .upload(.join), .uploading),
            Row(.uploadStored(3, hasContent: true), .actions([.removeJournal]), .clean),
            Row(.uploadEnded, .done, .clean),
            Row(.uploadRequested, .upload(.nothing), .clean),
            Row(.released, .accepted(true), .clean),
            Row(.retire, .retire(.discard), .retired),
        ])
    }

    /// The open/release race (ee2ac6f, OpenReleaseRaceTests end to end): an open that found the file
    /// registered attaches after the last release retired it; it must not
    /// write through the deleted copy, and opens afresh.
    @Test func aRetiredFileTakesNoHandleUnlessMadeForTheOpen() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.released, .accepted(true), .clean),
            Row(.retire, .retire(.discard), .retired),
            Row(.attach(new: false), .accepted(false), .retired),
            Row(.truncated(from: 0, to: 5), .refused, .retired),
            Row(.rideAlong, .accepted(false), .retired),
        ])
    }

    /// A write that lands while its file uploads: the upload stores the
    /// older version, the file stays dirty, the journal stays, and the next
    /// request uploads again; the last release owes that upload.
    @Test func aWriteDuringAnUploadIsUploadedNext() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<10), .actions([.writeJournal]), .dirty),
            Row(.uploadRequested, .upload(.start(version: 1)), .uploading),
            Row(.wrote(10..<20), .actions([]), .uploading),
            // Still dirty; uploading until the uploader is done.
            Row(.uploadStored(1, hasContent: true), .actions([]), .uploading),
            Row(.released, .accepted(true), .uploading),
            // The last release owes the second version: it uploads (joining
            // the upload in flight first), then asks again.
            Row(.retire, .retire(.uploadFirst), .uploading),
            Row(.uploadEnded, .done, .dirty),
            Row(.uploadRequested, .upload(.start(version: 2)), .uploading),
            Row(.uploadStored(2, hasContent: true), .actions([.removeJournal]), .clean),
            Row(.uploadEnded, .done, .clean),
            Row(.retire, .retire(.discard), .retired),
        ])
    }

    /// A failed upload (bytes in the recovery folder) is not tried again
    /// by the last release, but a new change is.
    @Test func aFailedVersionIsNotRetriedAtRelease() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<10), .actions([.writeJournal]), .dirty),
            Row(.uploadRequested, .upload(.start(version: 1)), .uploading),
            Row(.uploadFailed(1), .done, .uploading),
            Row(.uploadEnded, .done, .failed),
            // A flush still tries (it reports to someone).
            Row(.uploadRequested, .upload(.start(version: 1)), .uploading),
            Row(.uploadFailed(1), .done, .uploading),
            Row(.uploadEnded, .done, .failed),
            Row(.wrote(10..<20), .actions([]), .dirty),
            Row(.released, .accepted(true), .dirty),
            Row(.retire, .retire(.uploadFirst), .dirty),
            Row(.uploadRequested, .upload(.start(version: 2)), .uploading),
            Row(.uploadFailed(2), .done, .uploading),
            Row(.uploadEnded, .done, .failed),
            Row(.retire, .retire(.discard), .retired),
        ])
    }

    /// Unlink during a release's upload (f8736a8): the unlink learns
    /// of the upload in flight (and waits for it, so what it stores is
    /// deleted too); nothing is uploaded after; a failed delete makes the
    /// name the file's again.
    @Test func unlinkDuringAnUpload() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<10), .actions([.writeJournal]), .dirty),
            Row(.uploadRequested, .upload(.start(version: 1)), .uploading),
            Row(.unlink, .unlinked(uploadInFlight: true, []), .unlinked),
            Row(.uploadStored(1, hasContent: true), .actions([.removeJournal]), .unlinked),
            Row(.uploadEnded, .done, .unlinked),
            Row(.wrote(10..<20), .actions([.writeJournal]), .unlinked),
            Row(.uploadRequested, .upload(.nothing), .unlinked),
            Row(.rideAlong, .accepted(false), .unlinked),
            Row(.relink, .done, .dirty),
            Row(.uploadRequested, .upload(.start(version: 2)), .uploading),
        ])
    }

    /// The last release of an unlinked file uploads nothing.
    @Test func anUnlinkedFileIsDiscardedAtItsLastRelease() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<10), .actions([.writeJournal]), .dirty),
            Row(.unlink, .unlinked(uploadInFlight: false, []), .unlinked),
            Row(.released, .accepted(true), .unlinked),
            Row(.retire, .retire(.discard), .retired),
        ])
    }

    /// A streamed upload raced by a whole upload (ed62f38):
    /// a close right after the first chunk's writes finds the stream
    /// starting, waits for it and takes it over, instead of a second upload
    /// racing it.
    @Test func aCloseDuringTheStreamsStartTakesTheStreamOver() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<(4 * Self.MiB)), .actions([.writeJournal]), .dirty),
            Row(.wrote((4 * Self.MiB)..<(8 * Self.MiB)), .actions([.startStream]), .dirty),
            // Writes go on; one start is in flight.
            Row(.wrote((8 * Self.MiB)..<(12 * Self.MiB)), .actions([]), .dirty),
            Row(.uploadRequested, .upload(.start(version: 3)), .uploading),
            Row(.takeStream, .take(.waitForStart), .uploading),
            // Started: its first send goes at once (8 MiB, in 256 KiB steps).
            Row(.streamStarted(granularity: 256 << 10), .streamStarted(kept: true, [.sendStream(upTo: 8 * Self.MiB)]), .uploading),
            Row(.takeStream, .take(.take(sendFailed: false)), .uploading),
            // The file has no stream after.
            Row(.takeStream, .take(.none), .uploading),
            Row(.streamSent(ok: true), .done, .uploading),
        ])
    }

    /// The stream's start ends after a close uploaded the file (or after a
    /// truncation, an out-of-order write, an unlink): its session is not
    /// kept.
    @Test func aStreamThatStartsTooLateIsNotKept() {
        let toChunk = Row(.wrote(0..<(8 * Self.MiB)), .actions([.writeJournal, .startStream]), .dirty)
        // Uploaded meanwhile (a close that found no stream yet is not
        // possible: it waits; but a stream can start after the upload
        // stored everything).
        run([
            toChunk,
            Row(.uploadRequested, .upload(.start(version: 1)), .uploading),
            Row(.uploadStored(1, hasContent: true), .actions([.removeJournal]), .clean),
            Row(.streamStarted(granularity: 1), .streamStarted(kept: false, []), .clean),
        ])
        run([toChunk, Row(.truncated(from: 8 * Self.MiB, to: 0), .actions([]), .dirty),
             Row(.streamStarted(granularity: 1), .streamStarted(kept: false, []), .dirty)])
        run([toChunk, Row(.wrote(0..<1), .actions([]), .dirty),
             Row(.streamStarted(granularity: 1), .streamStarted(kept: false, []), .dirty)])
        run([toChunk, Row(.unlink, .unlinked(uploadInFlight: false, []), .unlinked),
             Row(.streamStarted(granularity: 1), .streamStarted(kept: false, []), .unlinked)])
        // A start that gave no stream (it failed, or every place is taken)
        // leaves none; the writes of the next chunk do not ask again, the
        // end of it does.
        run([toChunk, Row(.streamStarted(granularity: nil), .streamStarted(kept: false, []), .dirty),
             Row(.wrote((8 * Self.MiB)..<(12 * Self.MiB)), .actions([]), .dirty),
             Row(.wrote((12 * Self.MiB)..<(16 * Self.MiB)), .actions([.startStream]), .dirty)])
    }

    /// Near the store a file goes up in one request at close up to a size
    /// (`ParallelUploads.streamStart`): its stream starts only past it, and
    /// the first send carries every whole chunk written by then.
    @Test func aStreamStartsPastItsStartAndCatchesUp() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<(8 * Self.MiB)), .actions([.writeJournal]), .dirty),
            Row(.wrote((8 * Self.MiB)..<(24 * Self.MiB)), .actions([]), .dirty),
            Row(.wrote((24 * Self.MiB)..<(32 * Self.MiB)), .actions([]), .dirty),
            Row(.wrote((32 * Self.MiB)..<(35 * Self.MiB)), .actions([.startStream]), .dirty),
            Row(.streamStarted(granularity: 8 * Self.MiB), .streamStarted(kept: true, [.sendStream(upTo: 32 * Self.MiB)]), .dirty),
            Row(.streamSent(ok: true), .done, .dirty),
            Row(.wrote((35 * Self.MiB)..<(40 * Self.MiB)), .actions([.sendStream(upTo: 40 * Self.MiB)]), .dirty),
        ], WriteBack(streamChunk: 8 * Self.MiB, streamStart: 32 * Self.MiB + 1, emptyAtStart: true))
        // No start given: the chunk; given, it may be below the chunk (one
        // request near the store starts early and sends by its own step).
        #expect(WriteBack(streamChunk: 8 * Self.MiB, emptyAtStart: true).streamStart == 8 * Self.MiB)
        #expect(WriteBack(streamChunk: 8 * Self.MiB, streamStart: 1, emptyAtStart: true).streamStart == 1)
    }

    /// A stream of its own step (one request near the store: 1 MiB steps)
    /// and limit: it sends by its step, not the chunk; a write past its
    /// limit abandons it and starts another, whose first send catches up.
    @Test func aStreamSendsByItsStepAndIsReplacedPastItsLimit() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.wrote(0..<(8 * Self.MiB + 5)), .actions([.writeJournal, .startStream]), .dirty),
            Row(.streamStarted(granularity: 1, step: Self.MiB, limit: 16 * Self.MiB),
                .streamStarted(kept: true, [.sendStream(upTo: 8 * Self.MiB)]), .dirty),
            Row(.streamSent(ok: true), .done, .dirty),
            // Not the 8 MiB chunk: the next whole MiB.
            Row(.wrote((8 * Self.MiB + 5)..<(10 * Self.MiB + 7)), .actions([.sendStream(upTo: 10 * Self.MiB)]), .dirty),
            Row(.streamSent(ok: true), .done, .dirty),
            // Up to the limit: still this stream.
            Row(.wrote((10 * Self.MiB + 7)..<(16 * Self.MiB)), .actions([.sendStream(upTo: 16 * Self.MiB)]), .dirty),
            Row(.streamSent(ok: true), .done, .dirty),
            // One byte past it: abandoned, another starts.
            Row(.wrote((16 * Self.MiB)..<(16 * Self.MiB + 1)), .actions([.abandonStream, .startStream]), .dirty),
            Row(.streamStarted(granularity: 8 * Self.MiB), .streamStarted(kept: true, [.sendStream(upTo: 16 * Self.MiB)]), .dirty),
        ], WriteBack(streamChunk: 8 * Self.MiB, streamStart: 8 * Self.MiB, emptyAtStart: true))
    }

    /// An open stream: one send at a time, whole chunks in the session's
    /// steps; a failed send stops the sends (the close uploads the whole
    /// file); an out-of-order write or a truncation abandons it.
    @Test func anOpenStreamSendsChunksAndEndsWhenTheContentMovesAway() {
        let open: [Row] = [
            Row(.wrote(0..<(8 * Self.MiB)), .actions([.writeJournal, .startStream]), .dirty),
            Row(.streamStarted(granularity: 3 * Self.MiB), .streamStarted(kept: true, [.sendStream(upTo: 6 * Self.MiB)]), .dirty),
        ]
        run(open + [
            // Still sending: the next chunk waits for the next write.
            Row(.wrote((8 * Self.MiB)..<(16 * Self.MiB)), .actions([]), .dirty),
            Row(.streamSent(ok: true), .done, .dirty),
            Row(.wrote((16 * Self.MiB)..<(17 * Self.MiB)), .actions([.sendStream(upTo: 15 * Self.MiB)]), .dirty),
            Row(.streamSent(ok: false), .done, .dirty),
            Row(.wrote((17 * Self.MiB)..<(40 * Self.MiB)), .actions([]), .dirty),
        ])
        run(open + [Row(.wrote(0..<1), .actions([.abandonStream]), .dirty), Row(.takeStream, .take(.none), .dirty)])
        run(open + [Row(.truncated(from: 8 * Self.MiB, to: 8 * Self.MiB), .actions([.abandonStream]), .dirty)])
        run(open + [Row(.unlink, .unlinked(uploadInFlight: false, [.abandonStream]), .unlinked)])
    }

    /// A rename is an event: the journal of a file with unsaved writes is
    /// rewritten for the new name (a mount that dies before the upload
    /// must leave the bytes under the name they now have); a clean file
    /// has none to rewrite.
    @Test func aRenameRewritesTheJournal() {
        run([
            Row(.attach(new: true), .accepted(true), .clean),
            Row(.renamed, .actions([]), .clean),
            Row(.wrote(0..<10), .actions([.writeJournal]), .dirty),
            Row(.renamed, .actions([.writeJournal]), .dirty),
            Row(.uploadRequested, .upload(.start(version: 1)), .uploading),
            Row(.renamed, .actions([.writeJournal]), .uploading),
            Row(.uploadStored(1, hasContent: true), .actions([.removeJournal]), .clean),
            Row(.uploadEnded, .done, .clean),
            Row(.renamed, .actions([]), .clean),
        ])
    }

    /// The Tasks the executor makes for the machine's effects live in the
    /// phase that has them (the stream's start while it starts, a send
    /// while the stream is open, the upload while it is in flight), and a
    /// session leaves the machine only taken over by an upload or handed
    /// out to be abandoned.
    @Test func tasksAndSessionsLiveInTheirPhase() {
        struct NoPut: StreamingPut {
            var granularity: Int64 { 1 }
            var acknowledged: Int64 { 0 }
            func send(upTo end: Int64) async throws(StoreError) {}
            func finish(size: Int64) async throws(StoreError) -> ObjectInfo { ObjectInfo(name: "f", size: size, generation: 1, updated: Date()) }
            func abandon() async {}
        }
        var machine = WriteBack(streamChunk: 1, emptyAtStart: true)
        _ = machine.handle(.attach(new: true))
        #expect(machine.handle(.wrote(0..<1)).actions == [.writeJournal, .startStream])
        let start = Task<Void, Never> {}
        _ = machine.handle(.launched(.streamStart(start)))
        #expect(machine.stream == .starting(current: true, task: start))
        let session = UploadStream(put: NoPut(), sentMetadata: [:])
        let started = machine.handle(.streamStarted(granularity: 1, session: session))
        #expect(started.answer == .accepted(true) && started.actions == [.sendStream(upTo: 1)])
        #expect(machine.streamSession === session)
        _ = machine.handle(.launched(.send(Task { .success(()) })))
        // Written out of order: the session is dropped and handed out.
        let moved = machine.handle(.wrote(0..<1))
        #expect(moved.actions == [.abandonStream] && moved.abandoned === session && machine.streamSession == nil)
        #expect(machine.handle(.uploadRequested).answer == .upload(.start(version: 2)))
        let upload = Task<Result<Void, FSError>, Never> { .success(()) }
        _ = machine.handle(.launched(.upload(upload)))
        #expect(machine.upload?.task == upload)
        #expect(machine.handle(.uploadRequested).answer == .upload(.join))
        _ = machine.handle(.uploadEnded)
        #expect(machine.upload == nil)

        var streaming = WriteBack(streamChunk: 1, emptyAtStart: true)
        _ = streaming.handle(.wrote(0..<1))
        _ = streaming.handle(.streamStarted(granularity: 1, session: session))
        _ = streaming.handle(.uploadRequested)
        let taken = streaming.handle(.takeStream)
        #expect(taken.answer == .take(.take(sendFailed: false)) && taken.taken?.session === session && taken.abandoned == nil)
    }

    /// Attribute changes ride along only with a coming upload (dirty and
    /// live); else the caller patches the object.
    @Test func changesRideAlongOnlyWithAComingUpload() {
        var machine = WriteBack(streamChunk: Self.MiB, emptyAtStart: false)
        #expect(machine.handle(.rideAlong).answer == .accepted(false), "clean: patch the object")
        _ = machine.handle(.wrote(0..<1))
        #expect(machine.handle(.rideAlong).answer == .accepted(true) && machine.version == 2, "dirty: counts as a change")
        _ = machine.handle(.unlink)
        #expect(machine.handle(.rideAlong).answer == .accepted(false))
    }

    /// What the recovery retrier asks: it must not upload an entry over a
    /// file this mount is writing.
    @Test func unsavedWritesAreThoseOfALiveName() {
        var machine = WriteBack(streamChunk: Self.MiB, emptyAtStart: true)
        #expect(!machine.holdsUnsavedWrites)
        _ = machine.handle(.wrote(0..<1))
        #expect(machine.holdsUnsavedWrites && machine.owesFinalUpload)
        _ = machine.handle(.uploadFailed(1))
        #expect(machine.holdsUnsavedWrites && !machine.owesFinalUpload, "failed: the recovery folder has it")
        _ = machine.handle(.unlink)
        #expect(!machine.holdsUnsavedWrites)
    }

    /// `touch` and `> f`: created, nothing since.
    @Test func untouchedSinceCreate() {
        var machine = WriteBack(streamChunk: Self.MiB, emptyAtStart: true)
        _ = machine.handle(.created)
        #expect(machine.untouchedSinceCreate)
        #expect(machine.handle(.truncated(from: 0, to: 0)) == WriteBack.Effects(), "a no-op truncation is no change")
        #expect(machine.untouchedSinceCreate)
        _ = machine.handle(.wrote(0..<1))
        #expect(!machine.untouchedSinceCreate)
    }
}
