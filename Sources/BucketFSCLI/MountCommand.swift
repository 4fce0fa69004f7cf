import ArgumentParser
import Foundation
import FSCore
import Logging
import StorageKit
import Transport

/// `bucketfs mount [options] gs://BUCKET[/PREFIX] MOUNTPOINT`
///
/// Exit codes: 0 mounted (or, in the foreground, unmounted cleanly);
/// 2 no such bucket; 3 credentials missing, refused or not allowed to list;
/// 4 endpoint unreachable; 5 the mount itself failed (mountpoint missing,
/// not a directory, already mounted, no /dev/fuse); 1 anything else; 64 bad
/// command line.
struct MountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mount",
        abstract: "Mount a bucket (or a prefix of it) on a directory.",
        discussion: """
            Runs in the background and returns once the mount is ready, unless --foreground. \
            Unmount with `bucketfs unmount MOUNTPOINT` (or fusermount3 -u); SIGTERM and SIGINT unmount cleanly.

            Every long option can also be given as -o name=value (with - or _), which is how mount(8) \
            and /etc/fstab pass them, e.g. this /etc/fstab line:

              gs://my-bucket  /mnt/b  fuse.bucketfs  _netdev,allow_other,stat_ttl=30  0 0

            Exit codes: 2 no such bucket, 3 credentials missing or refused, 4 endpoint unreachable, \
            5 mount failed, 1 other errors, 64 bad command line.
            """)

    @Argument(help: "gs://BUCKET[/PREFIX], or just BUCKET.")
    var bucket: String

    @Argument(help: "The directory to mount on, or /dev/fd/N: an open /dev/fuse descriptor the caller has mounted (see fuse-fd-mount), which bucketfs serves and never unmounts.")
    var mountpoint: String

    @OptionGroup(title: "Bucket and credentials")
    var storageOptions: StorageOptions

    @OptionGroup(title: "Filesystem")
    var filesystem: FilesystemFlags

    @OptionGroup(title: "Process")
    var process: ProcessFlags

    func run() async throws {
        do {
            try await mount(environment: ProcessInfo.processInfo.environment)
        } catch let error as CLIError {
            if let fd = process.readyFD { ReadyPipe.report(fd: fd, code: error.exitCode, message: error.description) }
            eprint("bucketfs: \(error)")
            throw ExitCode(error.exitCode)
        }
    }

    /// Every setting from the command line, -o, the environment and the config file.
    func resolveSettings(environment: [String: String]) async throws(CLIError) -> SettingsResolver {
        try await SettingsResolver(mountOptions: filesystem.o, givenConfig: process.config, environment: environment)
    }

    /// Every setting resolved and checked, as the mount would use them;
    /// nothing is touched yet (`VolumeSettings.check` stops here).
    struct Resolved {
        let target: MountTarget
        let settings: SettingsResolver
        let process: ProcessFlags.Resolved
        let storageOptions: StorageOptions
        let allowOther: Bool
        let retryPending: Bool
        let kernelReadAheadKiB: Int
        let options: MountOptions
    }

    func resolve(environment: [String: String]) async throws -> Resolved {
        let target = try MountTarget(bucket)
        let settings = try await resolveSettings(environment: environment)
        let process = try self.process.resolve(settings)
        let storageOptions = try self.storageOptions.resolved(settings)
        let filesystem = try self.filesystem.resolved(settings, bucket: target.bucket, home: environment["HOME"])
        return Resolved(
            target: target, settings: settings, process: process, storageOptions: storageOptions,
            allowOther: filesystem.allowOther, retryPending: filesystem.retryPending,
            // Resolved, so never nil: it has a default.
            kernelReadAheadKiB: filesystem.kernelReadAheadKiB ?? 0,
            options: try filesystem.mountOptions(prefix: target.prefix, bucket: target.bucket))
    }

    private func mount(environment: [String: String]) async throws {
        let resolved = try await resolve(environment: environment)
        let (target, settings, process, storageOptions) = (resolved.target, resolved.settings, resolved.process, resolved.storageOptions)
        let (allowOther, retryPending, kernelReadAheadKiB) = (resolved.allowOther, resolved.retryPending, resolved.kernelReadAheadKiB)
        var options = resolved.options
        try MountpointCheck.verify(mountpoint)
        let fuseDescriptor = FuseDescriptor.number(inMountpoint: mountpoint)
        // Where the mount is for the control socket, `status`, the logs and
        // the descriptor probe: a /dev/fd/N mount's directory is only known
        // if the caller says (--mounted-on).
        let directory = fuseDescriptor == nil ? MountWatch.absolute(mountpoint) : (self.process.mountedOn.map(MountWatch.absolute) ?? mountpoint)
        if !process.foreground {
            try Daemon.spawnForegroundChild(logFile: process.logFile, fuseDescriptor: fuseDescriptor)
            return
        }
        try LogSetup.bootstrap(level: process.logLevel, path: process.logFile, format: process.logFormat)
        // Before the first request (the preflight's): a metric object made
        // earlier is a no-op one, and the layers keep theirs (every GET
        // answered 200 went unrecorded when this came after the preflight).
        let metrics = try process.metricsAddress.map { try MetricsEndpoint(address: $0) }
        let logger = Logger(label: "bucketfs")
        let transport = HTTPTransport(configuration: process.transport, logger: Logger(label: "bucketfs.transport"))
        var configuration = try storageOptions.configuration(transport: transport)
        let credentials = configuration.credentials
        logger.info("credentials", metadata: [
            "identity": "\(credentials.identity)", "api": "\(configuration.dialect)",
            "endpoint": "\(configuration.endpoint.absoluteString)",
        ])
        configuration.logger = Logger(label: "bucketfs.storage")
        configuration.uploadChunkSize = Int64(process.uploadChunkMiB) << 20
        let storage = Storage(bucket: target.bucket, configuration: configuration)
        try await Preflight.check(
            storage: storage, prefix: target.prefix, endpoint: configuration.endpoint,
            credentialsHint: storageOptions.credentialsHint(endpoint: configuration.endpoint, environment: environment), logger: logger)

        options.streamChunkSize = configuration.uploadChunkSize
        // mountOptions always sets it; MountOptions has it optional for FSCore's tests.
        guard let cacheDirectory = options.cacheDirectory else { throw CLIError.usage("no cache directory") }
        try FilesystemFlags.createCacheDirectory(cacheDirectory)
        let store = StorageKitObjectStore(storage: storage)
        // One recovery store for the mount: unsaved writes a killed mount
        // left in staging/ join the recovery folder as it is made (the only
        // leftover scan), so they are reported and retried with the rest.
        let recovery = RecoveryStore(
            cacheDirectory: cacheDirectory, store: store, options: options, logger: Logger(label: "bucketfs.fs"))
        await PendingUploads.handle(recovery.folder, store: store, retry: retryPending, logger: logger)
        let fs = FileSystem(
            store: store, options: options, logger: Logger(label: "bucketfs.fs"),
            descriptors: ProcDescriptorProbe(mountpoint: directory), recovery: recovery)
        try await metrics?.start(filesystem: fs, logger: logger)
        if retryPending, fs.retryRecoveryEntriesInBackground() > 0 {
            logger.notice("pending files that could not be uploaded yet are retried in the background while mounted")
        }
        let description = MountDescription(
            mountpoint: directory, bucket: target.bucket, prefix: target.prefix,
            readOnly: options.readOnly, cacheDirectory: cacheDirectory, settings: settings.effective,
            credentials: { credentials.identity })
        try await MountRunner(
            filesystem: fs, description: description, mountpoint: mountpoint, directory: directory,
            fuseOptions: FilesystemFlags.fuseOptions(
                settings.fuseOptions, bucketURL: target.description, allowOther: allowOther, readOnly: options.readOnly),
            // libfuse's own request trace (-d) is plain text on stderr: only
            // with the text format.
            debug: process.logLevel == .trace && process.logFormat == .text, readyFD: self.process.readyFD, logger: logger,
            kernelReadAheadKiB: kernelReadAheadKiB > 0 ? kernelReadAheadKiB : nil
        ).run()
    }
}

/// What `mount` mounts: `gs://bucket[/prefix]`, or `bucket[/prefix]` after
/// the word `mount` (without it, as mount(8) runs bucketfs, the first word
/// must be a URL: `FirstWord`).
struct MountTarget: CustomStringConvertible {
    let bucket: String
    /// "" or a prefix ending in "/".
    let prefix: String

    init(_ text: String) throws(CLIError) {
        let url = try BucketURL(text, bareBucket: true)
        bucket = url.bucket
        prefix = url.path.isEmpty ? "" : url.path + "/"
    }

    var description: String { "gs://\(bucket)/\(prefix)" }
}
