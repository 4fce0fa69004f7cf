import ArgumentParser
import Foundation
import FSCore

/// `bucketfs status [MOUNTPOINT] [--json] [--drop-caches]`: asks each
/// running mount (or the one on MOUNTPOINT) over its control socket.
///
/// Exit codes: 0 every mount asked answered (also when none is mounted);
/// 1 a mount did not answer or MOUNTPOINT is not a bucketfs mount.
struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the running mounts: bucket, uptime, pending uploads, recovery folder, caches.",
        discussion: """
            With --drop-caches the mount forgets its cached attributes, listings and absent names, \
            and tells the kernel to forget its own, so changes made by other tools show at once \
            (SIGHUP to the mount process does the same).
            """)

    @Argument(help: "A bucketfs mountpoint (default: every bucketfs mount of this machine).")
    var mountpoint: String?

    @Flag(help: "Print JSON: an array with one object per mount.")
    var json = false

    @Flag(name: .customLong("drop-caches"), help: "Ask the mount(s) to drop their metadata caches first.")
    var dropCaches = false

    func run() async throws {
        let mountpoints: [String]
        if let mountpoint {
            let absolute = MountWatch.absolute(mountpoint)
            guard MountTable.bucketfsMountpoints().contains(absolute) else {
                eprint("bucketfs status: \(mountpoint) is not a bucketfs mount")
                throw ExitCode(1)
            }
            mountpoints = [absolute]
        } else {
            mountpoints = MountTable.bucketfsMountpoints()
        }
        var reports: [MountStatusReport] = []
        var failed = false
        for mountpoint in mountpoints {
            let socket = ControlSocketPath.socket(forMountpoint: mountpoint)
            do {
                if dropCaches {
                    let dropped = try await ControlClient.request(.POST, "/drop-caches", socket: socket, as: DropCachesReport.self)
                    if !json {
                        print("\(mountpoint): caches dropped (the kernel forgot \(dropped.kernelAccepted) names and attributes)")
                    }
                }
                reports.append(try await ControlClient.request(.GET, "/status", socket: socket, as: MountStatusReport.self))
            } catch {
                eprint("bucketfs status: \(mountpoint): \(error) (is its process running as another user?)")
                failed = true
            }
        }
        if json {
            print(String(decoding: try ControlClient.encoder.encode(reports), as: UTF8.self))
        } else if mountpoints.isEmpty {
            print("no bucketfs mounts")
        } else {
            for report in reports { print(StatusText.render(report)) }
        }
        if failed { throw ExitCode(1) }
    }
}

/// The human-readable form of a status report.
enum StatusText {
    static func render(_ r: MountStatusReport) -> String {
        let fs = r.filesystem
        var lines = ["\(r.mountpoint)  gs://\(r.bucket)/\(r.prefix)\(r.readOnly ? "  (read-only)" : "")  pid \(r.pid)  up \(duration(r.uptimeSeconds))"]
        if let credentials = r.credentials { lines.append("  credentials: \(credentials)") }
        lines.append("  pending uploads: \(fs.pendingUploads.count)")
        for upload in fs.pendingUploads {
            lines.append("    \(upload.path)  \(bytes(upload.size))  \(upload.state.rawValue), \(upload.openHandles) open")
        }
        lines.append("  recovery folder: \(fs.recovery.count) \(fs.recovery.count == 1 ? "entry" : "entries") in \(r.cacheDirectory)/recovery/\(r.bucket)")
        for entry in fs.recovery {
            let stopped = entry.retryStopped.map { "; not retried in the background: \($0)" } ?? "; retried in the background"
            lines.append("    \(entry.object)  \(bytes(entry.size))  saved \(entry.savedAt.formatted(.iso8601))  cause: \(entry.reason)\(stopped)")
        }
        if !fs.leftoverParts.isEmpty {
            lines.append("  parallel-upload parts not deleted yet: \(fs.leftoverParts.count)")
            for name in fs.leftoverParts { lines.append("    gs://\(r.bucket)/\(name)") }
        }
        let c = fs.caches
        lines.append("  block cache: \(bytes(c.blockCacheBytes)) of \(bytes(c.blockCacheCapacityBytes)) (\(c.blockCacheBlocks) blocks)")
        lines.append("  metadata: \(c.statEntries) names, \(c.listings) listings (\(c.listingEntries) entries), \(c.knownInodes) inodes")
        lines.append("  read-ahead: \(bytes(c.readAheadBytesInUse)) of \(bytes(c.readAheadBudgetBytes)) in use")
        return lines.joined(separator: "\n")
    }

    static func bytes(_ n: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(n)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(n) B" : String(format: "%.1f", value) + " " + units[unit]
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds)
        if s < 60 { return "\(s)s" }
        if s < 3600 { return "\(s / 60)m\(String(format: "%02d", s % 60))s" }
        return "\(s / 3600)h\(String(format: "%02d", s / 60 % 60))m"
    }
}
