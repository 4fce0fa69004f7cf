import ArgumentParser
import Foundation
import FSCore
import Logging
import Transport

/// What the filesystem shows and caches. The options are optional: nil is
/// "not on the command line", and `SettingsResolver` looks further.
struct FilesystemFlags: ParsableArguments {
    @Flag(name: Settings.readOnly.long, help: Settings.readOnly.argumentHelp)
    var readOnly = false

    @Option(name: Settings.cacheDir.long, help: Settings.cacheDir.argumentHelp)
    var cacheDir: String?

    @Flag(name: Settings.retryPending.long, help: Settings.retryPending.argumentHelp)
    var retryPending = false

    @Option(name: Settings.uploadRetryTime.long, help: Settings.uploadRetryTime.argumentHelp)
    var uploadRetryTime: Double?

    @Option(name: Settings.recoveryRetryInterval.long, help: Settings.recoveryRetryInterval.argumentHelp)
    var recoveryRetryInterval: Double?

    @Option(name: Settings.cacheSize.long, help: Settings.cacheSize.argumentHelp)
    var cacheSizeMiB: Int?

    @Option(name: Settings.readAheadBudget.long, help: Settings.readAheadBudget.argumentHelp)
    var readAheadBudgetMiB: Int?

    @Option(name: Settings.kernelReadAhead.long, help: Settings.kernelReadAhead.argumentHelp)
    var kernelReadAheadKiB: Int?

    @Option(name: Settings.statTTL.long, help: Settings.statTTL.argumentHelp)
    var statTTL: Double?

    @Option(name: Settings.negativeTTL.long, help: Settings.negativeTTL.argumentHelp)
    var negativeTTL: Double?

    @Option(name: Settings.uid.long, help: Settings.uid.argumentHelp)
    var uid: UInt32?

    @Option(name: Settings.gid.long, help: Settings.gid.argumentHelp)
    var gid: UInt32?

    @Option(name: Settings.fileMode.long, help: Settings.fileMode.argumentHelp)
    var fileMode: String?

    @Option(name: Settings.dirMode.long, help: Settings.dirMode.argumentHelp)
    var dirMode: String?

    @Flag(name: Settings.allowOther.long, help: Settings.allowOther.argumentHelp)
    var allowOther = false

    @Option(name: Settings.renameCopyLimit.long, help: Settings.renameCopyLimit.argumentHelp)
    var renameCopyLimitMiB: Int?

    @Option(name: Settings.parallelUploadThreshold.long, help: Settings.parallelUploadThreshold.argumentHelp)
    var parallelUploadThreshold: String?

    @Option(name: Settings.parallelUploadParts.long, help: Settings.parallelUploadParts.argumentHelp)
    var parallelUploadParts: Int?

    @Option(name: Settings.listingStatWidth.long, help: Settings.listingStatWidth.argumentHelp)
    var listingStatWidth: Int?

    @Option(name: .short, help: "Mount options, comma separated: any long option as name=value (with - or _), or FUSE options (allow_other, default_permissions, fsname=...).")
    var o: [String] = []

