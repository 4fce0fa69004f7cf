import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

// The one place where errno values are chosen. Every errno the kernel gets
// is an `ErrnoCode` (below), chosen by one of three tables here:
// - `ErrnoMapping.errno(for:during:)`: a store failure, by what the core was doing;
// - `Refusal`: a rule of POSIX or of the mount the request breaks, found
//   by the core itself before or without asking the store;
// - `ErrnoMapping.errno(forLocalFailure:)`: a failure of the local disk (staged files,
//   the recovery folder).
// FuseBridge answers its own refusals (foreign xattr namespaces, operations
// the filesystem does not offer) with `Refusal` cases too, and names errnos in
// its metrics and logs by `ErrnoCode.name`. Nothing else in FSCore or
// FuseBridge names an errno (ErrnoScanTests greps for it). The user-facing
// list is docs/semantics.md (Errors).

/// Every errno the filesystem answers, named as in C. The tables below
/// choose among these cases, so an errno always has its name at hand for
/// metrics and logs (the case's raw value), and no code can answer an errno
/// the tables do not know.
public enum ErrnoCode: String, Sendable, CaseIterable {
    case EPERM, ENOENT, EINTR, EIO, EBADF, EAGAIN, EACCES, EEXIST, EXDEV, ENOTDIR, EISDIR, EINVAL, ENOTTY, EFBIG
    case ENOSPC, EROFS, ERANGE, ENAMETOOLONG, ENOTEMPTY, ENODATA, EOPNOTSUPP, ESTALE, EDQUOT, E2BIG

    /// The name, as errno(3) spells it ("ENOENT").
    public var name: String { rawValue }

    /// The value the kernel is told.
    public var value: Int32 {
        switch self {
        case .EPERM: Glibc.EPERM
        case .ENOENT: Glibc.ENOENT
        case .EINTR: Glibc.EINTR
        case .EIO: Glibc.EIO
        case .EBADF: Glibc.EBADF
        case .EAGAIN: Glibc.EAGAIN
        case .EACCES: Glibc.EACCES
        case .EEXIST: Glibc.EEXIST
        case .EXDEV: Glibc.EXDEV
        case .ENOTDIR: Glibc.ENOTDIR
        case .EISDIR: Glibc.EISDIR
        case .EINVAL: Glibc.EINVAL
        case .ENOTTY: Glibc.ENOTTY
        case .EFBIG: Glibc.EFBIG
        case .ENOSPC: Glibc.ENOSPC
        case .EROFS: Glibc.EROFS
        case .ERANGE: Glibc.ERANGE
        case .ENAMETOOLONG: Glibc.ENAMETOOLONG
        case .ENOTEMPTY: Glibc.ENOTEMPTY
        case .ENODATA: Glibc.ENODATA
        case .EOPNOTSUPP: Glibc.EOPNOTSUPP
        case .ESTALE: Glibc.ESTALE
        case .EDQUOT: Glibc.EDQUOT
        case .E2BIG: Glibc.E2BIG
        }
    }
}

/// What the core was doing when a store call failed. The same failure can
/// mean different things: a missing object is an absent name to a lookup,
/// but data in danger to an upload.
public enum StoreOperation: String, Sendable, CaseIterable {
    /// Resolving a name: stat of an object or placeholder, the probe
    /// listing of a directory, getattr.
    case lookup
    /// Listing a directory for readdir (or a subtree for a walk).
    case list
    /// Reading the bytes of the generation an open file pinned.
    case read
    /// Making a new empty object: mkdir's placeholder, mknod, symlink.
    case create
    /// Uploading a written file's bytes at flush, fsync or release.
    case upload
    /// Deleting an object (unlink, rmdir, the old name after a rename copy).
    case delete
    /// Patching an object's properties or custom metadata (xattrs, chmod,
    /// chown, utimens).
    case metadata
    /// The server-side copy (or download and upload) of a file rename.
    case copy
    /// One step of a directory rename (its objects are copied one by one).
    case directoryRename
}

