import Foundation
import TestServerClient
import TestSupport
import StorageKit
import Testing
import Transport
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Objects stored with `Content-Encoding: gzip` (`gsutil cp -z`; issue
    /// 17, item 2), on fake-gcs-server, which like Cloud Storage serves such
    /// an object decompressed unless the request accepts gzip
    /// (https://cloud.google.com/storage/docs/transcoding). The file and
    /// StorageKit's downloads are the stored bytes: st_size is the object's
    /// size, ranges are offsets in the stored bytes, the checksums hold.
    @Suite struct GzipObjects {
        /// A bucket of the test's own on fake-gcs-server.
        static func freshBucket(_ server: String) async throws -> DirectGCS {
            let name = "gzip-\(UUID().uuidString.prefix(8).lowercased())"
            let response = try await DirectGCS.transport.send(HTTPRequest(
                method: .post, url: "\(server)/storage/v1/b", headers: ["Content-Type": "application/json"],
                body: .bytes(Data(#"{"name":"\#(name)"}"#.utf8)), isIdempotent: false))
            guard response.isSuccess else { throw HarnessError("creating bucket \(name) answered \(response.status)") }
            return DirectGCS(base: server, bucket: name)
        }

        /// Text that compresses, and its gzip (by /bin/gzip).
        static func textAndGzip(seed: UInt64) async throws -> (text: Data, gzip: Data) {
            var lines = ""
            var state = seed
            for n in 0..<20_000 {
                state = state &* 6364136223846793005 &+ 1442695040888963407
                lines += "line \(n): \(state >> 40) of the gzip test\n"
            }
            let text = Data(lines.utf8)
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            try text.write(to: URL(fileURLWithPath: scratch + "/text"))
            let gzip = try await Tools.run("/bin/gzip", ["-c", "-n", scratch + "/text"])
            guard gzip.ok else { throw HarnessError("gzip: \(gzip.summary)") }
            return (text, gzip.stdout)
        }

        static func storage(_ server: String, bucket: String) -> Storage {
            let transport = HTTPTransport(configuration: TransportConfiguration(
                connectTimeout: .seconds(2),
                retry: RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(200))))
            return Storage(bucket: bucket, configuration: StorageConfiguration(endpoint: URL(string: server), transport: transport))
        }

        /// `count` bytes at `offset` of a file, by pread.
        static func pread(_ path: String, offset: Int, count: Int) throws -> Data {
            let fd = try Posix.open(path, O_RDONLY)
            defer { close(fd) }
            var buffer = Data(count: count)
            let n = buffer.withUnsafeMutableBytes { Glibc.pread(fd, $0.baseAddress, count, off_t(offset)) }
            guard n >= 0 else { throw HarnessError("pread \(path): \(Posix.name(errno))") }
            return buffer.prefix(n)
        }

        // Checks semantics.md#shows-gzip
        @Test("a gzip-encoded object reads as its stored bytes: cat = the gzip, zcat = the text, st_size = its size, ranges right; StorageKit alike", .timeLimit(.minutes(2)))
        func realGzip() async throws {
            let server = try MountEnv.fakeGCSServer()
            let gcs = try await Self.freshBucket(server)
            let (text, gzip) = try await Self.textAndGzip(seed: 1717)
            #expect(gzip.count < text.count / 2, "the text should compress")
            try await gcs.put("web/page.txt.gz", gzip, contentType: "text/plain", contentEncoding: "gzip")
            let size = try await gcs.resource("web/page.txt.gz")?["size"] as? String
            #expect(size == String(gzip.count), "the server stores the gzip: size \(size ?? "nil")")
            let middle = 10_000..<25_000

            let reference = Self.storage(server, bucket: gcs.bucket).reference(withPath: "web/page.txt.gz")
            let whole = try await reference.data(maxSize: 1 << 20)
            #expect(whole == gzip, "data(maxSize:): \(whole.count) bytes, the stored gzip has \(gzip.count)")
            let ranged = try await reference.data(range: Int64(middle.lowerBound)..<Int64(middle.upperBound), generation: nil)
            #expect(ranged == gzip[middle], "data(range:): \(ranged.count) bytes")

            let mount = try await Mount.start(endpoint: server, bucket: gcs.bucket, prefix: "web")
            defer { mount.cleanup() }
            let file = mount.at("page.txt.gz")
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            #expect((attributes[.size] as? Int) == gzip.count, "st_size \(attributes[.size] ?? "nil"), object size \(gzip.count)")
            let cat = try await Tools.run("/bin/cat", [file])
            #expect(cat.ok && cat.stdout == gzip, "cat: \(cat.summary), \(cat.stdout.count) bytes\nlog:\n\(mount.logTail())")
            let zcat = try await Tools.run("/bin/zcat", [file])
            #expect(zcat.ok && zcat.stdout == text, "zcat: \(zcat.summary), \(zcat.stdout.count) bytes")
            // A fresh mount, so the middle is not served from what cat cached.
            let again = try await Mount.start(endpoint: server, bucket: gcs.bucket, prefix: "web")
            defer { again.cleanup() }
            let piece = try Self.pread(again.at("page.txt.gz"), offset: middle.lowerBound, count: middle.count)
            #expect(piece == gzip[middle], "pread of \(middle): \(piece.count) bytes\nlog:\n\(again.logTail())")
        }

        // Checks semantics.md#shows-gzip
        @Test("an object marked gzip whose bytes are not gzip reads at once as its stored bytes, through the mount and StorageKit", .timeLimit(.minutes(2)))
        func mislabelled() async throws {
            let server = try MountEnv.fakeGCSServer()
            let gcs = try await Self.freshBucket(server)
            let plain = MountEnv.pattern(300_000, seed: 1718)
            try await gcs.put("odd/not-gzip.bin", plain, contentEncoding: "gzip")
            let clock = ContinuousClock()

            let reference = Self.storage(server, bucket: gcs.bucket).reference(withPath: "odd/not-gzip.bin")
            var started = clock.now
            let whole = try await reference.data(maxSize: 1 << 20)
            #expect(whole == plain, "data(maxSize:): \(whole.count) bytes")
            #expect(clock.now - started < .seconds(5), "StorageKit took \(clock.now - started)")

            let mount = try await Mount.start(endpoint: server, bucket: gcs.bucket, prefix: "odd")
            defer { mount.cleanup() }
            started = clock.now
            let cat = try await Tools.run("/bin/cat", [mount.at("not-gzip.bin")], timeout: .seconds(30))
            let took = clock.now - started
            #expect(cat.ok && cat.stdout == plain, "cat: \(cat.summary), \(cat.stdout.count) bytes\nlog:\n\(mount.logTail())")
            #expect(took < .seconds(5), "cat took \(took): retried instead of reading the stored bytes")
        }
    }
}
