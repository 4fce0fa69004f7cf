import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// mount(8) and /etc/fstab: `mount -t fuse.bucketfs` runs mount.fuse3,
    /// which runs `bucketfs BUCKET MOUNTPOINT -o opts` from mount's own PATH
    /// (/usr/local/bin, /usr/bin, ...). The test puts a symlink to the built
    /// binary at /usr/local/bin/bucketfs for its duration, under a lock
    /// that serialises it across checkouts of the project on one machine.
    @Suite struct SystemMount {
        static let installed = "/usr/local/bin/bucketfs"

        /// Serialises the test across checkouts of the project on one
        /// machine: each would link its own build at the same path.
        static let lockPath = "/run/lock/bucketfs-systemmount-test.lock"

        /// Links the built binary into mount's PATH; returns a teardown.
        /// Holds an exclusive flock for the test's duration; a symlink left
        /// by a crashed run of another checkout (a link to some
        /// `.build/.../bucketfs`) is replaced, anything else is left alone.
        static func install() throws -> () -> Void {
            let binary = try MountEnv.binary()
            let lock = open(lockPath, O_CREAT | O_RDWR | O_CLOEXEC, 0o644)
            guard lock >= 0 else { throw HarnessError("cannot open \(lockPath): \(String(cString: strerror(errno)))") }
            guard flock(lock, LOCK_EX) == 0 else {
                close(lock)
                throw HarnessError("cannot lock \(lockPath): \(String(cString: strerror(errno)))")
            }
            var st = stat()
            if lstat(installed, &st) == 0 {
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: installed)
                if target == binary { return { close(lock) } }
                guard let target, target.contains("/.build"), target.hasSuffix("/bucketfs") else {
                    close(lock)
                    throw HarnessError("\(installed) exists and is not this build's binary; remove it to run this test")
                }
                unlink(installed)
            }
            guard symlink(binary, installed) == 0 else {
                close(lock)
                throw HarnessError("cannot link \(installed): \(String(cString: strerror(errno)))")
            }
            return {
                unlink(installed)
                close(lock)
            }
        }

        @Test("mount -t fuse.bucketfs and an /etc/fstab line mount the bucket")
        func mountTypeAndFstab() async throws {
            let endpoint = try MountEnv.emulator()
            let prefix = MountEnv.uniquePrefix("sysmount")
            try await DirectGCS.emulator().put("\(prefix)/hello.txt", Data("hi from mount(8)\n".utf8))
            let uninstall = try Self.install()
            defer { uninstall() }
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let source = "gs://\(MountEnv.bucket)/\(prefix)"
            let options = "endpoint=\(endpoint),anonymous,stat_ttl=30,cache_dir=\(dirs.cacheDir),log_file=\(dirs.logFile)"

            let typed = try await Tools.run("/bin/mount", ["-t", "fuse.bucketfs", "-o", options, source, dirs.path])
            #expect(typed.ok, "mount -t fuse.bucketfs: \(typed.summary)")
            #expect(try String(contentsOfFile: dirs.at("hello.txt"), encoding: .utf8) == "hi from mount(8)\n")
            let unmounted = try await Tools.run("/bin/umount", [dirs.path])
            #expect(unmounted.ok, "umount: \(unmounted.summary)")
            #expect(await Kernel.waitMounted(dirs.path, false))

            // The same through an fstab line (mount -T reads an alternative fstab).
            let fstab = dirs.base + "/fstab"
            try "\(source)  \(dirs.path)  fuse.bucketfs  noauto,_netdev,\(options)  0 0\n"
                .write(toFile: fstab, atomically: true, encoding: .utf8)
            let fromTable = try await Tools.run("/bin/mount", ["-T", fstab, dirs.path])
            #expect(fromTable.ok, "mount -T fstab: \(fromTable.summary)")
            let listing = try await Tools.run("/bin/ls", [dirs.path])
            #expect(listing.lines == ["hello.txt"], "\(listing.summary)")
            #expect(try await Tools.run("/bin/umount", [dirs.path]).ok)
        }
    }
}
