import Foundation
import FSCore
import FuseBridge
import Logging

/// Mounts, reports readiness, runs the FUSE loop on a thread of its own (a
/// blocked loop must never occupy one of Swift's few cooperative threads),
/// and tears down when the loop ends: after `bucketfs unmount`,
/// fusermount3 -u, SIGTERM, SIGINT or SIGHUP (see `MountWatch`).
struct MountRunner {
    let filesystem: any FileSystemOperations
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
        let watch = MountWatch(session: session, mountpoint: mountpoint, logger: logger) {
            await Self.uploadPending(filesystem, logger)
        }
        logger.info("mounted", metadata: ["mountpoint": "\(mountpoint)", "options": "\(fuseOptions.joined(separator: ","))"])
        if let readyFD { ReadyPipe.report(fd: readyFD, ready: true) }

        let status: Int32 = await withCheckedContinuation { continuation in
            let thread = Thread {
                let rc = (try? session.run()) ?? -1
                continuation.resume(returning: rc)
            }
            thread.name = "bucketfs-fuse-loop"
            thread.start()
            watch.start()
        }
        session.close()
        await Self.uploadPending(filesystem, logger)
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
