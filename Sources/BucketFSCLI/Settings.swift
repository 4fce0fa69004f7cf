import Foundation
import Logging

/// Every setting of `bucketfs mount`; the only place their names, ranges
/// and `MountOptions` fields are written. `StorageOptions`,
/// `FilesystemFlags` and `ProcessFlags` declare their options with these
/// (`@Option(Settings.x) var x`; CLITests checks each setting reads its
/// own option), and `all` (in this order) is the docs' table.
enum Settings {
    // Bucket and credentials (also the options of ls, cp, put and get).
    static let endpoint = Setting<String>(.storage(\.endpoint),
        "endpoint", "URL",
        defaultText: "STORAGE_EMULATOR_HOST, else https://storage.googleapis.com; with a Firebase sign-in FIREBASE_STORAGE_EMULATOR_HOST, else https://firebasestorage.googleapis.com",
        inStatus: false,
        help: "Storage endpoint, http(s)://HOST[:PORT] or HOST:PORT: a regional or private endpoint or a proxy, which gets the same credentials as storage.googleapis.com, or an emulator with --anonymous (e.g. http://127.0.0.1:9023).")
    static let keyFile = Setting<String>(.storage(\.keyFile),
        "key-file", "FILE", defaultText: "Application Default Credentials", from: .node, inStatus: false,
        help: "Google credentials JSON file: a service-account key, or an authorized_user, external_account or impersonated_service_account file. Without it: GOOGLE_APPLICATION_CREDENTIALS, then gcloud's application_default_credentials.json, then the metadata server.")
    static let impersonateServiceAccount = Setting<String>(.storage(\.impersonateServiceAccount),
        "impersonate-service-account", "EMAIL", inStatus: false,
        help: "Act as this service account, with tokens the IAM Credentials API mints for the credentials chosen otherwise.")
    static let iamEndpoint = Setting<String>(.storage(\.iamEndpoint),
        "iam-endpoint", "URL", defaultText: "https://iamcredentials.googleapis.com", inStatus: false,
        help: "The IAM Credentials API for --impersonate-service-account.")
    static let billingProject = Setting<String>(.storage(\.billingProject),
        "billing-project", "PROJECT", inStatus: false,
        help: "Project billed for requests to a requester-pays bucket (sent as userProject).")
    static let tokenFile = Setting<String>(.storage(\.tokenFile),
        "token-file", "FILE", from: .node, inStatus: false, help: "File holding an OAuth2 access token (re-read when it changes).")
    static let anonymous = Setting<Bool>(.storage(flag: \.anonymous),
        "anonymous", inStatus: false,
        help: "Send no credentials (public buckets, emulators). Without it requests carry credentials, to any --endpoint too, unless STORAGE_EMULATOR_HOST is set.")
    static let firebaseAPIKey = Setting<String>(.storage(\.firebaseAPIKey),
        "firebase-api-key", "KEY", defaultText: "apiKey of FIREBASE_CONFIG", inStatus: false,
        help: "The Firebase app's Web API key, for a Firebase sign-in (FIREBASE_CONFIG: the app's configuration as JSON or a file).")
    static let firebaseEmail = Setting<String>(.storage(\.firebaseEmail),
        "firebase-email", "EMAIL", inStatus: false,
        help: "Sign in to Firebase Auth with this email (and --firebase-password-file): requests go through the Firebase Storage REST API as that user, under the bucket's Security Rules.")
    static let firebasePasswordFile = Setting<String>(.storage(\.firebasePasswordFile),
        "firebase-password-file", "FILE", from: .node, inStatus: false, help: "File holding the password of --firebase-email.")
    static let firebaseRefreshTokenFile = Setting<String>(.storage(\.firebaseRefreshTokenFile),
        "firebase-refresh-token-file", "FILE", from: .node, inStatus: false,
        help: "Sign in to Firebase Auth with the refresh token in this file (kept from an earlier sign-in).")
    static let firebaseCustomTokenFile = Setting<String>(.storage(\.firebaseCustomTokenFile),
        "firebase-custom-token-file", "FILE", from: .node, inStatus: false,
        help: "Sign in to Firebase Auth with the custom token in this file (minted by the app's server).")
    static let firebaseAnonymous = Setting<Bool>(.storage(flag: \.firebaseAnonymous),
        "firebase-anonymous", inStatus: false, help: "Sign in to Firebase Auth as a new anonymous user.")
    static let firebaseAuthEmulator = Setting<String>(.storage(\.firebaseAuthEmulator),
        "firebase-auth-emulator", "HOST:PORT", defaultText: "FIREBASE_AUTH_EMULATOR_HOST, else Firebase Auth itself", inStatus: false,
        help: "The Firebase Auth emulator.")

