import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the user chose at mount time that the core needs. The CLI fills it
/// from its flags; tests build it directly. Defaults follow gcsfuse and
/// mountpoint-s3 where they agree.
public struct MountOptions: Sendable, Equatable {
    /// Owner reported for objects without `goog-reserved-posix-uid`/`-gid`.
    public var uid: UInt32
    public var gid: UInt32
    /// Permission bits (no file type) for files and directories without
    /// `goog-reserved-posix-mode`.
    public var fileMode: UInt32
    public var dirMode: UInt32
    /// Seconds a listing or stat answer is trusted, and what the kernel is
    /// told to cache entries and attributes for. Zero: always ask the store.
    public var statTTL: TimeInterval
    /// Seconds a name is known to be absent.
    public var negativeTTL: TimeInterval
    /// At most this many names' metadata is kept in the metadata cache
    /// (names a kept listing holds are not counted: they are pinned).
    public var statCacheCapacity: Int
    /// Where downloaded blocks (and, later, staged writes) live; nil keeps
    /// no block cache on disk (reads still use read-ahead buffers).
    public var cacheDirectory: String?
    /// Bytes the block cache may occupy on disk.
    public var cacheSize: Int64
    /// Bytes all read-ahead buffers of all open files may use together.
    public var readAheadBudget: Int64
    /// First and largest sequential read-ahead window, in bytes.
    public var readAheadInitial: Int64
    public var readAheadMax: Int64
    /// The kernel's read-ahead window on this mount, in bytes: its
    /// requests of one sequential sweep reach the filesystem out of order
    /// by up to this much, and the read-ahead machine must not take them
    /// for seeks.
    public var kernelReadAhead: Int64
    /// A mount of gs://bucket/PREFIX: every object name is `objectPrefix`
    /// + path. "" mounts the whole bucket. Normalised by `objectPrefix`.
    public var prefix: String
    public var readOnly: Bool
    /// The bucket's name, for the recovery folder's layout.
    public var bucket: String
    /// A file written in order streams its upload in pieces of this size
    /// (a multiple of 256 KiB), starting once it holds that much.
    public var streamChunkSize: Int64
    /// Seconds close, fsync and release keep retrying an upload that fails
    /// for a transient reason (endpoint unreachable, 5xx, 429), counted
    /// from the start of the upload; each failed attempt is logged at
    /// warning. Past it the bytes go to the recovery folder (EIO). 0: one
    /// attempt (with the transport's own retries).
    public var uploadRetryWindow: TimeInterval
    /// First wait before the recovery folder's entries of this mount are
    /// uploaded again in the background, doubling up to
    /// `recoveryRetryMaxInterval` while they keep failing. 0: no background
    /// retries (entries wait for `--retry-pending`).
    public var recoveryRetryInterval: TimeInterval
    public var recoveryRetryMaxInterval: TimeInterval
    /// On a store without server-side copy (Firebase's v0), rename copies
    /// a file through this process only up to this many bytes; a larger
    /// file, and any directory, is EXDEV (mv then copies and deletes
    /// itself).
    public var renameCopyLimit: Int64
    /// On a store whose listings lack metadata (Firebase's v0), how many
    /// stats opendir runs at once to complete a listing.
    public var listingStatWidth: Int
    /// A staged file of at least this many bytes goes up as parts side by
    /// side, composed into the object (`ParallelUpload`); 0: never. If it
    /// is at most `streamChunkSize`, a file written in order sends a part
    /// each `streamChunkSize` bytes while it is written (`PartsStream`).
    public var parallelUploadThreshold: Int64
    /// How many parts a parallel upload has at most (sent up to 32 at a
    /// time); fewer when parts would be smaller than `parallelUploadMinPartSize`.
    public var parallelUploadParts: Int
    public var parallelUploadMinPartSize: Int64
    /// Seconds: a store whose measured round trip (`ObjectStore.roundTrip`)
    /// is shorter than this (this host, the LAN) is near: it gets a file of
    /// up to `singleRequestMax` in one request at close and no parts at
    /// close (`ParallelUploads.route`); a store not measured yet is far,
    /// and with 0 every store is.
    public var parallelUploadMinRoundTrip: TimeInterval
    /// A store nearer than `parallelUploadMinRoundTrip` gets a file of up
    /// to this many bytes at close in one request, written in order or
    /// not (there one connection is as fast as the machine, and a request
    /// cut short costs less to send again than a session costs to keep);
    /// a larger file written in order streams once it is this large. 0:
    /// never one request.
    public var singleRequestMax: Int64

