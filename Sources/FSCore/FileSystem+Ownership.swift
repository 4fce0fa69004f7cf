import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Who owns a new entry, and the times of the directories whose entries
/// change.
///
/// A new file, directory, link or special file belongs to its caller
/// (`Caller.current`), as on a local disk; in a setgid directory it takes
/// the directory's group instead, and a new directory there inherits the
/// setgid bit. Owner and mode are stored (`goog-reserved-posix-uid`,
/// `-gid`, `-mode`) only where they differ from the mount's defaults, so a
/// single-user mount writes no extra metadata.
extension FileSystem {
    /// Custom metadata a new entry of `type` (S_IFREG, S_IFDIR, S_IFLNK, or
    /// a special type) with permission bits `mode` in `parent` starts with.
    func newEntryMetadata(parent: UInt64, type: UInt32, mode: UInt32) async -> [String: String] {
        let caller = Caller.current
        let parentAttributes = try? await getattr(parent).attributes
        let inheritsGroup = (parentAttributes?.mode ?? 0) & UInt32(S_ISGID) != 0
        let uid = caller?.uid ?? options.uid
        let gid = inheritsGroup ? parentAttributes!.gid : caller?.gid ?? options.gid
        var permissions = mode & 0o7777
        if type == UInt32(S_IFDIR) && inheritsGroup { permissions |= UInt32(S_ISGID) }
        var metadata: [String: String] = [:]
        if uid != options.uid { metadata[AttributeMapper.uidKey] = String(uid) }
        if gid != options.gid { metadata[AttributeMapper.gidKey] = String(gid) }
        switch type {
        case UInt32(S_IFLNK):
            break
        case UInt32(S_IFDIR):
            if permissions != options.dirMode { metadata[AttributeMapper.modeKey] = String(permissions, radix: 8) }
        case UInt32(S_IFREG):
            if permissions != options.fileMode { metadata[AttributeMapper.modeKey] = String(permissions, radix: 8) }
        default:
            // The type is what makes the object a FIFO, socket or device.
            metadata[AttributeMapper.modeKey] = String(type | permissions, radix: 8)
        }
        return metadata
    }

    /// Directories whose entries this mount just changed show it in their
    /// mtime and ctime.
    func touchDirectories(_ inodes: UInt64...) {
        let now = Timestamp(Date())
        state.withLock { s in for inode in inodes { s.inodes.noteEntriesChanged(inode, at: now) } }
    }
}
