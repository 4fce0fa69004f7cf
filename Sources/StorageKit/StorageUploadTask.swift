import Foundation
import Synchronization

/// An upload in progress, as `putData` and `putFile` return it: observe it,
/// pause, resume or cancel it.
///
/// Events: `.resume` when it starts or resumes, `.progress` as bytes are
/// acknowledged (the last one at 100%, before success), `.pause`, then
/// exactly one of `.success` or `.failure` (cancel ends in failure with
/// `StorageError.cancelled`; the snapshot's `error` is a `StorageNSError`).
/// All observers are removed after success or failure.
///
/// An observer receives every event of its status, including those that
/// happened before it was attached: events are recorded and replayed on
/// `observe`, so observing a tiny upload right after creating it never
/// misses its success. Handlers run on the uploader's thread, in order,
/// and all have run when `completion()` returns; keep them short. (Unlike
/// Firebase, not on `storage.callbackQueue`: that queue may be `.main`
/// with nothing serving it, and observers must see every event anyway.
/// The `completion:` handlers of `putData`/`putFile` do run there.)
public final class StorageUploadTask: Sendable {
    public typealias Handler = @Sendable (StorageTaskSnapshot) -> Void

    public let reference: StorageReference

    private enum Phase { case running, paused, cancelled, finished }

    private struct State {
        var phase: Phase = .running
        var observers: [(handle: String, status: StorageTaskStatus, handler: Handler)] = []
        /// Every event so far, for observers attached later. Kept as
        /// events, not snapshots: a snapshot holds its task, so recording
        /// snapshots here would make each task own itself and never be
        /// freed (with its uploader and its worker's task memory).
        var history: [Event] = []
        /// The run in flight; nil once the upload is over, so the finished
        /// Task's memory goes with it.
        var worker: Task<Void, Never>?
        var outcome: Result<StorageMetadata, any Error>?
        var waiters: [CheckedContinuation<StorageMetadata, any Error>] = []
        var nextHandle = 0
    }

    /// One recorded event: a snapshot without its task.
    private struct Event {
        let status: StorageTaskStatus
        let completed: Int64
        let metadata: StorageMetadata?
        let error: (any Error)?
    }

    private let state = Mutex(State())
    private let uploader: Uploader

    init(reference: StorageReference, uploader: Uploader) {
        self.reference = reference
        self.uploader = uploader
    }

    /// The URI of the upload's resumable session once it has started (nil
    /// for uploads small enough for one multipart request). Saved when an
    /// upload is paused, it lets another process go on with
    /// `StorageReference.putFile(from:metadata:ifGenerationMatch:resumingSession:)`.
    public var resumableSessionURI: String? { uploader.sessionURI }

    /// Starts the upload; called once by `putData`/`putFile`.
    func start() {
        launchWorker()
    }

    /// Ends a task that could not start.
    func fail(_ error: any Error) {
        finish(.failure(error))
    }

    // MARK: observers

    /// Calls `handler` for every event of `status`; returns a handle for
    /// `removeObserver(withHandle:)`.
    @discardableResult
    public func observe(_ status: StorageTaskStatus, handler: @escaping Handler) -> String {
        let (handle, past) = state.withLock { s -> (String, [Event]) in
            s.nextHandle += 1
            let handle = "observer-\(s.nextHandle)"
            if s.phase != .finished { s.observers.append((handle, status, handler)) }
            return (handle, s.history.filter { $0.status == status })
        }
        past.map(snapshot(of:)).forEach(handler)
        return handle
    }

    public func removeObserver(withHandle handle: String) {
        state.withLock { $0.observers.removeAll { $0.handle == handle } }
    }

    public func removeAllObservers(for status: StorageTaskStatus) {
        state.withLock { $0.observers.removeAll { $0.status == status } }
    }

    public func removeAllObservers() {
        state.withLock { $0.observers.removeAll() }
    }

    /// The latest event.
    public var snapshot: StorageTaskSnapshot {
        state.withLock { $0.history.last }.map(snapshot(of:)) ?? StorageTaskSnapshot(
            task: self, status: .unknown, completed: 0, total: uploader.total)
    }

    private func snapshot(of event: Event) -> StorageTaskSnapshot {
        StorageTaskSnapshot(
            task: self, status: event.status, completed: event.completed, total: uploader.total,
            metadata: event.metadata, error: event.error)
    }

    // MARK: control

    /// Stops sending; `resume()` continues from the offset the server
    /// acknowledged (a small multipart upload starts over).
    public func pause() {
        let worker = state.withLock { s -> Task<Void, Never>? in
            guard s.phase == .running else { return nil }
            s.phase = .paused
            return s.worker
        }
        worker?.cancel()
    }

