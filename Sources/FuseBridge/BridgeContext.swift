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
    /// The kernel's read-ahead window to set for this mount, in KiB (nil:
    /// leave the kernel's 128 KiB), and where the mount is.
    let kernelReadAheadKiB: Int?
    let mountpoint: String
    /// Whether this kernel drops the pages other handles cached for a
    /// range a direct-I/O write covers (set at FUSE_INIT): only then may a
    /// handle bypass the page cache (`OpenReply.directIO`), or a reader
    /// open beside it could read its cached bytes of that range after the
    /// write. Linux 6.6 added that invalidation (commit 80e4f25262f9,
    /// "fuse: invalidate page cache pages before direct write", in
    /// `fuse_direct_io`), with FUSE protocol 7.39; older kernels keep every
    /// handle on the page cache. MountTests' `writeOnlyHandlesBypassThePageCache`
    /// checks it on the kernel the tests run on.
    private let directIOKeepsReadersCoherent = Atomic<Bool>(false)
    static let directIOCoherentFromMinor: UInt32 = 39
    private let inFlight = Atomic<Int>(0)
    private let tuned = Atomic<Bool>(false)
    private let lastRequestID = Atomic<UInt64>(0)
    let metrics = FuseMetrics()
    /// Requests the kernel may interrupt, and the Tasks serving them.
    let interrupts = InterruptibleRequests()

    /// Whether an open may ask for direct I/O (`directIOKeepsReadersCoherent`).
    var allowsDirectIO: Bool { directIOKeepsReadersCoherent.load(ordering: .relaxed) }

    /// Records the kernel's FUSE protocol minor version from FUSE_INIT.
    func kernelSpeaks(minor: UInt32) {
        directIOKeepsReadersCoherent.store(minor >= Self.directIOCoherentFromMinor, ordering: .relaxed)
    }

    /// A number for each request, in the logs of everything it causes
    /// (`Caller.requestID`).
    func nextRequestID() -> UInt64 { lastRequestID.add(1, ordering: .relaxed).newValue }

    /// Read-ahead requests the kernel may have in flight at once.
    static let maxBackground: UInt32 = 64

    init(filesystem: any FileSystemOperations, logger: Logger, maxRead: UInt32?, kernelReadAheadKiB: Int? = nil, mountpoint: String = "") {
        self.filesystem = filesystem
        self.logger = logger
        self.maxRead = maxRead
        self.kernelReadAheadKiB = kernelReadAheadKiB
        self.mountpoint = mountpoint
    }

    /// Called for every request: the first one after FUSE_INIT sets the
    /// mount's read-ahead window. Not in `init` itself: the kernel applies
    /// INIT's answer (which can only lower the window) after the callback
    /// returns, and sends no other request before it has.
    func requestArrived() {
        guard kernelReadAheadKiB != nil, !tuned.load(ordering: .relaxed),
            tuned.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged
        else { return }
        setKernelReadAhead()
    }

    /// Writes `/sys/class/bdi/MAJOR:MINOR/read_ahead_kb` of this mount (the
    /// device from /proc/self/mountinfo, so no request to ourselves). The
    /// window is how far the kernel reads ahead of a sequential reader, and
    /// so how many 1 MiB read requests it keeps in flight; 128 KiB (its
    /// default) caps a FUSE file at one 128 KiB request at a time per
    /// reader. Only root may write it; otherwise it stays and a debug line
    /// says so (gcsfuse documents the same setting).
    private func setKernelReadAhead() {
        guard let kib = kernelReadAheadKiB, let device = MountTable.entry(mountpoint: mountpoint)?.device else { return }
        let path = "/sys/class/bdi/\(device)/read_ahead_kb"
        let fd = open(path, O_WRONLY | O_CLOEXEC)
        let text = "\(kib)\n"
        let written = fd >= 0 ? text.withCString { write(fd, $0, strlen($0)) } : -1
        let code = errno
        if fd >= 0 { close(fd) }
        if written == text.utf8.count {
            logger.debug("kernel read-ahead set", metadata: ["bdi": "\(device)", "KiB": "\(kib)"])
        } else {
            logger.debug("kernel read-ahead not set", metadata: ["path": "\(path)", "errno": "\(code)"])
        }
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
