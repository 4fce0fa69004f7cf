import Foundation
import FSCore
#if canImport(Glibc)
import Glibc
#endif

/// The directory a mount goes on, checked before any request and before
/// the background process starts: it must exist, be a directory, and not
/// be a FUSE mount already. libfuse would mount on a regular file (every
/// access then fails with EIO) and stack a second mount on a first (hiding
/// it), and a dead mount is better named than reported as missing.
///
/// Any other mount on the directory (a bind mount, a container's volume)
/// is fine to mount over. Every refusal is exit 5, its message names the
/// path.
///
/// `/dev/fd/N` is the other kind of mountpoint: a /dev/fuse descriptor the
/// caller opened and mounted itself (see `FuseDescriptor`). It must be open
/// and be /dev/fuse; a closed or other descriptor is refused with exit 5
/// before any request, as libfuse would only fail later and less clearly.
enum MountpointCheck {
    static func verify(_ path: String) throws(CLIError) {
        if let fd = FuseDescriptor.number(inMountpoint: path) {
            try FuseDescriptor.verify(fd, path: path)
            return
        }
        var info = stat()
        guard stat(path, &info) == 0 else {
            let code = errno
            switch code {
            case ENOENT:
                throw .bucket("mountpoint \(path) does not exist", exitCode: 5)
            case ENOTCONN:
                throw .bucket(
                    "mountpoint \(path) is a mount whose process has ended (\(Self.message(code))): unmount it first (fusermount3 -uz \(path))",
                    exitCode: 5)
            default:
                throw .bucket("cannot use mountpoint \(path): \(Self.message(code))", exitCode: 5)
            }
        }
        guard info.st_mode & S_IFMT == S_IFDIR else {
            throw .bucket("mountpoint \(path) is not a directory", exitCode: 5)
        }
        if let mounted = MountTable.entry(mountpoint: MountWatch.absolute(path)), mounted.type.hasPrefix("fuse") {
            throw .bucket(
                "mountpoint \(path) is already mounted (\(mounted.type)): unmount it first (bucketfs unmount \(path)) or choose another directory",
                exitCode: 5)
        }
    }

    private static func message(_ code: Int32) -> String { String(cString: strerror(code)) }
}
