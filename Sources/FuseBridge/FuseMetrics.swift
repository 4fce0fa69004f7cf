import CoreMetrics
import FSCore
import Foundation
import Synchronization

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
    private let timers = Mutex<[String: CoreMetrics.Timer]>([:])
    private let errors = Mutex<[String: Counter]>([:])

    func recordRequest(_ operation: StaticString, since start: ContinuousClock.Instant) {
        let name = "\(operation)"
        let timer = timers.withLock { timers in
            if let timer = timers[name] { return timer }
            let timer = CoreMetrics.Timer(label: "bucketfs_fuse_request_duration_seconds", dimensions: [("operation", name)])
            timers[name] = timer
            return timer
        }
        let elapsed = ContinuousClock.now - start
        timer.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
    }

    func recordError(_ operation: StaticString, errno: ErrnoCode) {
        let key = "\(operation) \(errno.name)"
        let counter = errors.withLock { errors in
            if let counter = errors[key] { return counter }
            let counter = Counter(
                label: "bucketfs_fuse_errors_total",
                dimensions: [("operation", "\(operation)"), ("errno", errno.name)])
            errors[key] = counter
            return counter
        }
        counter.increment()
    }
}
