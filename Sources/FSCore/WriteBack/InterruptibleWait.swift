import Synchronization

/// The result of `task`, awaited by a caller that may be interrupted.
///
/// `task` is unstructured (an upload owned by the file, not by the close
/// that waits for it), so cancelling the waiting Task does not end it, and
/// a plain `await task.value` would not end either: a close blocked on an
/// upload during an outage could not be interrupted. Here the wait ends at
/// once when the waiting Task is cancelled (nil), while `task` runs on and
/// keeps the file's bytes on their way.
func interruptibleValue<Success: Sendable>(of task: Task<Success, Never>) async -> Success? {
    let waiter = InterruptibleWaiter<Success>()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { (continuation: CheckedContinuation<Success?, Never>) in
            guard waiter.wait(continuation) else { return }
            Task { waiter.answer(await task.value) }
        }
    } onCancel: {
        waiter.cancel()
    }
}

/// Who answers the waiter: the first of the result and the cancellation.
private final class InterruptibleWaiter<Success: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<Success?, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    /// Keeps `continuation` to answer later; false (answered nil at once)
    /// if the wait was cancelled already.
    func wait(_ continuation: CheckedContinuation<Success?, Never>) -> Bool {
        let cancelled = state.withLock { s -> Bool in
            if !s.cancelled { s.continuation = continuation }
            return s.cancelled
        }
        if cancelled { continuation.resume(returning: nil) }
        return !cancelled
    }

    func answer(_ value: Success?) {
        state.withLock { s -> CheckedContinuation<Success?, Never>? in
            defer { s.continuation = nil }
            return s.continuation
        }?.resume(returning: value)
    }

    func cancel() {
        state.withLock { $0.cancelled = true }
        answer(nil)
    }
}