    /// The filesystem's options, every setting resolved and checked.
    func mountOptions(prefix: String, bucket: String, _ settings: SettingsResolver, home: String?) throws(CLIError) -> MountOptions {
        var options = MountOptions()
        options.prefix = prefix
        options.bucket = bucket
        options.readOnly = try settings.flag(Settings.readOnly, readOnly)
        options.uid = try settings.value(Settings.uid, uid, otherwise: getuid())
        options.gid = try settings.value(Settings.gid, gid, otherwise: getgid())
        options.fileMode = try Self.parseMode(try settings.value(Settings.fileMode, fileMode), Settings.fileMode.name)
        options.dirMode = try Self.parseMode(try settings.value(Settings.dirMode, dirMode), Settings.dirMode.name)
        options.statTTL = try settings.value(Settings.statTTL, statTTL)
        options.negativeTTL = try settings.value(Settings.negativeTTL, negativeTTL)
        guard options.statTTL >= 0, options.negativeTTL >= 0 else { throw CLIError.usage("TTLs cannot be negative") }
        let cacheSize = try settings.value(Settings.cacheSize, cacheSizeMiB)
        let readAheadBudget = try settings.value(Settings.readAheadBudget, readAheadBudgetMiB)
        let renameCopyLimit = try settings.value(Settings.renameCopyLimit, renameCopyLimitMiB)
        guard cacheSize >= 0, readAheadBudget >= 0, renameCopyLimit >= 0, try kernelReadAhead(settings) >= 0 else {
            throw CLIError.usage("sizes cannot be negative")
        }
        options.cacheSize = Int64(cacheSize) << 20
        options.readAheadBudget = Int64(readAheadBudget) << 20
        options.renameCopyLimit = Int64(renameCopyLimit) << 20
        // 0 keeps the kernel's own 128 KiB.
        let kernelReadAhead = try kernelReadAhead(settings)
        options.kernelReadAhead = Int64(kernelReadAhead > 0 ? kernelReadAhead : 128) << 10
        options.uploadRetryWindow = try settings.value(Settings.uploadRetryTime, uploadRetryTime)
        options.recoveryRetryInterval = try settings.value(Settings.recoveryRetryInterval, recoveryRetryInterval)
        guard options.uploadRetryWindow >= 0, options.recoveryRetryInterval >= 0 else {
            throw CLIError.usage("retry times cannot be negative")
        }
        options.listingStatWidth = try settings.value(Settings.listingStatWidth, listingStatWidth)
        let threshold = try settings.value(Settings.parallelUploadThreshold, parallelUploadThreshold)
        guard let thresholdBytes = Self.parseSize(threshold) else {
            throw CLIError.usage("--\(Settings.parallelUploadThreshold.name) \(threshold) is not a size (e.g. 64MiB, 512KiB, 1GiB) or off")
        }
        options.parallelUploadThreshold = thresholdBytes
        options.parallelUploadParts = try settings.value(Settings.parallelUploadParts, parallelUploadParts)
        guard (1...1024).contains(options.parallelUploadParts) else {
            throw CLIError.usage("--\(Settings.parallelUploadParts.name) must be 1 to 1024")
        }
        options.cacheDirectory = try settings.value(Settings.cacheDir, cacheDir, otherwise: "\(home ?? "/tmp")/.cache/bucketfs/\(bucket)")
        return options
    }

    /// Creates the cache directory (once the bucket is known to be there).
    static func createCacheDirectory(_ directory: String) throws(CLIError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw CLIError.usage("cannot create cache directory \(directory): \(error.localizedDescription)")
        }
    }

    func kernelReadAhead(_ settings: SettingsResolver) throws(CLIError) -> Int {
        try settings.value(Settings.kernelReadAhead, kernelReadAheadKiB)
    }

    /// Bytes of a size setting: a number of MiB, or with a unit (KiB, MiB,
    /// GiB; K, M, G; B); "off" is 0. Nil for anything else.
    static func parseSize(_ text: String) -> Int64? {
        let trimmed = text.trimmingCharacters(in: .whitespaces).lowercased()
        if trimmed == "off" { return 0 }
        let digits = trimmed.prefix { $0.isNumber }
        guard let number = Int64(digits) else { return nil }
        let units: [String: Int64] = ["": 1 << 20, "b": 1, "k": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mib": 1 << 20, "g": 1 << 30, "gib": 1 << 30]
        guard let unit = units[String(trimmed.dropFirst(digits.count)).trimmingCharacters(in: .whitespaces)] else { return nil }
        let (bytes, overflow) = number.multipliedReportingOverflow(by: unit)
        return overflow ? nil : bytes
    }

    static func parseMode(_ text: String, _ name: String) throws(CLIError) -> UInt32 {
        guard let mode = UInt32(text, radix: 8), mode <= 0o7777 else {
            throw CLIError.usage("--\(name) \(text) is not an octal mode")
        }
        return mode
    }

    /// Options for libfuse's session: the ones given with -o (or the
    /// config's fuse-options) that libfuse knows, plus our name in /proc/mounts.
    static func fuseOptions(_ given: [String], bucketURL: String, allowOther: Bool, readOnly: Bool) -> [String] {
        var options = given.filter { !$0.hasPrefix("fsname=") && !$0.hasPrefix("subtype=") }
        options.append("fsname=\(bucketURL)")
        options.append("subtype=bucketfs")
        if allowOther && !options.contains("allow_other") { options.append("allow_other") }
        if readOnly { options.append("ro") }
        return options
    }
}

