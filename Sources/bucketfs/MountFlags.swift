import ArgumentParser
import Foundation
import FSCore
import Logging
import Transport

/// What the filesystem shows and caches.
struct FilesystemFlags: ParsableArguments {
    @Flag(name: .customLong("read-only"), help: "Refuse every change with EROFS.")
    var readOnly = false

    @Option(name: .customLong("cache-dir"), help: "Directory for the block cache, staged writes and the recovery folder (default: ~/.cache/bucketfs/BUCKET).")
    var cacheDir: String?

    @Flag(name: .customLong("retry-pending"), help: "Before mounting, upload the files a failed upload left in CACHE-DIR/recovery/BUCKET (each with the precondition it had); those that still fail are retried in the background while mounted.")
    var retryPending = false

    @Option(name: .customLong("upload-retry-time"), help: "Seconds close and fsync keep retrying an upload that fails for a transient reason (outage, 5xx, 429) before they return EIO and keep the bytes in the recovery folder.")
    var uploadRetryTime: Double = 120

    @Option(name: .customLong("recovery-retry-interval"), help: "Seconds before the recovery folder's entries of this mount are uploaded again in the background (doubling up to 300 s while they fail; 0: never, wait for --retry-pending).")
    var recoveryRetryInterval: Double = 10

    @Option(name: .customLong("cache-size"), help: "Upper bound of the block cache on disk, in MiB.")
    var cacheSizeMiB: Int = 1024

    @Option(name: .customLong("read-ahead-budget"), help: "Memory all read-ahead buffers may use together, in MiB.")
    var readAheadBudgetMiB: Int = 256

    @Option(name: .customLong("kernel-read-ahead"), help: "The kernel's read-ahead window for this mount, in KiB (0: keep the kernel's 128 KiB); needs root. Larger windows let the kernel ask for several 1 MiB reads at once.")
    var kernelReadAheadKiB: Int = 16384

    @Option(name: .customLong("stat-ttl"), help: "Seconds file attributes and listings are trusted (0: always ask the bucket).")
    var statTTL: Double = 60

    @Option(name: .customLong("negative-ttl"), help: "Seconds a name found missing is trusted to stay missing.")
    var negativeTTL: Double = 5

    @Option(help: "Owner of files without goog-reserved-posix-uid metadata (default: the mounting user).")
    var uid: UInt32?

    @Option(help: "Group of files without goog-reserved-posix-gid metadata (default: the mounting user's group).")
    var gid: UInt32?

    @Option(name: .customLong("file-mode"), help: "Octal permissions of files without goog-reserved-posix-mode.")
    var fileMode: String = "0644"

    @Option(name: .customLong("dir-mode"), help: "Octal permissions of directories.")
    var dirMode: String = "0755"

    @Flag(name: .customLong("allow-other"), help: "Let other users see the mount (needs user_allow_other in /etc/fuse.conf unless root).")
    var allowOther = false

    @Option(name: .customLong("rename-copy-limit"), help: "With a Firebase sign-in (no server-side copy), rename copies files up to this many MiB through bucketfs; larger files and directories are EXDEV (mv then copies and deletes).")
    var renameCopyLimitMiB: Int = 64

    @Option(name: .customLong("listing-stat-width"), help: .hidden)
    var listingStatWidth: Int = 16

    @Option(name: .short, help: "Mount options, comma separated: any long option as name=value, or FUSE options (allow_other, default_permissions, fsname=...).")
    var o: [String] = []

    func validate() throws {
        _ = try parseMode(fileMode, "--file-mode")
        _ = try parseMode(dirMode, "--dir-mode")
        guard statTTL >= 0, negativeTTL >= 0 else { throw ValidationError("TTLs cannot be negative") }
        guard uploadRetryTime >= 0, recoveryRetryInterval >= 0 else { throw ValidationError("retry times cannot be negative") }
        guard cacheSizeMiB >= 0, readAheadBudgetMiB >= 0, kernelReadAheadKiB >= 0, renameCopyLimitMiB >= 0 else { throw ValidationError("sizes cannot be negative") }
        let unknown = MountOptionParsing.sort(o, ownNames: []).unknown
        guard unknown.isEmpty else {
            throw ValidationError("unknown mount option(s): \(unknown.joined(separator: ",")) (see bucketfs mount --help)")
        }
    }

    private func parseMode(_ text: String, _ name: String) throws -> UInt32 {
        guard let mode = UInt32(text, radix: 8), mode <= 0o7777 else {
            throw ValidationError("\(name) \(text) is not an octal mode")
        }
        return mode
    }