    // Filesystem.
    static let readOnly = Setting<Bool>(.filesystem(flag: \.readOnly, into: .field(\.readOnly)),
        "read-only", help: "Refuse every change with EROFS.")
    static let cacheDir = Setting<String>(.filesystem(\.cacheDir, into: .converted(\.cacheDirectory) { $0 }),
        "cache-dir", "DIR", defaultText: "~/.cache/bucketfs/BUCKET", fallback: { "\($0.home ?? "/tmp")/.cache/bucketfs/\($0.bucket)" },
        from: .node, help: "Directory for the block cache, staged writes and the recovery folder.")
    static let retryPending = Setting<Bool>(.filesystem(flag: \.retryPending),
        "retry-pending",
        help: "Before mounting, upload the files a failed upload left in CACHE-DIR/recovery/BUCKET (each with the precondition it had); those that still fail are retried in the background while mounted.")
    static let uploadRetryWindow = Setting<Double>(.filesystem(\.uploadRetryWindow, into: .field(\.uploadRetryWindow)),
        "upload-retry-time", "S", default: 120,
        range: .nonNegative("retry times"), help: "Seconds close and fsync keep retrying an upload that fails for a transient reason (outage, 5xx, 429) before they return EIO and keep the bytes in the recovery folder.")
    static let recoveryRetryInterval = Setting<Double>(.filesystem(\.recoveryRetryInterval, into: .field(\.recoveryRetryInterval)),
        "recovery-retry-interval", "S", default: 10,
        range: .nonNegative("retry times"), help: "Seconds before the recovery folder's entries of this mount are uploaded again in the background (doubling up to 300 s while they fail; 0: never, wait for --retry-pending).")
    static let cacheSize = Setting<Int>(.filesystem(\.cacheSizeMiB, into: .mebibytes(\.cacheSize)),
        "cache-size", "MiB", default: 1024, range: .nonNegative("sizes"), help: "Upper bound of the block cache on disk, in MiB.")
    static let readAheadBudget = Setting<Int>(.filesystem(\.readAheadBudgetMiB, into: .mebibytes(\.readAheadBudget)),
        "read-ahead-budget", "MiB", default: 256, range: .nonNegative("sizes"), help: "Memory all read-ahead buffers may use together, in MiB.")
    static let kernelReadAhead = Setting<Int>(
        .filesystem(\.kernelReadAheadKiB, into: .converted(\.kernelReadAhead) { Int64($0 > 0 ? $0 : 128) << 10 }),
        "kernel-read-ahead", "KiB", default: 16384,
        range: .nonNegative("sizes"), help: "The kernel's read-ahead window for this mount, in KiB (0: keep the kernel's 128 KiB); needs root. Larger windows let the kernel ask for several 1 MiB reads at once.")
    static let statTTL = Setting<Double>(.filesystem(\.statTTL, into: .field(\.statTTL)),
        "stat-ttl", "S", default: 60, range: .nonNegative("TTLs"), help: "Seconds file attributes and listings are trusted (0: always ask the bucket).")
    static let negativeTTL = Setting<Double>(.filesystem(\.negativeTTL, into: .field(\.negativeTTL)),
        "negative-ttl", "S", default: 5, range: .nonNegative("TTLs"), help: "Seconds a name found missing is trusted to stay missing.")
    static let uid = Setting<UInt32>(.filesystem(\.uid, into: .field(\.uid)),
        "uid", "UID", defaultText: "the mounting user", fallback: { _ in getuid() }, help: "Owner of files without goog-reserved-posix-uid metadata.")
    static let gid = Setting<UInt32>(.filesystem(\.gid, into: .field(\.gid)),
        "gid", "GID", defaultText: "the mounting user's group", fallback: { _ in getgid() }, help: "Group of files without goog-reserved-posix-gid metadata.")
    static let fileMode = Setting<String>(
        .filesystem(\.fileMode, into: .parsed(\.fileMode, refusal: "is not an octal mode") { FilesystemFlags.mode($0) }),
        "file-mode", "MODE", default: "0644", help: "Octal permissions of files without goog-reserved-posix-mode.")
    static let dirMode = Setting<String>(
        .filesystem(\.dirMode, into: .parsed(\.dirMode, refusal: "is not an octal mode") { FilesystemFlags.mode($0) }),
        "dir-mode", "MODE", default: "0755", help: "Octal permissions of directories.")
    static let allowOther = Setting<Bool>(.filesystem(flag: \.allowOther),
        "allow-other", help: "Let other users see the mount (needs user_allow_other in /etc/fuse.conf unless root).")
    static let renameCopyLimit = Setting<Int>(.filesystem(\.renameCopyLimitMiB, into: .mebibytes(\.renameCopyLimit)),
        "rename-copy-limit", "MiB", default: 64,
        range: .nonNegative("sizes"), help: "With a Firebase sign-in (no server-side copy), rename copies files up to this many MiB through bucketfs; larger files and directories are EXDEV (mv then copies and deletes).")
    static let parallelUploadThreshold = Setting<String>(
        .filesystem(\.parallelUploadThreshold, into: .parsed(
            \.parallelUploadThreshold, refusal: "is not a size (e.g. 64MiB, 512KiB, 1GiB) or off") { FilesystemFlags.parseSize($0) }),
        "parallel-upload-threshold", "SIZE", default: "64MiB",
        help: "Files of at least this size (MiB, or with KiB/MiB/GiB) are uploaded as parts side by side, then composed into the object (off or 0: never); a file written in order sends a part each --upload-chunk-size while it is written. Not on Firebase sign-ins, nor in a bucket with a retention policy; see docs/performance.md.")
    static let parallelUploadParts = Setting<Int>(.filesystem(\.parallelUploadParts, into: .field(\.parallelUploadParts)),
        "parallel-upload-parts", "N", default: 8,
        range: .within(1...1024), help: "Parts of a parallel upload, 1 to 1024, sent up to 32 at a time; fewer for files that would make parts under 8 MiB.")
    static let parallelUploadMinRTT = Setting<Double>(
        .filesystem(\.parallelUploadMinRTT, into: .converted(\.parallelUploadMinRoundTrip) { $0 / 1000 }),
        "parallel-upload-min-rtt", "MS", default: 10, range: .nonNegative("round trips"),
        help: "A store whose round trip, as the mount measures it (the shortest wait for an answer's first byte), is under this many milliseconds (this host, the LAN) is near: files up to --single-request-max go up at close in one request, and no file goes up in parts at close (0: every store is far). Far stores get parts, sent while the file is written when it is written in order.")
    static let singleRequestMax = Setting<String>(
        .filesystem(\.singleRequestMax, into: .parsed(
            \.singleRequestMax, refusal: "is not a size (e.g. 64MiB, 512KiB, 1GiB) or off") { FilesystemFlags.parseSize($0) }),
        "single-request-max", "SIZE", default: "1GiB",
        help: "Near the store (see --parallel-upload-min-rtt), files up to this size (MiB, or with KiB/MiB/GiB) go up at close in one request, however they were written; a larger file written in order sends its parts while it is written once it passes this size (off or 0: a near store streams as a far one). See docs/performance.md.")
    static let listingStatWidth = Setting<Int>(.filesystem(\.listingStatWidth, into: .field(\.listingStatWidth)),
        "listing-stat-width", default: 16, hidden: true, help: "Attribute lookups one listing may run at once.")