/// How the process runs and talks to the network.
struct ProcessFlags: ParsableArguments {
    @Flag(name: Settings.foreground.long, help: Settings.foreground.argumentHelp)
    var foreground = false

    @Option(name: Settings.logLevel.long, help: Settings.logLevel.argumentHelp)
    var logLevel: Logger.Level?

    @Option(name: Settings.logFormat.long, help: Settings.logFormat.argumentHelp)
    var logFormat: LogFormat?

    @Option(name: Settings.metricsAddress.long, help: Settings.metricsAddress.argumentHelp)
    var metricsAddress: String?

    @Option(name: Settings.logFile.long, help: Settings.logFile.argumentHelp)
    var logFile: String?

    @Option(name: Settings.connectTimeout.long, help: Settings.connectTimeout.argumentHelp)
    var connectTimeout: Double?

    @Option(name: Settings.stallTimeout.long, help: Settings.stallTimeout.argumentHelp)
    var stallTimeout: Double?

    @Option(name: Settings.uploadChunkSize.long, help: Settings.uploadChunkSize.argumentHelp)
    var uploadChunkMiB: Int?

    @Option(name: Settings.retryAttempts.long, help: Settings.retryAttempts.argumentHelp)
    var retryAttempts: Int?

    @Option(name: Settings.retryMaxTime.long, help: Settings.retryMaxTime.argumentHelp)
    var retryMaxTime: Double?

    @Option(name: Settings.config.long, help: Settings.config.argumentHelp)
    var config: String?

    @Option(name: Settings.readyFD.long, help: Settings.readyFD.argumentHelp)
    var readyFD: Int32?

    @Option(name: Settings.mountedOn.long, help: Settings.mountedOn.argumentHelp)
    var mountedOn: String?

    /// The process settings, resolved and checked.
    struct Resolved {
        var foreground: Bool
        var logLevel: Logger.Level
        var logFormat: LogFormat
        var metricsAddress: MetricsEndpoint.Address?
        var logFile: String?
        var uploadChunkMiB: Int
        var transport: TransportConfiguration
    }

    func resolve(_ settings: SettingsResolver) throws(CLIError) -> Resolved {
        let uploadChunkMiB = try settings.value(Settings.uploadChunkSize, uploadChunkMiB)
        guard (1...1024).contains(uploadChunkMiB) else { throw CLIError.usage("--\(Settings.uploadChunkSize.name) must be 1 to 1024 MiB") }
        let metricsAddress: MetricsEndpoint.Address?
        do {
            metricsAddress = try settings.optional(Settings.metricsAddress, self.metricsAddress).map { try MetricsEndpoint.Address($0) }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError.usage("--\(Settings.metricsAddress.name): \(error)")
        }
        let connectTimeout = try settings.value(Settings.connectTimeout, connectTimeout)
        let stallTimeout = try settings.value(Settings.stallTimeout, stallTimeout)
        let retryAttempts = try settings.value(Settings.retryAttempts, retryAttempts)
        let retryMaxTime = try settings.value(Settings.retryMaxTime, retryMaxTime)
        // Only shown by `bucketfs status`: the file read, whichever way it was named.
        _ = try settings.optional(Settings.config, settings.configFile)
        return Resolved(
            foreground: try settings.flag(Settings.foreground, foreground),
            logLevel: try settings.value(Settings.logLevel, logLevel),
            logFormat: try settings.value(Settings.logFormat, logFormat),
            metricsAddress: metricsAddress,
            logFile: try settings.optional(Settings.logFile, logFile),
            uploadChunkMiB: uploadChunkMiB,
            transport: TransportConfiguration(
                connectTimeout: .milliseconds(Int(connectTimeout * 1000)),
                stallTimeout: .milliseconds(Int(stallTimeout * 1000)),
                retry: RetryPolicy(
                    maxAttempts: max(1, retryAttempts), initialBackoff: .milliseconds(100), maxBackoff: .seconds(16),
                    totalTimeout: .milliseconds(Int(retryMaxTime * 1000)))))
    }
}
