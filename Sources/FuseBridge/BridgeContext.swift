import FSCore
import Foundation
import Logging
import Synchronization

/// What every trampoline needs: the filesystem to forward to, the logger,
/// and the count of requests whose reply Task has not finished yet.
///
/// Lifetime: `FuseSession` keeps one +1 reference through
/// `Unmanaged.passRetained` (the userdata of fuse_session_new, read back
/// with `fuse_req_userdata` and in init/destroy) and releases it in
/// `close()`. Each reply Task also holds a strong reference while it runs.
/// All stored properties are immutable or atomic, so it is `Sendable`.
final class BridgeContext: Sendable {
    let filesystem: any FileSystemOperations
    let logger: Logger
    /// The `max_read=` mount option, if any; `init` must set the same value
    /// in `conn.max_read` or libfuse refuses the connection.
    let maxRead: UInt32?
    private let inFlight = Atomic<Int>(0)

    init(filesystem: any FileSystemOperations, logger: Logger, maxRead: UInt32?) {
        self.filesystem = filesystem
        self.logger = logger
        self.maxRead = maxRead
    }

    func requestStarted() { inFlight.add(1, ordering: .relaxed) }
    func requestFinished() { inFlight.subtract(1, ordering: .releasing) }
    var requestsInFlight: Int { inFlight.load(ordering: .acquiring) }

    /// Waits until every reply Task has answered; false after `timeout`.
    /// A reply touches the libfuse session, so it must not be destroyed
    /// while one is still pending.
    func waitForRequestsToFinish(timeout: Duration) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: timeout)
        while requestsInFlight > 0 {
            if clock.now >= deadline { return false }
            usleep(1_000)
        }
        return true
    }

    /// The context behind a libfuse userdata pointer. Unretained: the
    /// session's +1 keeps it alive for as long as libfuse can call us.
    static func from(_ userdata: UnsafeMutableRawPointer?) -> BridgeContext {
        Unmanaged<BridgeContext>.fromOpaque(userdata!).takeUnretainedValue()
    }
}
