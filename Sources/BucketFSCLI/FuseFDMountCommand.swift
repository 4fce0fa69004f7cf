import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `bucketfs fuse-fd-mount --uid U --gid G gs://BUCKET[/PREFIX] DIR [-- MOUNT-OPTIONS…]`
///
/// The privileged half of an unprivileged mount, as CSI drivers do it:
/// opens /dev/fuse, mounts it on DIR itself (mount(2), type
/// `fuse.bucketfs`, source the bucket URL, `nodev,nosuid` and
/// `fd=N,rootmode=40000,user_id=U,group_id=G,allow_other,default_permissions`),
/// drops to U:G and execs `bucketfs mount MOUNT-OPTIONS… URL /dev/fd/N`,
/// which serves the mount with no privilege at all.
///
/// Exit codes: 5 DIR unusable or mount(2) refused (not root); 1 the
/// privileges could not be dropped or the exec failed (the mount is
/// undone first); 64 bad command line. After the exec, `bucketfs mount`'s.
struct FuseFDMountCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fuse-fd-mount",
        abstract: "Mount a bucket as root and serve it as another user through a FUSE file descriptor.",
        discussion: """
            Run as root: opens /dev/fuse, mounts it on DIR with nodev,nosuid,allow_other,default_permissions \
            (so every user sees the files with the permissions the mount reports), drops to --uid and --gid, \
            and runs `bucketfs mount MOUNT-OPTIONS URL /dev/fd/N` in its place, which serves the mount \
            unprivileged. The mount is then the caller's: when the serving process ends, DIR reports \
            "Transport endpoint is not connected" until `fusermount3 -uz DIR` or `umount -l DIR`. \
            The cache directory must be writable by the user, e.g. `-- --cache-dir /var/cache/bucketfs-1000`.

            Exit codes: 5 DIR unusable or the mount refused (not root), 1 privileges not dropped or \
            bucketfs not started (the mount is undone), 64 bad command line; then those of bucketfs mount.
            """)

    @Option(help: "The user ID the mount is served as (and owns its files).")
    var uid: UInt32

    @Option(help: "The group ID the mount is served as.")
    var gid: UInt32

    @Flag(help: "Mount read-only: the kernel refuses every write (EROFS), and bucketfs serves it --read-only.")
    var readOnly = false

    @Argument(help: "gs://BUCKET[/PREFIX], or just BUCKET.")
    var bucket: String

    @Argument(help: "The directory to mount on.")
    var directory: String

    @Argument(parsing: .postTerminator, help: "Options for bucketfs mount, after --.")
    var mountOptions: [String] = []

    func run() throws {
        do {
            try mountAndServe()
        } catch let error as CLIError {
            eprint("bucketfs: \(error)")
            throw ExitCode(error.exitCode)
        }
    }

    private func mountAndServe() throws(CLIError) {
        let target = try MountTarget(bucket)
        try MountpointCheck.verify(directory)
        let directory = MountWatch.absolute(self.directory)
        let fd = try Self.openFuseDevice()
        let data = "fd=\(fd),rootmode=40000,user_id=\(uid),group_id=\(gid),allow_other,default_permissions"
        let flags = UInt(MS_NODEV | MS_NOSUID) | (readOnly ? UInt(MS_RDONLY) : 0)
        guard mount(target.description, directory, "fuse.bucketfs", flags, data) == 0 else {
            let cause = Self.lastError()
            close(fd)
            throw .bucket("cannot mount on \(directory): \(cause)\(getuid() == 0 ? "" : " (fuse-fd-mount must run as root)")", exitCode: 5)
        }
        do throws(CLIError) {
            try dropPrivileges()
            // Kept across the exec: open(2) without O_CLOEXEC leaves it
            // clear, but say so rather than rely on it.
            guard fcntl(fd, F_SETFD, 0) == 0 else { throw CLIError.bucket("fcntl: \(Self.lastError())", exitCode: 1) }
            let arguments = ["bucketfs", "mount", "--" + Settings.mountedOn.name, directory]
                + (readOnly ? ["--" + Settings.readOnly.name] : []) + mountOptions + [target.description, "/dev/fd/\(fd)"]
            try OwnExecutable.exec(OwnExecutable.path, arguments)
        } catch {
            // The mount is ours until the exec: nobody would serve it.
            umount2(directory, Int32(MNT_DETACH))
            throw error
        }
    }

    /// /dev/fuse on a descriptor above 3, which `bucketfs mount` can pass on
    /// to its background process (0-3 are taken there), and which is not
    /// closed at exec.
    private static func openFuseDevice() throws(CLIError) -> Int32 {
        let opened = open("/dev/fuse", O_RDWR)
        guard opened >= 0 else { throw .bucket("cannot open /dev/fuse: \(lastError())", exitCode: 5) }
        guard opened <= 3 else { return opened }
        let moved = fcntl(opened, F_DUPFD, 4)
        let cause = lastError()
        close(opened)
        guard moved >= 0 else { throw .bucket("cannot move the /dev/fuse descriptor: \(cause)", exitCode: 5) }
        return moved
    }

    /// setgroups, setgid, setuid in that order (each needs the privilege
    /// the next one gives up), then checks that none can be regained.
    private func dropPrivileges() throws(CLIError) {
        var groups = [gid_t(gid)]
        guard setgroups(1, &groups) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
            throw .bucket("cannot switch to uid \(uid), gid \(gid): \(Self.lastError())", exitCode: 1)
        }
        let regained = uid != 0 && (setuid(0) == 0 || seteuid(0) == 0)
        guard getuid() == uid, geteuid() == uid, getgid() == gid, getegid() == gid, !regained else {
            throw .bucket("the switch to uid \(uid), gid \(gid) did not take", exitCode: 1)
        }
    }

    private static func lastError() -> String { String(cString: strerror(errno)) }
}
