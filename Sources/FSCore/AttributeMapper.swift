import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Turns objects into POSIX attributes, following `gcloud storage` /
/// `gsutil -P`, which keep POSIX attributes in custom metadata:
/// `goog-reserved-file-mtime` (decimal seconds since the epoch),
/// `goog-reserved-posix-mode` (octal, "644" or "100644"),
/// `goog-reserved-posix-uid` and `-gid` (decimal). A FIFO, socket or device
/// file is an empty object whose mode names its type ("10644" a FIFO), and
/// a device's number is in `goog-reserved-posix-rdev`.
struct AttributeMapper: Sendable {
    static let mtimeKey = "goog-reserved-file-mtime"
    static let modeKey = "goog-reserved-posix-mode"
    static let uidKey = "goog-reserved-posix-uid"
    static let gidKey = "goog-reserved-posix-gid"
    static let atimeKey = "goog-reserved-file-atime"
    static let rdevKey = "goog-reserved-posix-rdev"
    /// gcsfuse's mark of a symbolic link: an (empty) object whose custom
    /// metadata holds the target. Both mounts read each other's links.
    static let symlinkKey = "gcsfuse_symlink_target"
    /// File types an empty object can stand for besides a regular file.
    static let specialTypes: Set<UInt32> = [UInt32(S_IFIFO), UInt32(S_IFCHR), UInt32(S_IFBLK), UInt32(S_IFSOCK)]

    let options: MountOptions
    /// Directories without a placeholder (with known metadata) show this.
    let mountTime: Date

    /// A file, a symbolic link when the object carries a link target (its
    /// size is then the target's length, as lstat reports it), or a
    /// FIFO/socket/device when its stored mode says so.
    func file(_ info: ObjectInfo, inode: UInt64) -> FileAttributes {
        let link = info.symlinkTarget
        let type = Self.fileType(info)
        let mode = link == nil ? Self.permissions(info.customMetadata, default: options.fileMode) : 0o777
        let mtime = Self.modificationTime(info)
        return FileAttributes(
            inode: inode, size: link.map { Int64($0.utf8.count) } ?? info.size,
            mode: type | mode, linkCount: 1,
            uid: Self.id(info.customMetadata[Self.uidKey], default: options.uid),
            gid: Self.id(info.customMetadata[Self.gidKey], default: options.gid),
            accessTime: Self.seconds(info.customMetadata[Self.atimeKey]) ?? mtime, modificationTime: mtime,
            changeTime: Timestamp(info.updated), blockSize: Self.preferredIOSize,
            rdev: type == UInt32(S_IFCHR) || type == UInt32(S_IFBLK) ? info.customMetadata[Self.rdevKey].flatMap { UInt64($0) } ?? 0 : 0)
    }

    /// st_blksize of files: the size of one FUSE request (and of a block
    /// of the cache), so `cp`, `cat` and friends move 1 MiB per system
    /// call instead of 128 KiB (a quarter of the requests for a copy in).
    static let preferredIOSize: Int32 = 1 << 20

    /// A directory; `placeholder` is its `dir/` object when its metadata is
    /// known. POSIX keys on the placeholder apply, as `chmod` on a
    /// directory will store them there. Its mtime and ctime are also those
    /// of the last change this mount made to its entries, if later: a
    /// bucket keeps no time for a prefix (and writing the placeholder on
    /// every create would double the requests of small files). `changed`:
    /// that last change (`InodeTable.Record.entriesChanged`).
    func directory(placeholder: ObjectInfo?, inode: UInt64, changed: Timestamp?) -> FileAttributes {
        let metadata = placeholder?.customMetadata ?? [:]
        var mtime = placeholder.map(Self.modificationTime) ?? Timestamp(mountTime)
        var ctime = placeholder.map { Timestamp($0.updated) } ?? mtime
        if let changed {
            mtime = Self.later(mtime, changed)
            ctime = Self.later(ctime, changed)
        }
        return FileAttributes(
            inode: inode, size: 0, mode: UInt32(S_IFDIR) | Self.permissions(metadata, default: options.dirMode),
            linkCount: 2,
            uid: Self.id(metadata[Self.uidKey], default: options.uid),
            gid: Self.id(metadata[Self.gidKey], default: options.gid),
            accessTime: placeholder.flatMap { Self.seconds($0.customMetadata[Self.atimeKey]) } ?? mtime,
            modificationTime: mtime, changeTime: ctime)
    }

    /// What `stat` shows for `node` (nil: absent); `changed`: see
    /// `directory`.
    func attributes(_ node: MetadataCache.Node, inode: UInt64, changed: Timestamp?) -> FileAttributes? {
        switch node {
        case .file(let info): return file(info, inode: inode)
        case .directory(let placeholder): return directory(placeholder: placeholder, inode: inode, changed: changed)
        case .absent: return nil
        }
    }

    static func later(_ a: Timestamp, _ b: Timestamp) -> Timestamp {
        (a.seconds, a.nanoseconds) >= (b.seconds, b.nanoseconds) ? a : b
    }

    /// S_IFREG, S_IFLNK, or the special type an empty object's stored mode names.
    static func fileType(_ info: ObjectInfo) -> UInt32 {
        if info.symlinkTarget != nil { return UInt32(S_IFLNK) }
        guard info.size == 0, let text = info.customMetadata[modeKey]?.trimmingCharacters(in: .whitespaces),
            let value = UInt32(text, radix: 8), specialTypes.contains(value & UInt32(S_IFMT))
        else { return UInt32(S_IFREG) }
        return value & UInt32(S_IFMT)
    }

    /// Permission bits from the stored octal mode, setuid, setgid and
    /// sticky included (the mount is nosuid, so a setuid bit grants
    /// nothing; the sticky bit guards deletes in shared directories). The
    /// file type in a "100644" is dropped: the object decides it.
    static func permissions(_ metadata: [String: String], default fallback: UInt32) -> UInt32 {
        guard let text = metadata[modeKey]?.trimmingCharacters(in: .whitespaces),
            let value = UInt32(text, radix: 8)
        else { return fallback & 0o7777 }
        return value & 0o7777
    }

    static func modificationTime(_ info: ObjectInfo) -> Timestamp {
        seconds(info.customMetadata[mtimeKey]) ?? Timestamp(info.updated)
    }

    /// A time stored as decimal seconds since the epoch.
    static func seconds(_ text: String?) -> Timestamp? {
        guard let text = text?.trimmingCharacters(in: .whitespaces), let seconds = Double(text), seconds.isFinite,
            abs(seconds) < 1e15
        else { return nil }
        return Timestamp(Date(timeIntervalSince1970: seconds))
    }

    static func id(_ text: String?, default fallback: UInt32) -> UInt32 {
        guard let text, let value = UInt32(text.trimmingCharacters(in: .whitespaces)) else { return fallback }
        return value
    }
}

extension ObjectInfo {
    /// The link target when this object is a symbolic link.
    var symlinkTarget: String? { customMetadata[AttributeMapper.symlinkKey] }
}