    // Process.
    static let foreground = Setting<Bool>(.process(flag: \.foreground),
        "foreground", from: .mountOption, inStatus: false,
        help: "Stay attached to the terminal instead of running in the background.")
    static let logLevel = Setting<Logger.Level>(.process(\.logLevel),
        "log-level", "LEVEL", default: .info, help: "trace, debug, info, notice, warning, error or critical.")
    static let logFormat = Setting<LogFormat>(.process(\.logFormat),
        "log-format", "FORMAT", default: .text,
        help: "text (one line per event) or json (one object per line: time, level, label, message, and the event's fields: operation, path, errno, request id…).")
    static let metricsAddress = Setting<String>(.process(\.metricsAddress),
        "metrics-address", "HOST:PORT", defaultText: "off",
        from: .node, help: "Serve Prometheus metrics on http://HOST:PORT/metrics (e.g. 127.0.0.1:9464; [::1]:9464 for IPv6).")
    static let logFile = Setting<String>(.process(\.logFile),
        "log-file", "FILE", defaultText: "standard error; nowhere once in the background", from: .node, help: "Append log lines to this file.")
    static let connectTimeout = Setting<Double>(.process(\.connectTimeout),
        "connect-timeout", "S", default: 10, help: "Seconds to establish a connection.")
    static let stallTimeout = Setting<Double>(.process(\.stallTimeout),
        "stall-timeout", "S", default: 30, help: "Seconds without progress before a transfer is abandoned and retried.")
    static let uploadChunkSize = Setting<Int>(.process(\.uploadChunkMiB),
        "upload-chunk-size", "MiB", default: 64,
        range: .within(1...1024, unit: "MiB"), help: "Size of each request of a resumable upload, in MiB, 1 to 1024 (files written in order also start uploading once they hold this much, and send parts of this size where parallel uploads apply).")
    static let retryAttempts = Setting<Int>(.process(\.retryAttempts),
        "retry-attempts", "N", default: 20,
        help: "Attempts per request at most (1: no retries); --retry-max-time usually ends retries first.")
    static let retryMaxTime = Setting<Double>(.process(\.retryMaxTime),
        "retry-max-time", "S", default: 60,
        help: "Seconds a request may spend retrying before it fails (EIO); each request has its own backoff, from 0.1 s doubling to 16 s.")
    /// Also `$BUCKETFS_CONFIG`; a file cannot name another.
    static let config = Setting<String>(.process(\.config),
        "config", "FILE", defaultText: "$BUCKETFS_CONFIG, else ~/.config/bucketfs/config.json or /etc/bucketfs/config.json if present",
        from: [.mountOption, .environment],
        help: "A JSON config file of mount options (keys: the long option names; \"fuse-options\" for -o). Precedence: the command line, then BUCKETFS_* variables, then the file.")
    /// The pipe a background mount's child reports readiness on (Daemon).
    static let readyFD = Setting<Int32>(.process(\.readyFD),
        "ready-fd", from: .commandLineOnly, hidden: true, inStatus: false, help: "")
    /// With a `/dev/fd/N` mountpoint: the directory the caller mounted the
    /// descriptor on (`fuse-fd-mount` passes it), so that `bucketfs status
    /// DIR` finds the mount's control socket.
    static let mountedOn = Setting<String>(.process(\.mountedOn),
        "mounted-on", from: .commandLineOnly, hidden: true, inStatus: false, help: "")

