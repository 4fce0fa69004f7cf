import Foundation
import TestServerClient
import StorageKit
import Testing
import Transport
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Parallel composite uploads through the real binary on
    /// fake-gcs-server: `cp` of a file above `-o parallel-upload-threshold`
    /// goes up as parts side by side, composed into the object; checked
    /// through the server's JSON API and its access log, not the mount.
    /// The servers are on loopback, where the mount measures a round trip
    /// far below `parallel-upload-min-rtt` and uploads a file of up to
    /// `single-request-max` in one request at close: tests of parts set the
    /// bound to 0, or put a slow proxy in between. Far from the store a
    /// file written in order (`cp`) sends its parts while it is written,
    /// once it reaches the upload chunk; near it, once it passes
    /// `single-request-max`.
    @Suite struct ParallelUpload {
        static let size = (40 << 20) + 12_345
        /// Parts whatever the measured round trip.
        static let forceParts = ["-o", "parallel-upload-min-rtt=0"]

        @Test("cp of a file above the threshold: parts, one compose, the right bytes, CRC32C and type, no part left", .timeLimit(.minutes(3)))
        func copyInParts() async throws {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-parallel-\(UUID().uuidString.prefix(8).lowercased())")
            let mount = try await Mount.start(
                endpoint: gcs.base, bucket: gcs.bucket, prefix: "",
                options: ["-o", "parallel-upload-threshold=4MiB", "-o", "parallel-upload-parts=5"] + Self.forceParts)
            defer { mount.cleanup() }
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let data = MountEnv.pattern(Self.size, seed: 41)
            try data.write(to: URL(fileURLWithPath: "\(scratch)/model.json"))
            let small = MountEnv.pattern(3 << 20, seed: 42)
            try small.write(to: URL(fileURLWithPath: "\(scratch)/small.bin"))

            let cp = try await Tools.run("/bin/cp", ["\(scratch)/model.json", "\(scratch)/small.bin", mount.path])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")

            let resource = try #require(try await gcs.resource("model.json"), "model.json is not in the bucket")
            #expect(resource["size"] as? String == "\(data.count)")
            var crc = CRC32C()
            crc.update(data)
            #expect(resource["crc32c"] as? String == crc.base64, "crc32c \(resource["crc32c"] ?? "nil"), expected \(crc.base64)")
            #expect(resource["contentType"] as? String == "application/json", "the type a single upload would set: \(resource["contentType"] ?? "nil")")
            // The custom metadata a single upload sets (small.bin's): no mtime
            // key, a written file's mtime being its object's `updated`.
            let metadata = resource["metadata"] as? [String: String] ?? [:]
            let single = try await gcs.customMetadata("small.bin")
            #expect(metadata == single && ObjectChecks.mtimeSeconds(metadata) == nil, "\(metadata) / \(single)")
            let bytes = try await gcs.download("model.json")
            let same = bytes == data
            #expect(same, "the server's \(bytes.count) bytes differ from the \(data.count) written")
            try await ObjectChecks.expect(gcs, "small.bin", holds: small, "below the threshold")
            #expect(try await gcs.list(prefix: "") == ["model.json", "small.bin"], "no part left behind")

            let log = try FakeGCSServerLog.requests(bucket: gcs.bucket)
            let parts = log.filter { $0.hasPrefix("POST /upload/storage/v1/b/\(gcs.bucket)/o?") && $0.contains("ifGenerationMatch=0") }
            let composes = log.filter { $0.hasPrefix("POST /storage/v1/b/\(gcs.bucket)/o/model.json/compose") }
            let deletes = log.filter { $0.hasPrefix("DELETE /storage/v1/b/\(gcs.bucket)/o/.bucketfs-parts%2F") }
            // 40 MiB in 5 parts of 8 MiB: each at or under the 8 MiB
            // multipart limit, one POST each; small.bin is one more POST.
            #expect(parts.count == 6, "\(parts.joined(separator: "\n"))")
            #expect(composes.count == 1, "\(log.suffix(20).joined(separator: "\n"))")
            #expect(deletes.count == 5, "\(deletes.joined(separator: "\n"))")
            let ls = try await Tools.run("/bin/ls", ["-A", mount.path])
            #expect(ls.lines == ["model.json", "small.bin"], "\(ls.out)")
        }

        /// Mounts `bucket` at `endpoint` with a 4 MiB threshold and 5 parts
        /// (and `options`), `cp`s `size` bytes of pattern `seed` in as
        /// model.bin, and unmounts; returns the bytes written.
        static func copyModel(endpoint: String, bucket: String, options: [String] = [], seed: UInt64) async throws -> Data {
            let mount = try await Mount.start(
                endpoint: endpoint, bucket: bucket, prefix: "",
                options: ["-o", "parallel-upload-threshold=4MiB", "-o", "parallel-upload-parts=5"] + options)
            defer { mount.cleanup() }
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let data = MountEnv.pattern(Self.size, seed: seed)
            try data.write(to: URL(fileURLWithPath: "\(scratch)/model.bin"))
            let cp = try await Tools.run("/bin/cp", ["\(scratch)/model.bin", mount.path])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            return data
        }

        /// A bucket of its own (`mt-TAG-…`) on fake_gcs.py behind our fault
        /// proxy, which records when each request came and whether its body
        /// was chunked; a mount of it through the proxy with the default
        /// settings, and a scratch directory, for `body`.
        static func throughProxy(
            _ tag: String, _ body: (_ bucket: String, FaultProxy, Mount, _ scratch: String) async throws -> Void
        ) async throws {
            let bucket = "mt-\(tag)-\(UUID().uuidString.prefix(8).lowercased())"
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: bucket)
            defer { proxy.stop() }
            let mount = try await Mount.start(endpoint: proxy.endpoint, bucket: bucket, prefix: "")
            defer { mount.cleanup() }
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            try await body(bucket, proxy, mount, scratch)
        }

        static func crc32c(_ data: Data) -> String {
            var crc = CRC32C()
            crc.update(data)
            return crc.base64
        }

        // Checks semantics.md#parallel-uploads
        @Test("a file above the threshold written out of order to a store on this host: one request at close, no part, no compose", .timeLimit(.minutes(3)))
        func nearStoreGetsOneUploadForAFileNotWrittenInOrder() async throws {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-near-\(UUID().uuidString.prefix(8).lowercased())")
            let mount = try await Mount.start(
                endpoint: gcs.base, bucket: gcs.bucket, prefix: "",
                options: ["-o", "parallel-upload-threshold=4MiB", "-o", "parallel-upload-parts=5", "--upload-chunk-size", "8"])
            defer { mount.cleanup() }
            let data = MountEnv.pattern(Self.size, seed: 45)
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            try data.write(to: URL(fileURLWithPath: "\(scratch)/model.bin"))
            // The second half first, then the first: one open, never in order.
            let script = """
                import sys
                data = open(sys.argv[1], 'rb').read()
                half = len(data) // 2
                with open(sys.argv[2], 'wb') as f:
                    f.seek(half); f.write(data[half:]); f.seek(0); f.write(data[:half])
                """
            let python = try await Tools.run("/usr/bin/python3", ["-c", script, "\(scratch)/model.bin", "\(mount.path)/model.bin"])
            #expect(python.ok, "\(python.summary)\nlog:\n\(mount.logTail())")
            // Size, bytes, CRC-32C and MD5 as the server has them.
            try await ObjectChecks.expect(gcs, "model.bin", holds: data, "one upload")
            #expect(try await gcs.resource("model.bin")?["crc32c"] as? String == Self.crc32c(data))
            #expect(try await gcs.list(prefix: "") == ["model.bin"], "no part made")

            let log = try FakeGCSServerLog.requests(bucket: gcs.bucket)
            let uploads = log.filter { $0.hasPrefix("POST /upload/storage/v1/b/\(gcs.bucket)/o?") }
            #expect(uploads.count == 1 && uploads.allSatisfy { $0.contains("uploadType=multipart") }, "one request: \(uploads)")
            #expect(!log.contains { $0.contains("/compose") || $0.contains(".bucketfs-parts") }, "\(log.suffix(20).joined(separator: "\n"))")
        }

        // Checks semantics.md#parallel-uploads
        @Test("cp to a store on this host: one request at close", .timeLimit(.minutes(3)))
        func nearStoreGetsOneRequestForAFileWrittenInOrder() async throws {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-near-\(UUID().uuidString.prefix(8).lowercased())")
            let data = try await Self.copyModel(endpoint: gcs.base, bucket: gcs.bucket, options: ["--upload-chunk-size", "8"], seed: 48)
            try await ObjectChecks.expect(gcs, "model.bin", holds: data, "one request")
            #expect(try await gcs.resource("model.bin")?["crc32c"] as? String == Self.crc32c(data))
            let log = try FakeGCSServerLog.requests(bucket: gcs.bucket)
            let uploads = log.filter { $0.hasPrefix("POST /upload/storage/v1/b/\(gcs.bucket)/o?") }
            // Written in order: the request follows the file; a new file of
            // default mode keeps nothing but its type, so it is a media upload.
            #expect(uploads.count == 1 && uploads.allSatisfy { $0.contains("uploadType=media") }, "one request: \(uploads)")
            #expect(!log.contains { $0.contains("/compose") || $0.contains(".bucketfs-parts") || $0.hasPrefix("PUT ") || $0.hasPrefix("PATCH ") },
                    "\(log.suffix(20).joined(separator: "\n"))")
        }

        // Checks semantics.md#parallel-uploads
        @Test("a file written in order to a store on this host: its one request starts while the file is written, chunked, and ends at close", .timeLimit(.minutes(3)))
        func nearStoreSendsTheOneRequestWhileTheFileIsWritten() async throws {
            try await Self.throughProxy("grow") { bucket, proxy, mount, scratch in
                let data = MountEnv.pattern(24 << 20, seed: 49)
                try data.write(to: URL(fileURLWithPath: "\(scratch)/grown.bin"))
                // All 24 MiB written, then the file stays open for a second
                // before the close: the request must be under way by then.
                let writer = """
                    import sys, time
                    data = open(sys.argv[1], 'rb').read()
                    f = open(sys.argv[2], 'wb', buffering=0)
                    f.write(data)
                    time.sleep(1)
                    print(time.time(), flush=True)
                    f.close()
                    """
                let run = try await Tools.run(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", writer, "\(scratch)/grown.bin", mount.at("grown.bin")])
                #expect(run.ok, "\(run.summary)\nlog:\n\(mount.logTail())")
                let closing = try #require(Double(run.out.trimmingCharacters(in: .whitespacesAndNewlines)), "\(run.summary)")
                try await ObjectChecks.expect(proxy.gcs, "grown.bin", holds: data, "the object holds the bytes written")
                let uploads = try await proxy.requests().filter { $0.method == "POST" && $0.path.contains("/upload/storage/v1/b/\(bucket)/o") }
                #expect(uploads.count == 1, "one request: \(uploads)")
                let upload = try #require(uploads.first)
                #expect(upload.parameter("uploadType") == "media" && upload.chunked, "a media body of unknown length: \(upload)")
                #expect((upload.time ?? .infinity) < closing, "it started before the close: \(upload.time ?? 0) against \(closing)")
                #expect((upload.done ?? 0) > closing, "and ended after it")
            }
        }

        // Checks semantics.md#parallel-uploads
        @Test("six files written in order at once to a store on this host: four requests follow their files, two go at close, every object right", .timeLimit(.minutes(3)))
        func atMostFourRequestsFollowFilesAtOnce() async throws {
            try await Self.throughProxy("four") { bucket, proxy, mount, scratch in
                let files = (0..<6).map { MountEnv.pattern(12 << 20, seed: 60 + UInt64($0)) }
                for (i, data) in files.enumerated() { try data.write(to: URL(fileURLWithPath: "\(scratch)/f\(i).bin")) }
                // Six threads each write 12 MiB and keep the file open for 2 s:
                // every file passes 8 MiB while the others' requests are open.
                let writer = """
                    import sys, threading, time
                    src, dst = sys.argv[1], sys.argv[2]
                    def write(i):
                        data = open(f"{src}/f{i}.bin", "rb").read()
                        with open(f"{dst}/f{i}.bin", "wb", buffering=0) as f:
                            f.write(data)
                            time.sleep(2)
                    threads = [threading.Thread(target=write, args=(i,)) for i in range(6)]
                    for t in threads: t.start()
                    for t in threads: t.join()
                    """
                let run = try await Tools.run(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", writer, scratch, mount.path])
                #expect(run.ok, "\(run.summary)\nlog:\n\(mount.logTail())")
                for (i, data) in files.enumerated() { try await ObjectChecks.expect(proxy.gcs, "f\(i).bin", holds: data) }
                let uploads = try await proxy.requests().filter { $0.method == "POST" && $0.path.contains("/upload/storage/v1/b/\(bucket)/o") }
                #expect(uploads.count == 6, "one request per file: \(uploads)")
                #expect(uploads.filter(\.chunked).count == 4, "four followed their files, two went at close: \(uploads.map(\.chunked))")
            }
        }

        // Checks semantics.md#parallel-uploads
        @Test("cp of a file past single-request-max to a store on this host: a part per 8 MiB chunk once past it, one compose, the right bytes", .timeLimit(.minutes(3)))
        func nearStoreGetsPartsWhileTheFileIsWritten() async throws {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-stream-\(UUID().uuidString.prefix(8).lowercased())")
            // Parts stream past 16 MiB (single-request-max) with the parts
            // written by then, in 8 MiB chunks: 40 MiB and 12,345 bytes make
            // five parts of 8 MiB and the tail. (Parts at close would be
            // five of 8 MiB and 2,469 bytes each.)
            let data = try await Self.copyModel(
                endpoint: gcs.base, bucket: gcs.bucket, options: ["--upload-chunk-size", "8", "-o", "single-request-max=16MiB"], seed: 47)
            let resource = try #require(try await gcs.resource("model.bin"), "model.bin is not in the bucket")
            #expect(resource["size"] as? String == "\(data.count)")
            #expect(resource["crc32c"] as? String == Self.crc32c(data))
            let same = try await gcs.download("model.bin") == data
            #expect(same, "the server's bytes differ from the \(data.count) written")
            #expect(try await gcs.list(prefix: "") == ["model.bin"], "no part left")

            let log = try FakeGCSServerLog.requests(bucket: gcs.bucket)
            let uploads = log.filter { $0.hasPrefix("POST /upload/storage/v1/b/\(gcs.bucket)/o?") }
            // The one request that followed the file from 8 MiB was cut when
            // it passed 16 MiB: the server answered it with an error and
            // stored nothing (the listing above has model.bin alone). When
            // `cp` outruns it (a busy machine writes those 8 MiB in a few
            // ms), it is cut before its connection is up and the server
            // never sees it; the parts are the same either way.
            let media = uploads.filter { $0.contains("uploadType=media") }
            #expect(uploads.allSatisfy { $0.contains("ifGenerationMatch=0") }
                    && uploads.filter { $0.contains("uploadType=multipart") }.count == 6
                    && media.count <= 1 && uploads.count == 6 + media.count && (media.isEmpty || uploads[0] == media[0]),
                    "at most the cut (media) request, then six (multipart) parts: \(uploads.joined(separator: "\n"))")
            #expect(try FakeGCSServerLog.uploadsAnswered200(bucket: gcs.bucket) == 6, "six parts stored")
            #expect(log.filter { $0.hasPrefix("POST /storage/v1/b/\(gcs.bucket)/o/model.bin/compose") }.count == 1)
            #expect(log.filter { $0.hasPrefix("DELETE /storage/v1/b/\(gcs.bucket)/o/.bucketfs-parts%2F") }.count == 6)
        }

        // Checks semantics.md#parallel-uploads
        @Test("the same cp to a store 30 ms away (a proxy delays every answer): parts and a compose, with the default settings", .timeLimit(.minutes(3)))
        func farStoreGetsParts() async throws {
            let bucket = "mt-far-\(UUID().uuidString.prefix(8).lowercased())"
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: bucket)
            defer { proxy.stop() }
            try await proxy.fault([["stall_seconds": 0.03, "for_seconds": 170]])
            let data = try await Self.copyModel(endpoint: proxy.endpoint, bucket: bucket, seed: 46)
            // A composite object: size, CRC-32C and bytes (it has no MD5).
            let resource = try #require(try await proxy.gcs.resource("model.bin"), "model.bin is not in the bucket")
            #expect(resource["size"] as? String == "\(data.count)")
            #expect(resource["crc32c"] as? String == Self.crc32c(data), "crc32c \(resource["crc32c"] ?? "nil"), expected \(Self.crc32c(data))")
            let same = try await proxy.gcs.download("model.bin") == data
            #expect(same, "the server's bytes differ from the \(data.count) written")
            #expect(try await proxy.gcs.list(prefix: "") == ["model.bin"], "no part left")
            let requests = try await proxy.gcs.requests().filter { $0.path.contains("/b/\(bucket)/") }
            let composes = requests.filter { $0.method == "POST" && $0.decodedPath.hasSuffix("/o/model.bin/compose") }
            #expect(composes.count == 1, "\(requests.suffix(20))")
            let partDeletes = requests.filter { $0.method == "DELETE" && $0.decodedPath.contains("/o/.bucketfs-parts/") }
            #expect(partDeletes.count == 5, "five parts made and deleted: \(partDeletes.map(\.decodedPath))")
        }

        // Through our own fake (Tests/Servers/fake_gcs.py), which checks
        // compose's preconditions, keeps retention policies and injects
        // faults; fake-gcs-server and gcp-storage-emulator ignore compose's
        // ifGenerationMatch (ComposeTests).

        /// A bucket of its own on fake_gcs.py, a mount of it with a 4 MiB
        /// threshold, and 16 MiB to copy in (2 parts of 8 MiB).
        static func fakeSetUp(_ label: String, options: [String] = []) async throws -> (DirectGCS, Mount, String, Data) {
            let gcs = try DirectGCS.fake(bucket: "mt-\(label)-\(UUID().uuidString.prefix(8).lowercased())")
            let scratch = try Scratch.directory()
            let mount = try await Mount.start(
                endpoint: try MountEnv.fake(), bucket: gcs.bucket, prefix: "",
                options: ["-o", "parallel-upload-threshold=4MiB"] + Self.forceParts + options,
                cacheDir: scratch + "/cache")
            let data = MountEnv.pattern(16 << 20, seed: 43)
            try data.write(to: URL(fileURLWithPath: scratch + "/big.bin"))
            return (gcs, mount, scratch, data)
        }

        static func recovered(_ scratch: String, _ gcs: DirectGCS) -> Data? {
            FileManager.default.contents(atPath: "\(scratch)/cache/recovery/\(gcs.bucket)/big.bin")
        }

        // Checks semantics.md#parallel-uploads
        @Test("the object written by someone else while the parts go up: the compose's precondition fails, cp sees ESTALE, theirs stays", .timeLimit(.minutes(3)))
        func conflictAtCompose() async throws {
            let (gcs, mount, scratch, data) = try await Self.fakeSetUp("pconflict")
            defer {
                mount.cleanup()
                Scratch.remove(scratch)
            }
            // The first part's answer comes 2 s late; meanwhile another
            // writer stores the object (after the mount checked it was absent).
            // The server is shared with tests running side by side: the
            // fault and the wait name this test's bucket.
            let partUpload = "/b/\(gcs.bucket)/o?uploadType=multipart&ifGenerationMatch=0"
            try await gcs.fault(["method": "POST", "path_contains": partUpload, "stall_seconds": 2])
            async let copy = Tools.run("/bin/cp", [scratch + "/big.bin", mount.at("big.bin")])
            let theirs = Data("the other writer's version\n".utf8)
            var seen = false
            for _ in 0..<100 where !seen {
                seen = try await gcs.requests().contains { $0.method == "POST" && "\($0.path)?\($0.query)".contains(partUpload) }
                if !seen { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(seen, "no part upload seen\nlog:\n\(mount.logTail())")
            try await gcs.put("big.bin", theirs)
            let cp = try await copy
            #expect(!cp.ok && cp.stderr.contains("Stale file handle"), "\(cp.summary)\nlog:\n\(mount.logTail())")
            let requests = try await gcs.requests().filter { $0.path.contains("/b/\(gcs.bucket)/") }
            #expect(requests.contains { $0.method == "POST" && $0.decodedPath.hasSuffix("/o/big.bin/compose") }, "the compose itself was refused")
            try await ObjectChecks.expect(gcs, "big.bin", holds: theirs, "the other writer's object must be intact")
            #expect(try await gcs.list(prefix: ".bucketfs-parts/").isEmpty, "parts deleted")
            let kept = Self.recovered(scratch, gcs) == data
            #expect(kept, "the bytes are in the recovery folder")
        }

        @Test("a compose that fails: cp sees EIO, no object, no part left, the bytes in the recovery folder", .timeLimit(.minutes(3)))
        func composeFails() async throws {
            let (gcs, mount, scratch, data) = try await Self.fakeSetUp(
                "pfail", options: ["--retry-attempts", "1", "--upload-retry-time", "0", "--recovery-retry-interval", "0"])
            defer {
                mount.cleanup()
                Scratch.remove(scratch)
            }
            try await gcs.fault(["method": "POST", "path_contains": "/compose", "status": 503, "count": 10])
            let cp = try await Tools.run("/bin/cp", [scratch + "/big.bin", mount.at("big.bin")])
            #expect(!cp.ok && cp.stderr.contains("Input/output error"), "\(cp.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expectGone(gcs, "big.bin", "no partial object")
            #expect(try await gcs.list(prefix: "").isEmpty, "parts deleted")
            let kept = Self.recovered(scratch, gcs) == data
            #expect(kept, "the bytes are in the recovery folder")
        }

        @Test("a bucket with a retention policy: the usual single upload, no part", .timeLimit(.minutes(3)))
        func retentionPolicyKeepsTheSingleUpload() async throws {
            let gcs = try DirectGCS.fake(bucket: "mt-retention-\(UUID().uuidString.prefix(8).lowercased())")
            try await gcs.post("/_retention", json: ["bucket": gcs.bucket, "seconds": 3600])
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let mount = try await Mount.start(
                endpoint: try MountEnv.fake(), bucket: gcs.bucket, prefix: "", options: ["-o", "parallel-upload-threshold=4MiB"] + Self.forceParts)
            defer { mount.cleanup() }
            let data = MountEnv.pattern(16 << 20, seed: 44)
            try data.write(to: URL(fileURLWithPath: scratch + "/big.bin"))
            let cp = try await Tools.run("/bin/cp", [scratch + "/big.bin", mount.at("big.bin")])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "big.bin", holds: data, "a single upload keeps its MD5")
            let requests = try await gcs.requests().filter { $0.path.contains("/b/\(gcs.bucket)") }
            #expect(!requests.contains { $0.path.hasSuffix("/compose") }, "\(requests)")
            #expect(requests.contains { $0.method == "GET" && $0.path == "/storage/v1/b/\(gcs.bucket)" }, "the bucket's metadata was read")
            #expect(mount.logTail(200).contains("retention policy"), "the mount says why\nlog:\n\(mount.logTail())")
        }
    }
}

extension FakeGCSServerLog {
    /// The request lines (`METHOD PATH?QUERY`) of bucket `bucket`, in order.
    static func requests(bucket: String) throws -> [String] {
        let path = try MountEnv.repo() + "/.build/servers/fake_gcs_server/stderr"
        let text = try String(contentsOfFile: path, encoding: .utf8)
        return text.split(separator: "\n").compactMap { line -> String? in
            guard let start = line.range(of: "\\\""), let end = line.range(of: " HTTP/1.1", range: start.upperBound..<line.endIndex) else {
                return nil
            }
            let request = String(line[start.upperBound..<end.lowerBound])
            return request.contains("/b/\(bucket)/") ? request : nil
        }
    }
}