    public init(
        uid: UInt32 = getuid(), gid: UInt32 = getgid(),
        fileMode: UInt32 = 0o644, dirMode: UInt32 = 0o755,
        statTTL: TimeInterval = 60, negativeTTL: TimeInterval = 5,
        statCacheCapacity: Int = 200_000,
        cacheDirectory: String? = nil, cacheSize: Int64 = 1 << 30,
        readAheadBudget: Int64 = 256 << 20,
        readAheadInitial: Int64 = 1 << 20, readAheadMax: Int64 = 64 << 20, kernelReadAhead: Int64 = 16 << 20,
        prefix: String = "", readOnly: Bool = false, bucket: String = "", streamChunkSize: Int64 = 64 << 20,
        uploadRetryWindow: TimeInterval = 120, recoveryRetryInterval: TimeInterval = 10,
        recoveryRetryMaxInterval: TimeInterval = 300,
        renameCopyLimit: Int64 = 64 << 20, listingStatWidth: Int = 16,
        parallelUploadThreshold: Int64 = 64 << 20, parallelUploadParts: Int = 8, parallelUploadMinPartSize: Int64 = 8 << 20,
        parallelUploadMinRoundTrip: TimeInterval = 0.010, singleRequestMax: Int64 = 1 << 30
    ) {
        self.uid = uid
        self.gid = gid
        self.fileMode = fileMode
        self.dirMode = dirMode
        self.statTTL = statTTL
        self.negativeTTL = negativeTTL
        self.statCacheCapacity = statCacheCapacity
        self.cacheDirectory = cacheDirectory
        self.cacheSize = cacheSize
        self.readAheadBudget = readAheadBudget
        self.readAheadInitial = readAheadInitial
        self.readAheadMax = readAheadMax
        self.kernelReadAhead = kernelReadAhead
        self.prefix = prefix
        self.readOnly = readOnly
        self.bucket = bucket
        self.streamChunkSize = max(256 << 10, streamChunkSize / (256 << 10) * (256 << 10))
        self.uploadRetryWindow = uploadRetryWindow
        self.recoveryRetryInterval = recoveryRetryInterval
        self.recoveryRetryMaxInterval = max(recoveryRetryInterval, recoveryRetryMaxInterval)
        self.renameCopyLimit = renameCopyLimit
        self.listingStatWidth = max(1, listingStatWidth)
        self.parallelUploadThreshold = max(0, parallelUploadThreshold)
        self.parallelUploadParts = max(1, parallelUploadParts)
        self.parallelUploadMinPartSize = max(1, parallelUploadMinPartSize)
        self.parallelUploadMinRoundTrip = max(0, parallelUploadMinRoundTrip)
        self.singleRequestMax = max(0, singleRequestMax)
    }

    /// The prefix as object names use it: "" or segments joined by "/" with
    /// a trailing "/" (empty segments collapse, as `child("a//b")` does).
    public var objectPrefix: String {
        let segments = prefix.split(separator: "/", omittingEmptySubsequences: true)
        return segments.isEmpty ? "" : segments.joined(separator: "/") + "/"
    }

    /// The kernel's entry and attribute timeouts.
    var kernelTimeout: Double { max(0, statTTL) }
}

extension Duration {
    /// `seconds` as a Duration; negative or non-finite values are zero.
    init(seconds: TimeInterval) {
        self = seconds.isFinite && seconds > 0 ? .nanoseconds(Int64(min(seconds, 1e9) * 1e9)) : .zero
    }
}
