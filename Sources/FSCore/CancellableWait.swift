import Synchronization

extension Task where Failure == Never {
    /// This task's value, or nil as soon as the task that waits for it is
    /// cancelled (the kernel interrupted its request). The awaited task is
    /// not cancelled and runs to its end: it may be shared (an upload, a
    /// read-ahead download) and its result still matters to others.
    ///
    /// `Task.value` alone does not observe the waiter's cancellation, so
    /// the value is handed over through a continuation that whichever
    /// comes first, the value or the cancellation, resumes (exactly once:
    /// the one that takes it from the box).
    func valueUnlessCancelled() async -> Success? {
        let waiter = WaiterBox<Success?>()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                waiter.set(continuation)
                Task<Void, Never> { waiter.resume(returning: await self.value) }
                // Cancelled before the continuation was stored: the
                // handler below found the box empty.
                if Task<Never, Never>.isCancelled { waiter.resume(returning: nil) }
            }
        } onCancel: {
            waiter.resume(returning: nil)
        }
    }
}

/// A continuation resumed by whichever caller takes it first.
private final class WaiterBox<Value: Sendable>: Sendable {
    private let continuation = OrderedLock<CheckedContinuation<Value, Never>?>("cancellable wait", nil)

    func set(_ continuation: CheckedContinuation<Value, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func resume(returning value: Value) {
        continuation.withLock { $0.take() }?.resume(returning: value)
    }
}