    func mountOptions(prefix: String, bucket: String) throws -> MountOptions {
        var options = MountOptions()
        options.prefix = prefix
        options.readOnly = readOnly
        options.bucket = bucket
        options.uid = uid ?? getuid()
        options.gid = gid ?? getgid()
        options.fileMode = try parseMode(fileMode, "--file-mode")
        options.dirMode = try parseMode(dirMode, "--dir-mode")
        options.statTTL = statTTL
        options.negativeTTL = negativeTTL
        options.cacheSize = Int64(cacheSizeMiB) << 20
        options.readAheadBudget = Int64(readAheadBudgetMiB) << 20
        options.uploadRetryWindow = uploadRetryTime
        options.recoveryRetryInterval = recoveryRetryInterval
        options.renameCopyLimit = Int64(renameCopyLimitMiB) << 20
        options.listingStatWidth = listingStatWidth
        let home = ProcessInfo.processInfo.environment["HOME"] ?? "/tmp"
        let directory = cacheDir ?? "\(home)/.cache/bucketfs/\(bucket)"
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw CLIError.usage("cannot create cache directory \(directory): \(error.localizedDescription)")
        }
        options.cacheDirectory = directory
        return options
    }

    /// Options for libfuse's session: the ones given with -o that libfuse
    /// knows, plus our name in /proc/mounts.
    func fuseOptions(bucketURL: String) -> [String] {
        let sorted = MountOptionParsing.sort(o, ownNames: [])
        var options = sorted.fuse.filter { !$0.hasPrefix("fsname=") && !$0.hasPrefix("subtype=") }
        options.append("fsname=\(bucketURL)")
        options.append("subtype=bucketfs")
        if allowOther && !options.contains("allow_other") { options.append("allow_other") }
        if readOnly { options.append("ro") }
        return options
    }
}

/// How the process runs and talks to the network.
struct ProcessFlags: ParsableArguments {
    @Flag(help: "Stay attached to the terminal instead of running in the background.")
    var foreground = false

    @Option(name: .customLong("log-level"), help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: Logger.Level = .info

    @Option(name: .customLong("log-format"), help: "text (one line per event) or json (one object per line: time, level, label, message, and the event's fields: operation, path, errno, request id…).")
    var logFormat: LogFormat = .text

    @Option(name: .customLong("metrics-address"), help: "Serve Prometheus metrics on http://HOST:PORT/metrics (e.g. 127.0.0.1:9464; [::1]:9464 for IPv6). Off by default.")
    var metricsAddress: String?

    @Option(name: .customLong("log-file"), help: "Append log lines to this file (default: standard error; nowhere once in the background).")
    var logFile: String?

    @Option(name: .customLong("connect-timeout"), help: "Seconds to establish a connection.")
    var connectTimeout: Double = 10

    @Option(name: .customLong("stall-timeout"), help: "Seconds without progress before a transfer is abandoned and retried.")
    var stallTimeout: Double = 30

    @Option(name: .customLong("upload-chunk-size"), help: "Size of each request of a resumable upload, in MiB (files written in order also start uploading once they hold this much).")
    var uploadChunkMiB: Int = 64

    @Option(name: .customLong("retry-attempts"), help: "Attempts per request at most (1: no retries); --retry-max-time usually ends retries first.")
    var retryAttempts: Int = 20

    @Option(name: .customLong("retry-max-time"), help: "Seconds a request may spend retrying before it fails (EIO); each request has its own backoff, from 0.1 s doubling to 16 s.")
    var retryMaxTime: Double = 60

    @Option(help: "A JSON config file of mount options (keys: the long option names; \"fuse-options\" for -o). Default: $BUCKETFS_CONFIG, else ~/.config/bucketfs/config.json or /etc/bucketfs/config.json if present. Precedence: flags, then BUCKETFS_<OPTION> variables, then the file.")
    var config: String?

    @Option(name: .customLong("ready-fd"), help: .hidden)
    var readyFD: Int32?

    func validate() throws {
        guard (1...1024).contains(uploadChunkMiB) else { throw ValidationError("--upload-chunk-size must be 1 to 1024 MiB") }
        if let metricsAddress {
            do {
                _ = try MetricsEndpoint.Address(metricsAddress)
            } catch {
                throw ValidationError("\(error)")
            }
        }
    }

    var transportConfiguration: TransportConfiguration {
        TransportConfiguration(
            connectTimeout: .milliseconds(Int(connectTimeout * 1000)),
            stallTimeout: .milliseconds(Int(stallTimeout * 1000)),
            retry: RetryPolicy(
                maxAttempts: max(1, retryAttempts), initialBackoff: .milliseconds(100), maxBackoff: .seconds(16),
                totalTimeout: .milliseconds(Int(retryMaxTime * 1000))))
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}

enum LogFormat: String, ExpressibleByArgument, Sendable {
    case text, json
}
