import Foundation

/// The retries one operation has left under a `RetryPolicy`: how many
/// attempts have failed and since when. Each request (and each resumable
/// upload) keeps its own, so a failing request never delays an unrelated
/// one: there is no backoff shared across requests.
///
///     var budget = RetryBudget(policy: policy)
///     while true {
///         do { return try await attempt() } catch where retryable {
///             guard let delay = budget.nextDelay() else { throw error }
///             try await Task.sleep(for: delay)
///         }
///     }
public struct RetryBudget: Sendable {
    public let policy: RetryPolicy
    /// Failed attempts since the start (or the last `reset`).
    public private(set) var failures = 0
    private var started: ContinuousClock.Instant
    private let jitter: @Sendable () -> Double

    public init(policy: RetryPolicy, jitter: @escaping @Sendable () -> Double = { Double.random(in: 0..<1) }) {
        self.policy = policy
        self.jitter = jitter
        self.started = ContinuousClock.now
    }

    /// Time since the start (or the last `reset`).
    public var elapsed: Duration { ContinuousClock.now - started }

    /// Records a failed attempt; returns how long to wait before the next
    /// one, or nil once the attempts or the total time are spent.
    public mutating func nextDelay() -> Duration? {
        failures += 1
        let delay = policy.delay(beforeRetry: failures - 1, jitter: jitter())
        guard failures < policy.maxAttempts, elapsed + delay <= policy.totalTimeout else { return nil }
        return delay
    }

    /// Progress was made: the next failure starts a fresh budget.
    public mutating func reset() {
        failures = 0
        started = ContinuousClock.now
    }
}
