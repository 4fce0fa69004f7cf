import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// The operations bucketfs does not offer, as a program meets them:
    /// each answers what the table in docs/semantics.md says, or the kernel
    /// does the work by itself.
    @Suite struct UnsupportedOperations {
        typealias Fallocate = @convention(c) (Int32, Int32, off_t, off_t) -> Int32
        typealias CopyFileRange = @convention(c) (Int32, UnsafeMutablePointer<off_t>?, Int32, UnsafeMutablePointer<off_t>?, Int, UInt32) -> Int

        /// A glibc function by name (fallocate and copy_file_range are
        /// _GNU_SOURCE declarations Swift's Glibc module does not import).
        static func glibc<F>(_ name: String, as type: F.Type) throws -> F {
            guard let symbol = dlsym(nil, name) else { throw HarnessError("no \(name) in glibc") }
            return unsafeBitCast(symbol, to: type)
        }

        // Checks semantics.md#unsupported-fsyncdir, semantics.md#unsupported-fallocate, semantics.md#unsupported-copy-file-range,
        // semantics.md#unsupported-ioctl, semantics.md#unsupported-access, semantics.md#unsupported-lseek,
        // semantics.md#unsupported-locks, semantics.md#unsupported-poll
        @Test("fsync of a directory succeeds, fallocate is EOPNOTSUPP (posix_fallocate falls back), an ioctl is ENOTTY; copy_file_range, seeks, locks, poll and access work through the kernel")
        func eachAnswerAsDocumented() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("unsupported")
            let data = MountEnv.pattern(300_000, seed: 1220)
            try await gcs.put("\(prefix)/dir/a.bin", data)
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let fallocate = try Self.glibc("fallocate", as: Fallocate.self)
            let copyFileRange = try Self.glibc("copy_file_range", as: CopyFileRange.self)

            // fsyncdir: success.
            let directory = open(mount.at("dir"), O_RDONLY | O_DIRECTORY)
            #expect(directory >= 0, "open dir: \(Posix.name(errno))")
            #expect(fsync(directory) == 0, "fsync of a directory: \(Posix.name(errno))")
            close(directory)

            // fallocate: EOPNOTSUPP; posix_fallocate then writes zeros.
            let new = open(mount.at("dir/new.bin"), O_RDWR | O_CREAT | O_TRUNC, 0o644)
            #expect(new >= 0, "create: \(Posix.name(errno))")
            let allocated = fallocate(new, 0, 0, 4096)
            #expect(allocated == -1 && errno == EOPNOTSUPP, "fallocate: \(allocated) \(Posix.name(errno))")
            #expect(posix_fallocate(new, 0, 4096) == 0)
            var st = stat()
            #expect(fstat(new, &st) == 0 && st.st_size == 4096, "size after posix_fallocate: \(st.st_size)")

            // ioctl: ENOTTY (_IO('b', 1), a command no filesystem knows).
            let answered = ioctl(new, UInt(0x6201))
            #expect(answered == -1 && errno == ENOTTY, "ioctl: \(answered) \(Posix.name(errno))")

            // Locks are the kernel's: flock and fcntl locks succeed here.
            #expect(flock(new, LOCK_EX | LOCK_NB) == 0, "flock: \(Posix.name(errno))")
            var lock = flock()
            lock.l_type = Int16(F_WRLCK)
            lock.l_whence = Int16(SEEK_SET)
            #expect(fcntl(new, F_SETLK, &lock) == 0, "fcntl F_SETLK: \(Posix.name(errno))")
            #expect(close(new) == 0, "close: \(Posix.name(errno))")

            // copy_file_range: the kernel copies through read and write.
            let source = open(mount.at("dir/a.bin"), O_RDONLY)
            let target = open(mount.at("dir/copy.bin"), O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            #expect(source >= 0 && target >= 0, "open: \(Posix.name(errno))")
            var copied = 0
            while copied < data.count {
                let n = copyFileRange(source, nil, target, nil, data.count - copied, 0)
                if n <= 0 {
                    Issue.record("copy_file_range after \(copied) bytes: \(n) \(Posix.name(errno))")
                    break
                }
                copied += n
            }

            // lseek: the kernel's own (end, data and hole of a file;
            // SEEK_DATA 3 and SEEK_HOLE 4 are _GNU_SOURCE values of <unistd.h>).
            #expect(lseek(source, 0, SEEK_END) == off_t(data.count))
            #expect(lseek(source, 0, 3) == 0)
            #expect(lseek(source, 0, 4) == off_t(data.count))

            // poll: a regular file is always ready.
            var pollSet = pollfd(fd: source, events: Int16(POLLIN), revents: 0)
            #expect(poll(&pollSet, 1, 0) == 1 && pollSet.revents & Int16(POLLIN) != 0)
            close(source)
            #expect(close(target) == 0, "close of the copy: \(Posix.name(errno))")
            try await ObjectChecks.expect(gcs, "\(prefix)/dir/copy.bin", holds: data, "after copy_file_range")

            // access: without default_permissions every check succeeds.
            #expect(access(mount.at("dir/a.bin"), R_OK | W_OK) == 0, "access: \(Posix.name(errno))")
            #expect(access(mount.at("dir/a.bin"), R_OK) == 0, "access again: \(Posix.name(errno))")
        }
    }
}