    /// libfuse's own options in the config file or `BUCKETFS_FUSE_OPTIONS`
    /// (on the command line they are `-o`): a list, or one comma-separated string.
    static let fuseOptionsKey = "fuse-options"

    static let all: [any AnySetting] = [
        endpoint, keyFile, impersonateServiceAccount, iamEndpoint, billingProject, tokenFile, anonymous,
        firebaseAPIKey, firebaseEmail, firebasePasswordFile, firebaseRefreshTokenFile, firebaseCustomTokenFile,
        firebaseAnonymous, firebaseAuthEmulator,
        readOnly, cacheDir, retryPending, uploadRetryWindow, recoveryRetryInterval, cacheSize, readAheadBudget,
        kernelReadAhead, statTTL, negativeTTL, uid, gid, fileMode, dirMode, allowOther, renameCopyLimit,
        parallelUploadThreshold, parallelUploadParts, parallelUploadMinRTT, singleRequestMax, listingStatWidth,
        foreground, logLevel, logFormat, metricsAddress, logFile, connectTimeout, stallTimeout, uploadChunkSize,
        retryAttempts, retryMaxTime, config, readyFD, mountedOn,
    ]

    /// Resolves every setting whose option is declared in `root` (an
    /// option group), each checked against its range.
    static func resolve<Root>(_ root: inout Root, _ resolver: SettingsResolver, _ context: SettingContext = SettingContext()) throws(CLIError) {
        for setting in all { try setting.resolve(&root, resolver, context) }
    }

    static func named(_ name: String) -> (any AnySetting)? { all.first { $0.name == name } }

    /// Names `-o name=value` may set.
    static var mountOptionNames: Set<String> { Set(all.filter { $0.origins.contains(.mountOption) }.map(\.name)) }

    /// Keys a config file may hold.
    static var configFileKeys: Set<String> {
        Set(all.filter { $0.origins.contains(.configFile) }.map(\.name)).union([fuseOptionsKey])
    }
}
