import FSCore
import Foundation
import GRPCCore
#if canImport(Glibc)
import Glibc
#endif

/// The node's side of a publication: looking at a target, mounting it
/// through `bucketfs fuse-fd-mount`, and unmounting it.
struct TargetMounts: Sendable {
    /// The `bucketfs` executable that runs the mounts.
    let bucketfs: String
    /// The user the mount processes run as (root when not configured).
    let uid: uid_t
    let gid: gid_t
    /// How long a mount may take to come up (credentials, the bucket's
    /// preflight) before the publish fails with DEADLINE_EXCEEDED.
    let mountTimeout: Duration

    /// What is at `target` now, with `record` the publication the driver
    /// wrote there (if any).
    func observe(_ target: String, record: PublicationRecord?) -> TargetLifecycle.Observed {
        guard MountTable.entry(mountpoint: target) != nil else { return .unmounted }
        var info = stat()
        if stat(target, &info) != 0 && errno == ENOTCONN { return .disconnected(record) }
        return .served(record)
    }

    /// Runs `bucketfs fuse-fd-mount` and waits for it: it returns once the
    /// mount serves (bucketfs mount's background start waits for that) or
    /// has failed. `arguments` are `bucketfs mount`'s options.
    func mount(url: String, target: String, readOnly: Bool, arguments: [String]) async throws(RPCError) {
        var command = ["fuse-fd-mount", "--uid", String(uid), "--gid", String(gid)]
        if readOnly { command.append("--read-only") }
        command += [url, target, "--"] + arguments
        let process = Process()
        process.executableURL = URL(fileURLWithPath: bucketfs)
        process.arguments = command
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw RPCError(code: .internalError, message: "cannot run \(bucketfs): \(error)")
        }
        let timeout = Task {
            try await Task.sleep(for: mountTimeout)
            process.terminate()
        }
        // The pipe closes when fuse-fd-mount (then bucketfs mount) exits:
        // the background process it starts gets /dev/null for stderr.
        let output = await Task.detached { errors.fileHandleForReading.readDataToEndOfFile() }.value
        process.waitUntilExit()
        timeout.cancel()
        guard process.terminationReason != .uncaughtSignal else {
            // Its background process may be stuck too: it must not outlive
            // the mount it was to serve (which the caller now detaches).
            Self.killServers(of: target)
            throw RPCError(code: .deadlineExceeded, message: "the mount of \(url) did not come up within \(mountTimeout)")
        }
        guard process.terminationStatus == 0 else {
            let message = String(decoding: output, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
            throw RPCError(code: Self.code(exitStatus: process.terminationStatus), message: message.isEmpty ? "bucketfs exited with \(process.terminationStatus)" : message)
        }
    }

    /// bucketfs's exit codes as gRPC codes: 2 no such bucket, 3
    /// credentials missing or refused, 4 endpoint unreachable, 64 a bad
    /// setting; the rest (5 mount refused, 1 other) are the node's fault.
    static func code(exitStatus: Int32) -> RPCError.Code {
        switch exitStatus {
        case 2: return .notFound
        case 3: return .permissionDenied
        case 4: return .unavailable
        case 64: return .invalidArgument
        default: return .internalError
        }
    }

    /// SIGKILL to every bucketfs process serving `target` (fuse-fd-mount
    /// tells each `--mounted-on TARGET`).
    static func killServers(of target: String) {
        let pids = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid_t($0) }
        for pid in pids where pid != getpid() {
            guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { continue }
            let arguments = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            guard arguments.first?.hasSuffix("bucketfs") == true,
                  let flag = arguments.firstIndex(of: "--mounted-on"), arguments.indices.contains(flag + 1), arguments[flag + 1] == target
            else { continue }
            kill(pid, SIGKILL)
        }
    }

    /// umount(2), lazily when busy (a process still has a file open: it
    /// goes on working on its file; the mount goes when it is done).
    func unmount(_ target: String) throws(RPCError) {
        if umount2(target, 0) == 0 || errno == EINVAL || errno == ENOENT { return }
        guard errno == EBUSY else { throw RPCError(code: .internalError, message: "cannot unmount \(target): \(Self.lastError())") }
        try detach(target)
    }

    /// MNT_DETACH: the only way to clear a mount whose process is gone.
    /// Not a mount point (EINVAL) or no target (ENOENT) is success.
    func detach(_ target: String) throws(RPCError) {
        guard umount2(target, Int32(MNT_DETACH)) == 0 || errno == EINVAL || errno == ENOENT else {
            throw RPCError(code: .internalError, message: "cannot unmount \(target): \(Self.lastError())")
        }
    }

    /// The target directory, made as kubelet expects (mode 0750, root's).
    func makeTarget(_ target: String) throws(RPCError) {
        do {
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o750])
        } catch {
            throw RPCError(code: .internalError, message: "cannot make \(target): \(error.localizedDescription)")
        }
    }

    /// rmdir: only an empty directory goes, so nothing of a mount that is
    /// somehow still there (or a file someone put in the target) is lost.
    func removeTarget(_ target: String) throws(RPCError) {
        guard rmdir(target) == 0 || errno == ENOENT else {
            throw RPCError(code: .internalError, message: "cannot remove \(target): \(Self.lastError())")
        }
    }

    static func lastError() -> String { String(cString: strerror(errno)) }
}
