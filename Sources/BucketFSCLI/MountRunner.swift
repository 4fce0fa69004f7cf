import Foundation
import FSCore
import FuseBridge
import Logging

/// Mounts, opens the control socket (`bucketfs status`), reports readiness
/// (ready pipe, systemd), runs the FUSE loop on a thread of its own (a
/// blocked loop must never occupy one of Swift's few cooperative threads),
/// and tears down when the loop ends: after `bucketfs unmount`,
/// fusermount3 -u, SIGTERM or SIGINT (see `MountWatch`). SIGHUP drops the
/// metadata caches.
struct MountRunner {
    let filesystem: FileSystem
    /// What `bucketfs status` shows besides the core's own report.
    let description: MountDescription
    let mountpoint: String
    let fuseOptions: [String]
    let debug: Bool
    let readyFD: Int32?
    let logger: Logger
    var kernelReadAheadKiB: Int?

    func run() async throws {
        let session: FuseSession
        do {
            session = try FuseSession(
                filesystem: filesystem, mountpoint: mountpoint, options: fuseOptions, debug: debug, logger: logger,
                kernelReadAheadKiB: kernelReadAheadKiB)
        } catch {
            throw CLIError.bucket("cannot mount on \(mountpoint): \(error)", exitCode: 5)
        }
        let filesystem = self.filesystem
        let logger = self.logger
        let systemd = SystemdNotify(logger: logger)
        let dropCaches: @Sendable () -> DropCachesReport = {
            let kernel = filesystem.dropMetadataCaches()
            let accepted = session.invalidateKernelCaches(names: kernel.names, inodes: kernel.inodes)
            return DropCachesReport(kernelNames: kernel.names.count, kernelInodes: kernel.inodes.count, kernelAccepted: accepted)
        }
        filesystem.setKernelCacheInvalidator { kernel in
            _ = session.invalidateKernelCaches(names: kernel.names, inodes: kernel.inodes, pages: kernel.pages)
        }
        let description = self.description
        let control: ControlServer
        do {
            control = try ControlServer(
                path: ControlSocketPath.socket(forMountpoint: mountpoint),
                status: { description.report(filesystem.status()) }, dropCaches: dropCaches, logger: logger)
            try await control.start()
        } catch {
            session.close()
            throw CLIError.bucket("cannot open the control socket for \(mountpoint): \(error)", exitCode: 5)
        }
        let watch = MountWatch(session: session, mountpoint: mountpoint, logger: logger, reload: {
            systemd.send("RELOADING=1")
            _ = dropCaches()
            systemd.send("READY=1")
        }) {
            await Self.uploadPending(filesystem, logger)
        }
        logger.info("mounted", metadata: ["mountpoint": "\(mountpoint)", "options": "\(fuseOptions.joined(separator: ","))"])
        if let readyFD { ReadyPipe.report(fd: readyFD, ready: true) }
        systemd.send("READY=1\n\(SystemdNotify.mainPID())\nSTATUS=mounted gs://\(description.bucket)/\(description.prefix) on \(mountpoint)")

        let status: Int32 = await withCheckedContinuation { continuation in
            let thread = Thread {
                let rc = (try? session.run()) ?? -1
                continuation.resume(returning: rc)
            }
            thread.name = "bucketfs-fuse-loop"
            thread.start()
            watch.start()
        }
        systemd.send("STOPPING=1")
        await control.stop()
        session.close()
        await Self.uploadPending(filesystem, logger)
        // Blocks read just before the unmount are still being written to
        // the cache directory; the next mount should find them.
        await filesystem.finishCacheWrites()
        logger.info("unmounted", metadata: ["mountpoint": "\(mountpoint)", "loop": "\(status)"])
    }

    /// Files still open when the mount ends (SIGTERM, a lazy unmount) may
    /// hold unsaved writes: upload them before the process goes.
    static func uploadPending(_ filesystem: any FileSystemOperations, _ logger: Logger) async {
        let failed = await filesystem.flushAll()
        if failed > 0 {
            logger.error("\(failed) file(s) could not be uploaded at unmount; their bytes are in the recovery folder")
        }
    }
}

/// The parts of `bucketfs status` the mount knows and the core does not.
struct MountDescription: Sendable {
    let mountpoint: String
    let bucket: String
    let prefix: String
    let readOnly: Bool
    let cacheDirectory: String
    /// The options in effect (after the config file, environment and flags).
    let settings: [String: String]
    /// Who the mount acts as (`CredentialsProvider.identity`), asked at
    /// every report: a Firebase user is known only after signing in.
    let credentials: @Sendable () -> String
    let startedAt = Date()
    let started = ContinuousClock.now

    func report(_ filesystem: FileSystemStatus) -> MountStatusReport {
        MountStatusReport(
            mountpoint: mountpoint, bucket: bucket, prefix: prefix, pid: getpid(), startedAt: startedAt,
            uptimeSeconds: (ContinuousClock.now - started).seconds, readOnly: readOnly,
            cacheDirectory: cacheDirectory, credentials: credentials(), settings: settings, filesystem: filesystem)
    }
}
