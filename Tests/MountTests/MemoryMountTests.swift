import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// A mount runs for months: what an upload leaves behind must not add
    /// up. The test counts uploads, not seconds, so a loaded machine makes
    /// it slower, never flaky: after a warm-up (caches and pools at their
    /// working size), 10,000 more uploads of small files (an overwrite of
    /// one name, and a create and delete of a new name, alternately) may
    /// grow the mount process's resident memory by at most 8 MiB. Before
    /// StorageUploadTask stopped owning itself, each upload kept about
    /// 11 KiB: 10,000 uploads grew it by about 110 MiB.
    @Suite struct Memory {
        static let warmUpUploads = 1_000
        static let measuredUploads = 10_000
        static let allowedGrowth = 8 << 20

        @Test("10,000 small uploads after a warm-up grow the mount's RSS by at most 8 MiB", .timeLimit(.minutes(10)))
        func uploadsDoNotAccumulate() async throws {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-memory-\(UUID().uuidString.prefix(8).lowercased())")
            let mount = try await Mount.start(endpoint: gcs.base, bucket: gcs.bucket, prefix: "")
            defer { mount.cleanup() }
            let pid = try #require(mount.pid)

            var uploads = 0
            var lastOverwrite = Data()
            /// One upload: an overwrite of `ow.txt` (even rounds) or a new
            /// file that is deleted at once (odd rounds).
            func upload(_ round: Int) throws {
                let data = Data("round \(round) ".utf8) + MountEnv.pattern(1_000 + round % 3_000, seed: UInt64(round))
                let name = round % 2 == 0 ? "ow.txt" : "new-\(round).txt"
                let fd = try Posix.open(mount.at(name), O_WRONLY | O_CREAT | O_TRUNC)
                let written = Posix.writeAll(fd, data)
                let closed = Glibc.close(fd) == 0 ? nil : errno
                guard written == nil, closed == nil else {
                    throw HarnessError("round \(round), \(name): write \(written.map(Posix.name) ?? "ok"), close \(closed.map(Posix.name) ?? "ok")")
                }
                if round % 2 == 0 {
                    lastOverwrite = data
                } else if unlink(mount.at(name)) != 0 {
                    throw HarnessError("unlink \(name): \(Posix.name(errno))")
                }
                uploads += 1
            }

            for round in 0..<Self.warmUpUploads { try upload(round) }
            let before = try #require(Kernel.residentBytes(of: pid))
            for round in Self.warmUpUploads..<(Self.warmUpUploads + Self.measuredUploads) { try upload(round) }
            let after = try #require(Kernel.residentBytes(of: pid))
            let growth = after - before
            #expect(
                growth <= Self.allowedGrowth,
                "VmRSS grew \(growth >> 10) KiB over \(Self.measuredUploads) uploads (\(before >> 10) → \(after >> 10) KiB): \(growth / Self.measuredUploads) bytes per upload")

            // The uploads happened, as the server saw them: every one is an
            // upload request it answered 200, the last overwrite is the
            // object, and the deleted files are gone.
            #expect(uploads == Self.warmUpUploads + Self.measuredUploads)
            let stored = try FakeGCSServerLog.uploadsAnswered200(bucket: gcs.bucket)
            #expect(stored >= uploads, "fake-gcs-server logged \(stored) uploads to \(gcs.bucket), the test made \(uploads)")
            let object = try await gcs.download("ow.txt")
            #expect(object == lastOverwrite, "ow.txt holds the last overwrite (\(object.count) bytes)")
            let listed = try await gcs.list(prefix: "")
            #expect(listed == ["ow.txt"], "only ow.txt is left: \(listed.prefix(5))")
        }
    }
}

extension Kernel {
    /// The resident set of process `pid` (VmRSS of /proc/PID/status).
    static func residentBytes(of pid: pid_t) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return nil }
        let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) }
        return kilobytes.map { $0 << 10 }
    }
}

/// fake-gcs-server's access log (scripts/fake_gcs_server.sh keeps its
/// stderr in .build/servers/fake_gcs_server/stderr): one line per request,
/// `"POST /upload/storage/v1/b/BUCKET/o?uploadType=… HTTP/1.1" 200 …`.
enum FakeGCSServerLog {
    static func uploadsAnswered200(bucket: String) throws -> Int {
        let path = try MountEnv.repo() + "/.build/servers/fake_gcs_server/stderr"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let request = "\"POST /upload/storage/v1/b/\(bucket)/o?"
        return text.split(separator: "\n").count { $0.contains(request) && $0.contains(" HTTP/1.1\\\" 200 ") }
    }
}
