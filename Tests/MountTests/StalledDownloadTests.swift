import Foundation
import StorageKit
import Testing
import Transport
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Downloads whose answer stalls mid-body (issue 17, item 5): the bytes
    /// that arrived before the stall must not arrive a second time; the
    /// download goes on from the first byte not yet delivered. A fault
    /// proxy of the test's own in front of fake_gcs.py holds the first
    /// `alt=media` answer after 512 KiB for 20 s, far longer than the 1 s
    /// stall timeout of the client.
    @Suite struct StalledDownloads {
        static let bucket = "mounttests"
        static let stallAfter = 512 << 10
        static let stallSeconds = 20.0

        /// A proxy in front of fake_gcs.py and a 2 MiB object stored there.
        static func setUp(_ label: String, seed: UInt64) async throws -> (proxy: FaultProxy, object: String, data: Data) {
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: bucket)
            let object = MountEnv.uniquePrefix(label) + "/object.bin"
            let data = MountEnv.pattern(2 << 20, seed: seed)
            do {
                try await proxy.gcs.put(object, data)
            } catch {
                proxy.stop()
                throw error
            }
            return (proxy, object, data)
        }

        /// Registers the stall and runs `body`; then checks that the stall
        /// happened and the download went on with another request.
        static func throughAStall(_ proxy: FaultProxy, _ body: () async throws -> Void) async throws {
            try await proxy.clearRequests()
            try await proxy.fault([FaultProxy.stallMidBody(afterBytes: stallAfter, seconds: stallSeconds)])
            try await body()
            let downloads = try await proxy.requests().filter { $0.query.contains("alt=media") }
            #expect(downloads.first?.fault == "stall_body_after_bytes" && downloads.count >= 2,
                    "the first download should stall and another go on: \(downloads.map { $0.fault ?? "-" })")
            if downloads.count >= 2 {
                // Ended by the client's 1 s stall timeout (so the answer was
                // longer than what the proxy let through), not by its close.
                let gap = (downloads[1].time ?? 0) - (downloads[0].time ?? 0)
                #expect(gap >= 1 && gap < stallSeconds - 5, "the next download came \(gap) s after the stalled one")
            }
        }

        @Test("StorageKit: a whole download and ranged reads through a mid-body stall get exactly the object's bytes", .timeLimit(.minutes(2)))
        func storageKit() async throws {
            let (proxy, object, data) = try await Self.setUp("stall-sk", seed: 1701)
            defer { proxy.stop() }
            let transport = HTTPTransport(configuration: TransportConfiguration(
                connectTimeout: .seconds(2), stallTimeout: .seconds(1),
                retry: RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(20), maxBackoff: .milliseconds(200))))
            let storage = Storage(bucket: Self.bucket, configuration: StorageConfiguration(
                endpoint: URL(string: proxy.endpoint), transport: transport))
            let reference = storage.reference(withPath: object)

            try await Self.throughAStall(proxy) {
                // Verified against the object's CRC32C inside data(maxSize:).
                let whole = try await reference.data(maxSize: 4 << 20)
                #expect(whole.count == data.count && whole == data, "whole download: \(whole.count) bytes")
            }
            try await Self.throughAStall(proxy) {
                let head = try await reference.data(range: 0..<(1 << 20), generation: nil)
                #expect(head.count == 1 << 20 && head == data.prefix(1 << 20), "range 0..<1 MiB: \(head.count) bytes")
            }
            try await Self.throughAStall(proxy) {
                let middle: Range<Int64> = 300_000..<1_500_000
                let bytes = try await reference.data(range: middle, generation: nil)
                #expect(bytes.count == middle.count && bytes == data[Int(middle.lowerBound)..<Int(middle.upperBound)],
                        "range \(middle): \(bytes.count) bytes")
            }
        }

        @Test("bucketfs get --range 0-1048575 through a mid-body stall writes exactly those 1,048,576 bytes", .timeLimit(.minutes(2)))
        func cliRangedGet() async throws {
            let (proxy, object, data) = try await Self.setUp("stall-cli", seed: 1702)
            defer { proxy.stop() }
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let target = scratch + "/range.bin"
            try await Self.throughAStall(proxy) {
                let get = try await runBucketfs([
                    "get", "gs://\(Self.bucket)/\(object)", target, "--range", "0-1048575",
                    "--endpoint", proxy.endpoint, "--anonymous", "--stall-timeout", "1",
                ])
                #expect(get.ok, "\(get.summary)")
                let written = FileManager.default.contents(atPath: target) ?? Data()
                #expect(written.count == 1_048_576 && written == data.prefix(1_048_576), "wrote \(written.count) bytes")
            }
        }

        // Checks semantics.md#net-request-retries
        @Test("a read through the mount across a mid-body stall returns the object's bytes (no EIO)", .timeLimit(.minutes(2)))
        func mountRead() async throws {
            let (proxy, object, data) = try await Self.setUp("stall-mount", seed: 1703)
            defer { proxy.stop() }
            let prefix = String(object.dropLast("/object.bin".count))
            let mount = try await Mount.start(
                endpoint: proxy.endpoint, bucket: Self.bucket, prefix: prefix, options: ["--stall-timeout", "1"])
            defer { mount.cleanup() }
            try await Self.throughAStall(proxy) {
                // A random read (no read-ahead): the mount fetches the
                // whole 1 MiB block it falls in, which stalls halfway.
                let fd = try Posix.open(mount.at("object.bin"), O_RDONLY)
                defer { close(fd) }
                let offset = 1 << 20, count = 1 << 20
                var buffer = Data(count: count)
                let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, count, off_t(offset)) }
                #expect(n == count, "pread: \(n < 0 ? Posix.name(errno) : "\(n) bytes")\nlog:\n\(mount.logTail())")
                #expect(buffer == data[offset..<(offset + count)], "the bytes read differ from the object's")
                // The kernel may hide an EIO answer to its own read-ahead
                // (it reads the page again), so the mount's answers count.
                let log = (try? String(contentsOfFile: mount.logFile, encoding: .utf8)) ?? ""
                #expect(!log.contains("read failed") && !log.contains("short read"),
                        "the mount answered a read with an error\nlog:\n\(mount.logTail())")
            }
        }
    }
}
