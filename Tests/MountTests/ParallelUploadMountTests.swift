import Foundation
import StorageKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Parallel composite uploads through the real binary on
    /// fake-gcs-server: `cp` of a file above `-o parallel-upload-threshold`
    /// goes up as parts side by side, composed into the object; checked
    /// through the server's JSON API and its access log, not the mount.
    @Suite struct ParallelUpload {
        static let size = (40 << 20) + 12_345

        @Test("cp of a file above the threshold: parts, one compose, the right bytes, CRC32C and type, no part left", .timeLimit(.minutes(3)))
        func copyInParts() async throws {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-parallel-\(UUID().uuidString.prefix(8).lowercased())")
            let mount = try await Mount.start(
                endpoint: gcs.base, bucket: gcs.bucket, prefix: "",
                options: ["-o", "parallel-upload-threshold=4MiB", "-o", "parallel-upload-parts=5"])
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
            // The custom metadata a single upload sets (small.bin's): the mtime.
            let metadata = resource["metadata"] as? [String: String] ?? [:]
            let single = try await gcs.customMetadata("small.bin")
            #expect(Set(metadata.keys) == Set(single.keys) && ObjectChecks.mtimeSeconds(metadata) != nil, "\(metadata) / \(single)")
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
