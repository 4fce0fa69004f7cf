#if canImport(Glibc)
import Glibc
#endif

/// Where every event of a staged file goes to its `WriteBack` machine, and
/// the one place its effects are run, in two steps:
/// - under the file system's lock, in the same critical section as the
///   event: the Tasks a waiter must find are created there, never awaited,
///   and handed to the machine, which holds them in the phase they belong
///   to (the stream's start and sends, which an upload waits for; the
///   upload a second flush joins is made by `upload` the same way); the
///   session a dropped stream leaves is abandoned; the journal of a file
///   that became clean is removed (a write racing it re-creates it after,
///   not before);
/// - after the lock: the journal is written (it reads the inode's path
///   and the upload's metadata, and writes a file).
extension WriteBackStore {
    /// A change to the staged state made with the event, in its critical
    /// section, after the machine answered and before the effects run (the
    /// stream's Tasks see it).
    typealias Change = (inout StagedFile.State, WriteBack.Effects) -> Void

    /// What the first step left for after the lock.
    struct AfterLock: Sendable {
        var actions: [WriteBack.Action] = []
        var inode: UInt64?
    }

    /// Tells `staged`'s machine `event` and runs the effects; returns the
    /// machine's answer.
    @discardableResult
    func handle(_ event: WriteBack.Event, of staged: StagedFile, change: Change = { _, _ in }) -> WriteBack.Answer {
        handle({ _ in event }, of: staged, change: change)
    }

    /// `handle` of an event made from the state (nil: nothing to tell).
    @discardableResult
    func handle(_ event: (StagedFile.State) -> WriteBack.Event?, of staged: StagedFile, change: Change = { _, _ in }) -> WriteBack.Answer {
        let (answer, later) = state.withLock { s in underLock(event, staged, &s, change) }
        afterLock(later, staged)
        return answer
    }

    /// `handle` for a caller that holds the file system's lock (`s` is its
    /// value): attach, adopt, retire and unlink, whose effects are all of
    /// the first step.
    @discardableResult
    func handle(
        _ event: WriteBack.Event, of staged: StagedFile, in s: inout FileSystem.State, change: Change = { _, _ in }
    ) -> WriteBack.Answer {
        let (answer, later) = underLock({ _ in event }, staged, &s, change)
        assert(later.actions.isEmpty, "\(event) left \(later.actions) for after a lock its caller holds")
        return answer
    }

    /// The first step: the event, the caller's change, and the effects
    /// that must happen in this critical section.
    private func underLock(
        _ event: (StagedFile.State) -> WriteBack.Event?, _ staged: StagedFile, _ s: inout FileSystem.State, _ change: Change
    ) -> (WriteBack.Answer, AfterLock) {
        let inode = s.staged.inode(of: staged.id)
        return staged.withState(in: &s) { state in
            guard let event = event(state) else { return (.none, AfterLock()) }
            let effects = state.writeBack.handle(event)
            change(&state, effects)
            var later = AfterLock(inode: inode)
            // A session that left the machine (dropped, or the file retired).
            if let session = effects.abandoned { Task { await session.put.abandon() } }
            for action in effects.actions {
                switch action {
                case .startStream:
                    let options = Self.uploadOptions(state)
                    let written = state.writeBack.sequentialEnd ?? 0
                    let task = Task { await self.startStream(staged, inode: inode, options: options, written: written) }
                    _ = state.writeBack.handle(.launched(.streamStart(task)))
                case .sendStream(let end):
                    guard let session = state.writeBack.streamSession else { continue }
                    let task = Task { await self.send(session, upTo: end, of: staged) }
                    _ = state.writeBack.handle(.launched(.send(task)))
                case .abandonStream:
                    // `effects.abandoned`, above.
                    break
                case .removeJournal:
                    Glibc.unlink(staged.journalPath)
                case .writeJournal:
                    later.actions.append(action)
                }
            }
            return (effects.answer, later)
        }
    }

    /// The second step, after the lock.
    private func afterLock(_ later: AfterLock, _ staged: StagedFile) {
        for action in later.actions {
            switch action {
            case .writeJournal: if let inode = later.inode { writeJournal(staged, inode: inode) }
            case .startStream, .sendStream, .abandonStream, .removeJournal:
                preconditionFailure("\(action) runs under the lock")
            }
        }
    }
}
