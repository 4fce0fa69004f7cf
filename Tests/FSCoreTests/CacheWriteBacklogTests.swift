import Testing
@testable import FSCore

@Suite("cache write backlog: when reads wait for the block cache's writer")
struct CacheWriteBacklogTests {
    /// One step of a table: an event and what the machine answers.
    enum Step {
        /// A buffer offered to the writer; whether it is queued.
        case offered(Int, queued: Bool)
        /// Read `id` asks to reply; whether it waits.
        case read(UInt64, waits: Bool)
        /// The writer finished a buffer; the reads it resumes.
        case written(Int, resumes: [UInt64])
        /// Wait `id` timed out; the reads it resumes.
        case timedOut(UInt64, resumes: [UInt64])
        /// Read `id` was interrupted; whether it was still waiting.
        case cancelled(UInt64, wasWaiting: Bool)
    }

    /// Reads wait above 10 queued bytes; buffers are dropped above 20.
    @Test(arguments: [
        // Under the lower bound nobody waits.
        [.offered(10, queued: true), .read(1, waits: false)],
        // Above it the read waits; a write that leaves the writer still too
        // far behind resumes nobody, the one that brings it under does.
        [.offered(8, queued: true), .offered(8, queued: true), .read(1, waits: true), .read(2, waits: true),
         .written(4, resumes: []), .written(8, resumes: [1, 2]), .read(3, waits: false)],
        // Between the bounds a held reader's downloads still land; past
        // the upper bound a buffer is dropped, and one that fits is not.
        [.offered(15, queued: true), .offered(5, queued: true), .offered(1, queued: false),
         .written(15, resumes: []), .offered(1, queued: true)],
        // A wait that times out ends every wait and marks the writer
        // stalled: reads go on until it finishes something again.
        [.offered(16, queued: true), .read(1, waits: true), .read(2, waits: true), .timedOut(1, resumes: [1, 2]),
         .read(3, waits: false), .timedOut(1, resumes: []), .written(1, resumes: []), .read(4, waits: true)],
        // An interrupted read leaves the others waiting.
        [.offered(16, queued: true), .read(1, waits: true), .read(2, waits: true), .cancelled(1, wasWaiting: true),
         .cancelled(1, wasWaiting: false), .written(16, resumes: [2]), .cancelled(2, wasWaiting: false)],
        // A timer that fires after the write resumed its read ends nothing.
        [.offered(16, queued: true), .read(1, waits: true), .written(16, resumes: [1]), .timedOut(1, resumes: []),
         .offered(16, queued: true), .read(2, waits: true)],
    ] as [[Step]])
    func readsWaitOnlyWhileTheWriterIsFarBehind(steps: [Step]) {
        var backlog = CacheWriteBacklog(readsWaitAbove: 10, dropAbove: 20)
        for (number, step) in steps.enumerated() {
            switch step {
            case .offered(let bytes, let queued):
                #expect(backlog.offered(bytes) == queued, "step \(number)")
            case .read(let id, let waits):
                #expect(backlog.readArrived(id) == waits, "step \(number)")
            case .written(let bytes, let resumes):
                #expect(backlog.written(bytes) == resumes, "step \(number)")
            case .timedOut(let id, let resumes):
                #expect(backlog.timedOut(id) == resumes, "step \(number)")
            case .cancelled(let id, let wasWaiting):
                #expect(backlog.cancelled(id) == wasWaiting, "step \(number)")
            }
        }
        #expect(backlog.queuedBytes >= 0)
    }

    @Test func theLowerBoundNeverExceedsTheUpper() {
        let backlog = CacheWriteBacklog(readsWaitAbove: 30, dropAbove: 20)
        #expect(backlog.readsWaitAbove == 20)
    }
}
