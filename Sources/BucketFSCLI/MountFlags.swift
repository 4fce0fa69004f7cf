import ArgumentParser
import Foundation
import FSCore
import Logging
import Transport

/// What the filesystem shows and caches. The options are optional: nil is
/// "not on the command line", and `SettingsResolver` looks further. Each
/// is declared with its `Setting`, which says where its value goes.
struct FilesystemFlags: ParsableArguments {
    @Flag(Settings.readOnly) var readOnly: Bool = false
    @Option(Settings.cacheDir) var cacheDir: String?
    @Flag(Settings.retryPending) var retryPending: Bool = false
    @Option(Settings.uploadRetryWindow) var uploadRetryWindow: Double?
    @Option(Settings.recoveryRetryInterval) var recoveryRetryInterval: Double?
    @Option(Settings.cacheSize) var cacheSizeMiB: Int?
    @Option(Settings.readAheadBudget) var readAheadBudgetMiB: Int?
    @Option(Settings.kernelReadAhead) var kernelReadAheadKiB: Int?
    @Option(Settings.statTTL) var statTTL: Double?
    @Option(Settings.negativeTTL) var negativeTTL: Double?
    @Option(Settings.uid) var uid: UInt32?
    @Option(Settings.gid) var gid: UInt32?
    @Option(Settings.fileMode) var fileMode: String?
    @Option(Settings.dirMode) var dirMode: String?
    @Flag(Settings.allowOther) var allowOther: Bool = false
    @Option(Settings.renameCopyLimit) var renameCopyLimitMiB: Int?
    @Option(Settings.parallelUploadThreshold) var parallelUploadThreshold: String?
    @Option(Settings.parallelUploadParts) var parallelUploadParts: Int?
    @Option(Settings.parallelUploadMinRTT) var parallelUploadMinRTT: Double?
    @Option(Settings.singleRequestMax) var singleRequestMax: String?
    @Option(Settings.listingStatWidth) var listingStatWidth: Int?

    @Option(name: .short, help: "Mount options, comma separated: any long option as name=value (with - or _), or FUSE options (allow_other, default_permissions, fsname=...).")
    var o: [String] = []

    /// These flags with every filesystem setting resolved and checked:
    /// the command line's value, else -o, the environment, the config
    /// file, the default.
    func resolved(_ settings: SettingsResolver, bucket: String, home: String?) throws(CLIError) -> FilesystemFlags {
        var flags = self
        try Settings.resolve(&flags, settings, SettingContext(home: home, bucket: bucket))
        return flags
    }

    /// The filesystem's options from resolved flags: each setting's value
    /// in its `MountOptions` field.
    func mountOptions(prefix: String, bucket: String) throws(CLIError) -> MountOptions {
        var options = MountOptions()
        options.prefix = prefix
        options.bucket = bucket
        for setting in Settings.all { try setting.apply(self, to: &options) }
        return options
    }

    /// The filesystem's options, every setting resolved and checked.
    func mountOptions(prefix: String, bucket: String, _ settings: SettingsResolver, home: String?) throws(CLIError) -> MountOptions {
        try resolved(settings, bucket: bucket, home: home).mountOptions(prefix: prefix, bucket: bucket)
    }

    /// Creates the cache directory (once the bucket is known to be there).
    static func createCacheDirectory(_ directory: String) throws(CLIError) {
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        } catch {
            throw CLIError.usage("cannot create cache directory \(directory): \(error.localizedDescription)")
        }
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

    /// Permission bits written in octal; nil for anything else.
    static func mode(_ text: String) -> UInt32? {
        guard let mode = UInt32(text, radix: 8), mode <= 0o7777 else { return nil }
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
    @Flag(Settings.foreground) var foreground: Bool = false
    @Option(Settings.logLevel) var logLevel: Logger.Level?
    @Option(Settings.logFormat) var logFormat: LogFormat?
    @Option(Settings.metricsAddress) var metricsAddress: String?
    @Option(Settings.logFile) var logFile: String?
    @Option(Settings.connectTimeout) var connectTimeout: Double?
    @Option(Settings.stallTimeout) var stallTimeout: Double?
    @Option(Settings.uploadChunkSize) var uploadChunkMiB: Int?
    @Option(Settings.retryAttempts) var retryAttempts: Int?
    @Option(Settings.retryMaxTime) var retryMaxTime: Double?
    @Option(Settings.config) var config: String?
    @Option(Settings.readyFD) var readyFD: Int32?
    @Option(Settings.mountedOn) var mountedOn: String?

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
        var flags = self
        // Shown by `bucketfs status`: the file read, whichever way it was named.
        flags.config = settings.configFile
        try Settings.resolve(&flags, settings)
        guard let logLevel = flags.logLevel, let logFormat = flags.logFormat, let uploadChunkMiB = flags.uploadChunkMiB,
              let connectTimeout = flags.connectTimeout, let stallTimeout = flags.stallTimeout,
              let retryAttempts = flags.retryAttempts, let retryMaxTime = flags.retryMaxTime
        else {
            // Each of these has a default, which resolution falls back to.
            throw CLIError.usage("a process setting has no value")
        }
        let metricsAddress: MetricsEndpoint.Address?
        do {
            metricsAddress = try flags.metricsAddress.map { try MetricsEndpoint.Address($0) }
        } catch let error as CLIError {
            throw error
        } catch {
            throw CLIError.usage("--\(Settings.metricsAddress.name): \(error)")
        }
        return Resolved(
            foreground: flags.foreground, logLevel: logLevel, logFormat: logFormat, metricsAddress: metricsAddress,
            logFile: flags.logFile, uploadChunkMiB: uploadChunkMiB,
            transport: TransportConfiguration(
                connectTimeout: .milliseconds(Int(connectTimeout * 1000)),
                stallTimeout: .milliseconds(Int(stallTimeout * 1000)),
                retry: RetryPolicy(
                    maxAttempts: max(1, retryAttempts), initialBackoff: .milliseconds(100), maxBackoff: .seconds(16),
                    totalTimeout: .milliseconds(Int(retryMaxTime * 1000)))))
    }
}
