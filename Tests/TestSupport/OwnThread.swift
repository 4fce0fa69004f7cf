import Foundation
import Synchronization
import Testing

/// A trait for suites whose tests burn seconds of CPU without suspending
/// (`@Suite(.ownThread)`): their code runs on one thread kept for them,
/// not on Swift's cooperative pool.
///
/// Why: swift test runs every test of the process side by side on the
/// cooperative pool, which on Linux has one thread per core. A test that
/// computes for seconds without an `await` holds a pool thread all that
/// time; on a two-core machine two such tests hold the whole pool, and
/// every other test's next step, a timer's end included, waits behind
/// them. The command line's tests are such tests in a debug build:
/// ArgumentParser re-checks the whole command tree on every parse there
/// (its validators run under `#if DEBUG`), and they parse hundreds of
/// command lines. Held so, the timing tests (a 100 ms timer in the block
/// cache, a request body's 1 s wait in the transport) took 27–36 s in a
/// full run. On a thread of their own, the kernel shares the cores
/// between that thread and the pool instead.
public struct OwnThread: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        // Each test case runs under the preference; the suite's own scope
        // (no test case) has nothing of its own to run.
        guard testCase != nil else { return try await function() }
        try await withTaskExecutorPreference(ThreadExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OwnThread {
    /// Runs the suite's tests on a thread of their own (`OwnThread`).
    public static var ownThread: Self { OwnThread() }
}

/// A task executor with one thread that runs its jobs in order. The thread
/// lives as long as the test process: a job may be enqueued at any time,
/// so there is no moment at which it could safely stop.
final class ThreadExecutor: TaskExecutor {
    static let shared = ThreadExecutor()

    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    private init() {
        let thread = Thread { [self] in run() }
        thread.name = "tests-own-thread"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    private func run() {
        while true {
            ready.wait()
            // One signal per enqueued job, so there is one to take.
            let job = jobs.withLock { $0.removeFirst() }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}
