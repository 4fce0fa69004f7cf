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
    /// A directory, or `/dev/fd/N` for a mount the caller made (`FuseDescriptor`).
    let mountpoint: String
    /// The mount's directory (absolute) for the control socket, the watch
    /// and the logs: `mountpoint` itself, or for `/dev/fd/N` the directory
    /// given with --mounted-on (else `/dev/fd/N` again: no control socket).
    let directory: String
    let fuseOptions: [String]
    let debug: Bool
    let readyFD: Int32?
    let logger: Logger
    var kernelReadAheadKiB: Int?

    func run() async throws {
        filesystem.prefillReadBuffers()
        let session: FuseSession
        do {
            session = try FuseSession(
                filesystem: filesystem, mountpoint: mountpoint, options: fuseOptions, debug: debug, logger: logger,
                kernelReadAheadKiB: kernelReadAheadKiB, directory: directory)
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
        let ownsMount = FuseDescriptor.number(inMountpoint: mountpoint) == nil
        var control: ControlServer?
        if directory.hasPrefix("/dev/fd/") {
            logger.notice("no control socket (bucketfs status) for a /dev/fd/N mount without --mounted-on DIR")
        } else {
            do {
                let server = try ControlServer(
                    path: ControlSocketPath.socket(forMountpoint: directory),
                    status: { description.report(filesystem.status()) }, dropCaches: dropCaches, logger: logger)
                try await server.start()
                control = server
            } catch {
                session.close()
                throw CLIError.bucket("cannot open the control socket for \(directory): \(error)", exitCode: 5)
            }
        }
        let watch = MountWatch(session: session, mountpoint: directory, ownsMount: ownsMount, logger: logger, reload: {
            systemd.send("RELOADING=1")
            _ = dropCaches()
            systemd.send("READY=1")
        }) { [control] in
            await Self.uploadPending(filesystem, logger)
            // The process exits right after: no socket file left behind.
            await control?.stop()
        }
        logger.info("mounted", metadata: ["mountpoint": "\(directory)", "device": "\(mountpoint)", "options": "\(fuseOptions.joined(separator: ","))"])
        if let readyFD { ReadyPipe.report(fd: readyFD, ready: true) }
        systemd.send("READY=1\n\(SystemdNotify.mainPID())\nSTATUS=mounted gs://\(description.bucket)/\(description.prefix) on \(directory)")

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
        await control?.stop()
        session.close()
        await Self.uploadPending(filesystem, logger)
        // Blocks read just before the unmount are still being written to
        // the cache directory; the next mount should find them.
        await filesystem.finishCacheWrites()
        logger.info("unmounted", metadata: ["mountpoint": "\(directory)", "loop": "\(status)"])
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
