import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// A mount that ends while a file is still open and written: the bytes
    /// are uploaded before the process exits.
    @Suite struct OpenFilesAtExit {
        // Checks semantics.md#write-upload-at-exit
        @Test("SIGTERM while a written file is still open: the mount uploads it before it exits", .timeLimit(.minutes(2)))
        func sigtermUploadsOpenFiles() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("exitupload")
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
            defer { mount.cleanup() }
            let data = MountEnv.pattern(200_000, seed: 1230)
            let fd = try Posix.open(mount.at("open.bin"), O_WRONLY | O_CREAT | O_TRUNC)
            let wrote = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            #expect(wrote == data.count, "write: \(Posix.name(errno))")
            #expect(try await gcs.resource("\(prefix)/open.bin") == nil, "nothing is uploaded before the close or the exit")

            let pid = try #require(mount.pid, "no bucketfs process found for \(mount.path)")
            #expect(kill(pid, SIGTERM) == 0)
            let (exited, _) = await mount.waitForExit(.seconds(20))
            #expect(exited, "bucketfs still ran 20 s after SIGTERM\nlog:\n\(mount.logTail())")
            close(fd)  // the mount is gone; this close reaches no file system
            try await ObjectChecks.expect(gcs, "\(prefix)/open.bin", holds: data, "uploaded at exit")
        }
    }
}
