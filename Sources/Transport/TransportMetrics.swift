import CoreMetrics
import Synchronization

/// HTTP metrics through swift-metrics (a no-op unless the process
/// bootstrapped a backend, as `bucketfs mount --metrics-address` does):
///
/// - `bucketfs_http_request_duration_seconds{method, status}`: one sample
///   per attempt, from submission to the last byte; `status` is the HTTP
///   status, or `error` when no response came (connection refused, reset,
///   stalled, cancelled).
/// - `bucketfs_http_retries_total{method}`: attempts that are retried.
///
/// Metric objects are made once per label set and kept, so a request costs
/// a dictionary lookup, not a factory call.
final class TransportMetrics: Sendable {
    static let shared = TransportMetrics()

    private struct Key: Hashable {
        let method: String
        let status: String
    }

    private let timers = Mutex<[Key: CoreMetrics.Timer]>([:])
    private let retries = Mutex<[String: Counter]>([:])

    func recordAttempt(method: String, status: Int?, since start: ContinuousClock.Instant) {
        let key = Key(method: method, status: status.map(String.init) ?? "error")
        let timer = timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = CoreMetrics.Timer(
                label: "bucketfs_http_request_duration_seconds",
                dimensions: [("method", key.method), ("status", key.status)])
            timers[key] = timer
            return timer
        }
        timer.recordInterval(since: start)
    }

    func recordRetry(method: String) {
        let counter = retries.withLock { retries in
            if let counter = retries[method] { return counter }
            let counter = Counter(label: "bucketfs_http_retries_total", dimensions: [("method", method)])
            retries[method] = counter
            return counter
        }
        counter.increment()
    }
}

extension CoreMetrics.Timer {
    /// Records the time from `start` until now.
    public func recordInterval(since start: ContinuousClock.Instant) {
        recordNanoseconds((ContinuousClock.now - start).nanoseconds)
    }
}
