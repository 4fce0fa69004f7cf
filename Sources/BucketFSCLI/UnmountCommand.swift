import ArgumentParser
import Foundation
import FSCore

/// `bucketfs unmount MOUNTPOINT`: asks the kernel to detach the mount
/// (fusermount3 -u); the bucketfs process sees its session end, finishes
/// pending work and exits.
///
/// Exit codes: 0 unmounted; 1 MOUNTPOINT is not a bucketfs mount, or the
/// kernel refused (busy: a process has a file or its working directory
/// there); 64 bad command line.
struct UnmountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmount", abstract: "Unmount a bucketfs mount.",
        discussion: "Exit codes: 1 not a bucketfs mount or busy (--lazy detaches it anyway), 64 bad command line.")

    @Argument(help: "The mountpoint.")
    var mountpoint: String

    @Flag(help: "Detach even if busy (fusermount3 -uz).")
    var lazy = false

    func run() async throws {
        let absolute = Self.absolute(mountpoint)
        guard let entry = MountTable.entry(mountpoint: absolute) else {
            throw CLIError.bucket("\(mountpoint) is not mounted", exitCode: 1)
        }
        guard entry.type == "fuse.bucketfs" else {
            throw CLIError.bucket("\(mountpoint) is not a bucketfs mount (it is \(entry.type))", exitCode: 1)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/fusermount3")
        process.arguments = [lazy ? "-uz" : "-u", absolute]
        let errors = Pipe()
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw CLIError.bucket("cannot run fusermount3: \(error.localizedDescription)", exitCode: 1)
        }
        let said = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus != 0 else { return }
        // fusermount3 says "fusermount3: failed to unmount PATH: REASON".
        let reason = said.split(separator: ": ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? ""
        let busy = reason.contains("busy") ? " (a process has a file or its working directory there; --lazy detaches it now)" : ""
        throw CLIError.bucket("cannot unmount \(mountpoint): \(reason.isEmpty ? "fusermount3 exited \(process.terminationStatus)" : reason)\(busy)", exitCode: 1)
    }

    /// `path` made absolute without entering it: the root of a mount
    /// whose process died answers every stat with ENOTCONN, so only its
    /// parent is resolved.
    static func absolute(_ path: String) -> String {
        if let resolved = realpath(path, nil) {
            defer { free(resolved) }
            return String(cString: resolved)
        }
        let url = URL(fileURLWithPath: path)
        return MountWatch.absolute(url.deletingLastPathComponent().path) + "/" + url.lastPathComponent
    }
}
