import CoreMetrics
import Foundation
import Synchronization

/// FUSE request metrics through swift-metrics (a no-op unless the process
/// bootstrapped a backend):
///
/// - `bucketfs_fuse_request_duration_seconds{operation}`: from the callback
///   to the reply, per operation (lookup, read, write, flush…).
/// - `bucketfs_fuse_errors_total{operation, errno}`: requests answered with
///   an error, by errno name (ENOENT, EIO…).
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

    func recordError(_ operation: StaticString, errno: Int32) {
        let key = "\(operation) \(errno)"
        let counter = errors.withLock { errors in
            if let counter = errors[key] { return counter }
            let counter = Counter(
                label: "bucketfs_fuse_errors_total",
                dimensions: [("operation", "\(operation)"), ("errno", ErrnoName.of(errno))])
            errors[key] = counter
            return counter
        }
        counter.increment()
    }
}

/// Symbolic errno names for labels and logs.
enum ErrnoName {
    static func of(_ code: Int32) -> String {
        let known: [Int32: String] = [
            EPERM: "EPERM", ENOENT: "ENOENT", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN", ENOMEM: "ENOMEM",
            EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST", EXDEV: "EXDEV", ENOTDIR: "ENOTDIR", EISDIR: "EISDIR",
            EINVAL: "EINVAL", EFBIG: "EFBIG", ENOSPC: "ENOSPC", EROFS: "EROFS", ERANGE: "ERANGE",
            ENAMETOOLONG: "ENAMETOOLONG", ENOSYS: "ENOSYS", ENOTEMPTY: "ENOTEMPTY", ENODATA: "ENODATA",
            ENOTSUP: "ENOTSUP", ESTALE: "ESTALE", EINTR: "EINTR", ETIMEDOUT: "ETIMEDOUT", E2BIG: "E2BIG",
        ]
        return known[code] ?? "E\(code)"
    }
}
