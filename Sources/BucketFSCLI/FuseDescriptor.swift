import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Serving a FUSE mount someone else made: the caller opens /dev/fuse,
/// mounts it with `fd=N` (`bucketfs fuse-fd-mount`, a CSI driver) and
/// hands the descriptor over; bucketfs is then run with `/dev/fd/N` as
/// its mountpoint, which libfuse (3.3 and later) takes as "use this
/// descriptor, mount nothing". The unmount is the caller's too: libfuse
/// never unmounts such a session, and bucketfs runs no fusermount3 for it.
enum FuseDescriptor {
    /// /dev/fuse is character device 10:229 on every Linux (glibc's dev_t
    /// encoding of major 10, minor 229).
    static let fuseDevice: dev_t = (10 << 8) | 229

    /// N of a mountpoint spelled `/dev/fd/N`, else nil.
    static func number(inMountpoint path: String) -> Int32? {
        guard path.hasPrefix("/dev/fd/") else { return nil }
        return Int32(path.dropFirst("/dev/fd/".count)).flatMap { $0 >= 0 ? $0 : nil }
    }

    /// Refuses (exit 5) a descriptor that is not open or is not /dev/fuse.
    static func verify(_ fd: Int32, path: String) throws(CLIError) {
        var info = stat()
        guard fcntl(fd, F_GETFD) >= 0, fstat(fd, &info) == 0 else {
            throw .bucket(
                "mountpoint \(path) is not an open file descriptor: the caller must open /dev/fuse, mount it and pass it on as descriptor \(fd)",
                exitCode: 5)
        }
        guard info.st_mode & S_IFMT == S_IFCHR, info.st_rdev == fuseDevice else {
            throw .bucket("mountpoint \(path) is open, but not on /dev/fuse: only a mounted FUSE descriptor can be served", exitCode: 5)
        }
    }
}
