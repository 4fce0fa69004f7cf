import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The one place where store failures become errno values for the kernel.
/// The switch is exhaustive on purpose: a new `StoreError` case must be
/// decided here, not fall into a default.
extension StoreError {
    public var errno: Int32 {
        switch self {
        case .notFound:
            return ENOENT
        case .bucketNotFound:
            // The bucket was there at mount time (the CLI checks it). If it
            // vanishes, ENOENT would make every path look merely absent and
            // invite tools to recreate things; EIO says the mount is broken.
            return EIO
        case .preconditionFailed:
            // Someone else changed the object under us (the generation we
            // pinned or expected is no longer live): NFS's "stale handle".
            return ESTALE
        case .unauthenticated:
            // Missing or expired credentials. EACCES is what tools report as
            // "Permission denied", which points the user at credentials;
            // EPERM would claim the operation itself is never allowed.
            return EACCES
        case .permissionDenied:
            return EACCES
        case .invalidArgument:
            return EINVAL
        case .unavailable:
            // The transport already retried with backoff; this is final.
            return EIO
        case .quotaExceeded:
            // Rate or bandwidth limits (HTTP 429 after retries): transient by
            // nature, so EAGAIN ("try again") rather than EIO, which reads
            // as data loss, or EDQUOT, which means a full disk quota.
            return EAGAIN
        case .cancelled:
            // Only the kernel interrupting a request cancels our work.
            return EINTR
        case .other:
            return EIO
        }
    }
}

extension FSError {
    /// The errno for `error`, with what was being done for the log line.
    public init(_ error: StoreError, _ context: String) {
        self.init(error.errno, "\(context): \(error)")
    }
}

extension FSError {
    /// A wait the caller gave up on (the kernel interrupted the request:
    /// Ctrl-C on a process blocked in close or fsync). EINTR, as for a
    /// cancelled store request: the work waited for goes on.
    static func interrupted(_ context: String) -> FSError {
        FSError(StoreError.cancelled, context)
    }
}
