import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// mount(8) and /etc/fstab: `mount -t fuse.bucketfs` runs mount.fuse3,
    /// which runs `bucketfs BUCKET MOUNTPOINT -o opts` from mount's own PATH
    /// (/usr/local/bin, /usr/bin, ...). The test puts a symlink to the built
    /// binary at /usr/local/bin/bucketfs for its duration (only if nothing
    /// is there; an existing one is left alone and the test fails, saying why).
    @Suite struct SystemMount {
        static let installed = "/usr/local/bin/bucketfs"

        /// Links the built binary into mount's PATH; returns a teardown.
        static func install() throws -> () -> Void {
            let binary = try MountEnv.binary()
            var st = stat()
            if lstat(installed, &st) == 0 {
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: installed)
                guard target == binary else {
                    throw HarnessError("\(installed) exists and is not this build's binary; remove it to run this test")
                }
                return {}
            }
            guard symlink(binary, installed) == 0 else {
                throw HarnessError("cannot link \(installed): \(String(cString: strerror(errno)))")
            }
            return { unlink(installed) }
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