    public func resume() {
        let resumed = state.withLock { s -> Bool in
            guard s.phase == .paused else { return false }
            s.phase = .running
            return true
        }
        guard resumed else { return }
        launchWorker()
    }

    /// Ends the upload with `StorageError.cancelled`.
    public func cancel() {
        let (worker, wasPaused) = state.withLock { s -> (Task<Void, Never>?, Bool) in
            guard s.phase == .running || s.phase == .paused else { return (nil, false) }
            let wasPaused = s.phase == .paused
            s.phase = .cancelled
            return (s.worker, wasPaused)
        }
        if wasPaused {
            finish(.failure(StorageError.cancelled))
            Task { await uploader.abandon() }
        } else {
            worker?.cancel()
        }
    }

    /// Waits for the end of the upload: its metadata, or the error.
    /// Cancelling the waiting task cancels the upload.
    public func completion() async throws -> StorageMetadata {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let outcome = state.withLock { s -> Result<StorageMetadata, any Error>? in
                    if s.outcome == nil { s.waiters.append(continuation) }
                    return s.outcome
                }
                if let outcome { continuation.resume(with: outcome) }
            }
        } onCancel: {
            cancel()
        }
    }

    // MARK: internals

    /// Runs the uploader on a new task, after the previous one (a paused
    /// run still unwinding) has ended, so two runs never overlap.
    private func launchWorker() {
        state.withLock { s in
            let previous = s.worker
            s.worker = Task { [self] in
                await previous?.value
                // pause() or cancel() may have come while the previous run
                // was unwinding: then this run never starts.
                switch state.withLock({ $0.phase }) {
                case .running: break
                case .paused: return emit(.pause)
                case .cancelled: return await abandonCancelled()
                case .finished: return
                }
                emit(.resume)
                do {
                    let metadata = try await uploader.run { [self] completed in
                        emit(.progress, completed: completed)
                    }
                    finish(.success(metadata))
                } catch {
                    if state.withLock({ $0.phase }) == .cancelled {
                        await abandonCancelled()
                    } else if Task.isCancelled {
                        // Stopped by pause(). The phase may already be
                        // .running again: a resume() right after the pause
                        // has queued the next run behind this one.
                        emit(.pause)
                    } else {
                        finish(.failure(error))
                    }
                }
            }
        }
    }

    /// Ends a cancelled upload and drops its session on the server. The
    /// cancel request goes out from a task of its own: this one is
    /// cancelled, and the transport sends nothing for a cancelled task.
    private func abandonCancelled() async {
        finish(.failure(StorageError.cancelled))
        await Task { await uploader.abandon() }.value
    }

    /// Records and delivers an event. Once the outcome is decided only
    /// `finish` emits (its last progress and the success or failure), so
    /// the final snapshot is always the outcome.
    private func emit(
        _ status: StorageTaskStatus, completed: Int64? = nil, metadata: StorageMetadata? = nil, error: (any Error)? = nil,
        finishing: Bool = false
    ) {
        let event = Event(status: status, completed: completed ?? uploader.acknowledged, metadata: metadata, error: error)
        let handlers = state.withLock { s -> [Handler] in
            guard finishing || s.outcome == nil else { return [] }
            s.history.append(event)
            return s.observers.filter { $0.status == status }.map(\.handler)
        }
        guard !handlers.isEmpty else { return }
        let snapshot = snapshot(of: event)
        handlers.forEach { $0(snapshot) }
    }

    private func finish(_ outcome: Result<StorageMetadata, any Error>) {
        let first = state.withLock { s -> Bool in
            guard s.outcome == nil else { return false }
            s.outcome = outcome
            return true
        }
        guard first else { return }
        switch outcome {
        case .success(let metadata):
            // Progress observers see 100% before success (the transport's
            // progress is throttled and may stop short of the last byte).
            let reported = state.withLock { $0.history.last { $0.status == .progress }?.completed }
            if uploader.total > 0, reported != uploader.total {
                emit(.progress, completed: uploader.total, finishing: true)
            }
            emit(.success, completed: uploader.total, metadata: metadata, finishing: true)
        case .failure(let error):
            emit(.failure, error: error, finishing: true)
        }
        let waiters = state.withLock { s -> [CheckedContinuation<StorageMetadata, any Error>] in
            s.phase = .finished
            s.observers.removeAll()
            s.worker = nil
            defer { s.waiters.removeAll() }
            return s.waiters
        }
        waiters.forEach { $0.resume(with: outcome) }
    }
}