/// The tables that are functions (the third, `Refusal`, is an enum).
public enum ErrnoMapping {
    /// The errno for `error` met while doing `operation`.
    ///
    /// The switch is exhaustive on purpose: a new `StoreError` case or a new
    /// operation must be decided here, not fall into a default. Rows:
    public static func errno(for error: StoreError, during operation: StoreOperation) -> ErrnoCode {
        switch error {
        case .notFound:
            switch operation {
            case .lookup, .list, .read, .create, .delete, .metadata, .copy:
                // The object is not there (or no longer): an absent name, which
                // shells probe for routinely.
                return .ENOENT
            case .upload:
                // Uploads are unconditional or pinned by a generation precondition,
                // so a 404 means the bucket or path is unusable, not that the
                // file vanished: the bytes are kept, the writer must hear "I/O
                // error", never "no such file" for a file it holds open.
                return .EIO
            case .directoryRename:
                // The directory itself was found before the rename began; an
                // object vanishing halfway leaves the rename partly done, which
                // ENOENT (read as "nothing to rename") would hide.
                return .EIO
            }
        case .bucketNotFound:
            // The bucket was there at mount time (the CLI checks it). If it
            // vanishes, ENOENT would make every path look merely absent and
            // invite tools to recreate things; EIO says the mount is broken.
            return .EIO
        case .preconditionFailed:
            // Someone else changed the object under us (the generation we
            // pinned or expected is no longer live): NFS's "stale handle". On
            // upload the other writer's object is left as it is.
            return .ESTALE
        case .unauthenticated:
            // Missing or expired credentials. EACCES is what tools report as
            // "Permission denied", which points the user at credentials;
            // EPERM would claim the operation itself is never allowed.
            return .EACCES
        case .permissionDenied:
            // IAM or Security Rules refuse this request: "Permission denied".
            return .EACCES
        case .invalidArgument:
            switch operation {
            case .upload:
                // The request was built from the file's properties (e.g. a
                // property value the service refuses); the writer did nothing
                // invalid with its write calls, and the bytes are kept in the
                // recovery folder: an I/O error, like every lost upload.
                return .EIO
            case .lookup, .list, .read, .create, .delete, .metadata, .copy, .directoryRename:
                // The service refused the request's arguments (a name or a
                // metadata value it does not accept).
                return .EINVAL
            }
        case .unavailable:
            // The transport already retried with backoff; this is final.
            return .EIO
        case .quotaExceeded:
            switch operation {
            case .upload:
                // A 429 at close: the upload already retried for
                // `--upload-retry-time`, and close or fsync cannot be "tried
                // again" by the caller (after close the descriptor is gone).
                // The bytes are in the recovery folder and retried in the
                // background; the writer must see that they did not reach the
                // bucket, which EIO says and EAGAIN (ignored by many tools, and
                // read as "nothing happened") does not.
                return .EIO
            case .lookup, .list, .read, .create, .delete, .metadata, .copy, .directoryRename:
                // Rate or bandwidth limits (HTTP 429 after retries): transient
                // by nature, and the call can simply be made again, so EAGAIN
                // ("try again") rather than EIO, which reads as data loss, or
                // EDQUOT, which means a full disk quota.
                return .EAGAIN
            }
        case .cancelled:
            // Only the kernel interrupting a request cancels our work; for an
            // upload the bytes stay staged (or in the recovery folder).
            return .EINTR
        case .other:
            // Anything the store could not classify: an I/O error.
            return .EIO
        }
    }

    /// The errno for a failed call on a local file (staging, recovery folder):
    /// a full disk or quota is told as such (the user can free space), any
    /// other failure is an I/O error (the caller can do nothing about EBADF
    /// or EFAULT of our own descriptors).
    public static func errno(forLocalFailure code: Int32) -> ErrnoCode {
        switch code {
        case Glibc.ENOSPC: .ENOSPC
        case Glibc.EDQUOT: .EDQUOT
        default: .EIO
        }
    }
}

/// A rule a request breaks, found by the core itself (not a store failure),
/// or by FuseBridge for requests it answers without the core (foreign xattr
/// namespaces, operations the filesystem does not offer, the caller's
/// buffer in the xattr size protocol). Each case is one errno; the case
/// says which rule, so call sites read as the rule, and the errno is chosen
/// once.
public enum Refusal: Sendable, CaseIterable {
    /// The name (or inode, or object behind it) does not exist.
    case notFound
    /// A new name is taken: mkdir, mknod, symlink, RENAME_NOREPLACE,
    /// XATTR_CREATE.
    case exists
    /// A file operation on a directory (unlink, open, truncate, rename of a
    /// file over a directory).
    case isDirectory
    /// A directory operation on a file (rmdir, lookup in a file, rename of
    /// a directory over a file).
    case notDirectory
    /// rmdir, or a rename onto a directory, with something below.
    case notEmpty
    /// A new name over NAME_MAX, or an object name over the service's
    /// 1,024 bytes.
    case nameTooLong
    /// Arguments no call could make work: a negative offset, a name no
    /// object can have, RENAME_EXCHANGE, a move into itself, a link that is
    /// not a symbolic link, an xattr value that is not UTF-8 text, an xattr
    /// name missing or not UTF-8 on a set.
    case invalid
    /// A handle that is not open, or not open for this (write on a
    /// read-only handle).
    case badHandle
    /// Allowed to no one on this mount: attributes of the root, special
    /// files, POSIX attributes through xattrs, read-only properties, hard
    /// links (what link(2) answers where the filesystem has none: an object
    /// store cannot give one object two names).
    case notPermitted
    /// Any change on a `--read-only` mount.
    case readOnly
    /// Past the service's 5 TiB object size.
    case tooLarge
    /// A custom metadata key, value or total over the service's limits:
    /// what setxattr answers for a value the filesystem cannot hold.
    case attributeTooLarge
    /// A rename the store cannot do in place (no server-side copy, or over
    /// `--rename-copy-limit`): `mv` then copies and deletes by itself.
    case crossDevice
    /// No such extended attribute (getxattr, XATTR_REPLACE, reserved keys,
    /// a name that is not UTF-8 on a get or remove).
    case noAttribute
    /// An attribute namespace or property the object cannot carry; an
    /// operation that callers expect to be refused so they fall back to
    /// read and write (fallocate: glibc's posix_fallocate then writes
    /// zeros; copy_file_range: the kernel then copies by splice).
    case notSupported
    /// The generation an open file read from is gone (someone replaced the
    /// object): NFS's "stale file handle".
    case stale
    /// A metadata change lost the race with other writers twice in a row:
    /// the caller may simply try again.
    case tryAgain
    /// The core's own bookkeeping could not go on (an inode forgotten
    /// midway, a staged file refused): the request failed, nothing is
    /// wrong with the caller's arguments. Also what FuseBridge answers
    /// for a request dropped without a reply (a bug, logged as one).
    case ioError
    /// getxattr or listxattr with a buffer too small for the value or list
    /// (a size of 0 asks for the length instead).
    case bufferTooSmall
    /// An ioctl the filesystem does not know (lsattr, FIEMAP, ...):
    /// "inappropriate ioctl for device".
    case inappropriateIoctl

