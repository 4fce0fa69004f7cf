import Dispatch
import Foundation
import FSCore
import FuseBridge
import Logging

/// Ends the process's FUSE session when the outside world ends the mount.
///
/// Signals: libfuse's own handlers only set a flag that the loop notices at
/// its next request, so an idle mount would ignore SIGTERM. Here SIGTERM and
/// SIGINT are taken by dispatch sources that stop the session at once
/// (fuse_session_exit + unmount). SIGHUP does not unmount: it runs `reload`
/// (drop the metadata caches), as daemons and systemd's ExecReload expect.
///
/// Detach: after `fusermount3 -uz` (lazy unmount) with a reader blocked on a
/// slow download, the kernel sends nothing more until that reader is
/// answered, so the loop would live on for as long as the network takes. The
/// watch polls /proc/self/mountinfo; once the mount is gone and the loop has
/// not ended within `grace`, the process exits, which closes /dev/fuse and
/// fails the blocked requests; files with unsaved writes are uploaded
/// first (`beforeExit`), or kept in the recovery folder if that fails.
///
/// A `/dev/fd/N` mount (`ownsMount` false) is the caller's to unmount:
/// libfuse cannot end its loop by unmounting, so a signal ends the process
/// at once (after the unsaved writes, as above) and the kernel then fails
/// the mount's requests ("Transport endpoint is not connected") until the
/// caller unmounts it. There is no mount table to watch either: a caller's
/// unmount ends the loop as any unmount does.
///
/// `@unchecked Sendable`: every stored property is immutable after init;
/// the dispatch sources are thread-safe objects that are only resumed once,
/// in `start()`.
final class MountWatch: @unchecked Sendable {
    private let session: FuseSession
    private let mountpoint: String
    private let ownsMount: Bool
    private let logger: Logger
    private let grace: Duration
    private let sources: [any DispatchSourceSignal]
    private let beforeExit: @Sendable () async -> Void
    private let reload: @Sendable () -> Void

    init(session: FuseSession, mountpoint: String, ownsMount: Bool = true, logger: Logger, grace: Duration = .seconds(3),
         reload: @escaping @Sendable () -> Void, beforeExit: @escaping @Sendable () async -> Void) {
        self.ownsMount = ownsMount
        self.beforeExit = beforeExit
        self.reload = reload
        self.session = session
        self.mountpoint = MountWatch.absolute(mountpoint)
        self.logger = logger
        self.grace = grace
        var sources: [any DispatchSourceSignal] = []
        for signalNumber in [SIGTERM, SIGINT, SIGHUP] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            sources.append(source)
        }
        self.sources = sources
    }

    /// Starts watching; returns at once.
    func start() {
        for source in sources {
            let number = source.handle
            source.setEventHandler { [self] in
                if number == UInt(SIGHUP) {
                    logger.info("SIGHUP: dropping the metadata caches", metadata: ["mountpoint": "\(mountpoint)"])
                    reload()
                    return
                }
                logger.info("signal received: unmounting", metadata: ["signal": "\(number)", "mountpoint": "\(mountpoint)"])
                session.stop()
                endIfStillRunning(after: ownsMount ? grace : .zero, reason: "signal \(number)")
            }
            source.resume()
        }
        if ownsMount { Thread.detachNewThread { [self] in watchMountTable() } }
    }

    private func watchMountTable() {
        var device: String?
        while true {
            let entry = Self.mountEntry(at: mountpoint)
            if let entry { device = device ?? entry }
            if let device, entry != device {
                logger.info("the mount was detached (lazy unmount?)", metadata: ["mountpoint": "\(mountpoint)"])
                session.stop()
                endIfStillRunning(after: grace, reason: "mount detached")
                return
            }
            Thread.sleep(forTimeInterval: 1)
        }
    }

    private func endIfStillRunning(after grace: Duration, reason: String) {
        DispatchQueue.global().asyncAfter(deadline: .now() + grace.seconds) { [self] in
            if ownsMount, Self.mountEntry(at: mountpoint) != nil {
                // Still mounted (busy): detach it so that the exit below
                // does not leave a dead mount behind.
                let detach = Process()
                detach.executableURL = URL(fileURLWithPath: "/usr/bin/fusermount3")
                detach.arguments = ["-uz", mountpoint]
                try? detach.run()
                detach.waitUntilExit()
            }
            if ownsMount {
                logger.warning("FUSE loop still busy \(grace) after \(reason): exiting", metadata: ["mountpoint": "\(mountpoint)"])
            } else {
                logger.info("\(reason): no longer serving; the unmount is the caller's", metadata: ["mountpoint": "\(mountpoint)"])
            }
            let done = DispatchSemaphore(value: 0)
            Task { [beforeExit] in
                await beforeExit()
                done.signal()
            }
            done.wait()
            exit(0)
        }
    }

    /// The `major:minor` of the FUSE mount on `mountpoint`, if mounted.
    static func mountEntry(at mountpoint: String) -> String? {
        MountTable.entries().first { $0.mountpoint == mountpoint && $0.type.hasPrefix("fuse") }?.device
    }

    static func absolute(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}

extension MountTable {
    /// Mountpoints of the bucketfs mounts.
    static func bucketfsMountpoints() -> [String] {
        entries().filter { $0.type == "fuse.bucketfs" }.map(\.mountpoint)
    }
}
