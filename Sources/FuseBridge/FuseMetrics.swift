import CoreMetrics
import FSCore
import Foundation

/// FUSE request metrics through swift-metrics (a no-op unless the process
/// bootstrapped a backend):
///
/// - `bucketfs_fuse_request_duration_seconds{operation}`: from the callback
///   to the reply, per operation (lookup, read, write, flush…).
/// - `bucketfs_fuse_errors_total{operation, errno}`: requests answered with
///   an error, by errno name (ENOENT, EIO…: `ErrnoCode.name`, from the
///   same table that chose the errno).
///
/// Metric objects are made once per label set and kept.
final class FuseMetrics: Sendable {
    private let timers = OrderedLock<[String: CoreMetrics.Timer]>("request timers", [:])
    private let errors = OrderedLock<[String: Counter]>("error counters", [:])

    /// The metric kept for `key`, made on first use. It is made outside
    /// the lock, since the metrics backend takes locks of its own; of two
    /// made at once, the first one stored is kept.
    private static func metric<Metric: Sendable>(_ key: String, in table: OrderedLock<[String: Metric]>, make: () -> Metric) -> Metric {
        if let kept = table.withLock({ $0[key] }) { return kept }
        let made = make()
        return table.withLock { table in
            if let kept = table[key] { return kept }
            table[key] = made
            return made
        }
    }

    func recordRequest(_ operation: StaticString, since start: ContinuousClock.Instant) {
        let name = "\(operation)"
        let timer = Self.metric(name, in: timers) {
            CoreMetrics.Timer(label: "bucketfs_fuse_request_duration_seconds", dimensions: [("operation", name)])
        }
        let elapsed = ContinuousClock.now - start
        timer.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    func recordError(_ operation: StaticString, errno: ErrnoCode) {
        let key = "\(operation) \(errno.name)"
        let counter = Self.metric(key, in: errors) {
            Counter(
                label: "bucketfs_fuse_errors_total",
                dimensions: [("operation", "\(operation)"), ("errno", errno.name)])
        }
        counter.increment()
    }
}