    /// The errno of the rule.
    public var code: ErrnoCode {
        switch self {
        case .notFound: .ENOENT
        case .exists: .EEXIST
        case .isDirectory: .EISDIR
        case .notDirectory: .ENOTDIR
        case .notEmpty: .ENOTEMPTY
        case .nameTooLong: .ENAMETOOLONG
        case .invalid: .EINVAL
        case .badHandle: .EBADF
        case .notPermitted: .EPERM
        case .readOnly: .EROFS
        case .tooLarge: .EFBIG
        case .attributeTooLarge: .E2BIG
        case .crossDevice: .EXDEV
        case .noAttribute: .ENODATA
        case .notSupported: .EOPNOTSUPP
        case .stale: .ESTALE
        case .tryAgain: .EAGAIN
        case .ioError: .EIO
        case .bufferTooSmall: .ERANGE
        case .inappropriateIoctl: .ENOTTY
        }
    }

    /// The errno's value, for the kernel.
    public var errno: Int32 { code.value }
}

/// Whether a system call failed only because a signal interrupted it (then
/// it is simply made again).
func wasInterrupted(_ code: Int32) -> Bool { code == EINTR }

extension FSError {
    /// The errno for `error` met during `operation`, with what was being
    /// done for the log line.
    public init(_ error: StoreError, during operation: StoreOperation, _ context: String) {
        self.init(code: ErrnoMapping.errno(for: error, during: operation), "\(context): \(error)")
    }

    /// The errno for a store failure of `operation` on `object` (at mount
    /// path `path`), logged with its cause. Absence is routine (shells
    /// probe for files), so it is only logged at debug.
    static func logged(
        _ error: StoreError, during storeOperation: StoreOperation, _ operation: String, path: String, object: String, logger: Logger
    ) -> FSError {
        let failure = FSError(error, during: storeOperation, "\(operation) \(object)")
        if case .notFound = error {
            logger.debug("\(failure)")
        } else {
            logger.warning("\(operation) failed", metadata: [
                "operation": "\(operation)", "path": "/\(path)", "object": "\(object)", "cause": "\(error)",
                "errno": "\(failure.errno)",
            ])
        }
        return failure
    }

    /// A request refused by a rule (see `Refusal`).
    public init(_ refusal: Refusal, _ message: String = "") {
        self.init(code: refusal.code, message)
    }

    /// A failed call on a local file (see `errno(forLocalFailure:)`).
    public init(localFailure code: Int32, _ message: String) {
        self.init(code: ErrnoMapping.errno(forLocalFailure: code), message)
    }

    /// Whether this error is `refusal`'s errno.
    public func `is`(_ refusal: Refusal) -> Bool { code == refusal.code }
}

extension FSError {
    /// The kernel interrupted the request: a signal reached the process
    /// waiting for it (Ctrl-C, kill) while it waited on the network. EINTR
    /// ends that wait at once; work other requests share (a read-ahead
    /// download, an upload) goes on without it. The same errno as a
    /// cancelled store call (`StoreError.cancelled`).
    public static func interrupted(_ what: String) -> FSError {
        FSError(code: .EINTR, "\(what): interrupted")
    }
}

/// An errno for the kernel, with what happened for the log. Made only from
/// the tables above (a `Refusal`, a store failure, a local failure), so
/// every errno the core answers was chosen in this file.
public struct FSError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: ErrnoCode
    public let message: String

    /// The errno's value, for the kernel.
    public var errno: Int32 { code.value }

    fileprivate init(code: ErrnoCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "errno \(errno) (\(String(cString: strerror(errno))))\(message.isEmpty ? "" : ": \(message)")" }
}
