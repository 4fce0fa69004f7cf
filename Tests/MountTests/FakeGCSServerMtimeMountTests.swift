import Foundation
import TestServerClient
import Testing

extension MountTests.FakeGCSServer {
    /// docs/semantics.md#mtime-stored, against a server we did not write:
    /// a file written through the mount keeps its mtime as the object's
    /// `updated`, so a new file streamed while `cp` writes it is one media
    /// POST and nothing after; `cp -p` stores the key; chmod and mv keep
    /// the mtime the file showed. Checked through the JSON API and the
    /// server's own request log.
    @Test("a streamed cp is one media POST with no PATCH; its mtime is `updated`; cp -p, chmod and mv keep the mtime", .timeLimit(.minutes(3)))
    func writtenFilesShowTheirObjectsUpdated() async throws {
        let (gcs, mount) = try await Self.setUp("mtime")
        defer { mount.cleanup() }
        let scratch = try Scratch.directory()
        defer { Scratch.remove(scratch) }
        let content = MountEnv.pattern((20 << 20) + 777, seed: 31)
        try content.write(to: URL(fileURLWithPath: "\(scratch)/streamed.bin"))

        // Past 8 MiB the request starts while cp writes (the store is on
        // this host): a new file of default mode has nothing to keep but
        // its type, so the request is a media upload.
        let cp = try await Tools.run("/bin/cp", ["\(scratch)/streamed.bin", mount.at("streamed.bin")])
        #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
        try await ObjectChecks.expect(gcs, "streamed.bin", holds: content, "after cp in")
        let log = try FakeGCSServerLog.requests(bucket: gcs.bucket)
        let uploads = log.filter { $0.hasPrefix("POST /upload/storage/v1/b/\(gcs.bucket)/o?") }
        #expect(uploads.count == 1 && uploads[0].contains("uploadType=media") && uploads[0].contains("name=streamed.bin"),
                "one media POST: \(uploads)")
        #expect(!log.contains { $0.hasPrefix("PATCH ") }, "no metadata PATCH after the stream: \(log)")
        let streamed = try #require(try await gcs.resource("streamed.bin"))
        #expect((streamed["metadata"] as? [String: String])?["goog-reserved-file-mtime"] == nil, "\(streamed)")
        let updated = try #require(ObjectChecks.updatedSeconds(streamed))
        #expect(try await Self.mtime(mount.at("streamed.bin")) == updated, "stat shows the object's updated (\(streamed["updated"] ?? "nil"))")

        // chmod moves `updated` (and ctime), not the mtime: the PATCH pins it.
        try await Task.sleep(for: .milliseconds(1100))
        let chmod = try await Tools.run("/bin/chmod", ["600", mount.at("streamed.bin")])
        #expect(chmod.ok, "\(chmod.summary)")
        let patched = try #require(try await gcs.resource("streamed.bin"))
        let keys = patched["metadata"] as? [String: String] ?? [:]
        #expect(keys["goog-reserved-posix-mode"] == "600" && keys["goog-reserved-file-mtime"] == String(updated), "\(keys)")
        #expect(try await Self.mtime(mount.at("streamed.bin")) == updated)

        // mv copies: the copy is a new object, and gets its source's mtime.
        try Data("plain\n".utf8).write(to: URL(fileURLWithPath: "\(scratch)/plain.txt"))
        let small = try await Tools.run("/bin/cp", ["\(scratch)/plain.txt", mount.at("plain.txt")])
        #expect(small.ok, "\(small.summary)")
        let plainUpdated = try #require(ObjectChecks.updatedSeconds(try await gcs.resource("plain.txt")))
        try await Task.sleep(for: .milliseconds(1100))
        let mv = try await Tools.run("/bin/mv", [mount.at("plain.txt"), mount.at("moved.txt")])
        #expect(mv.ok, "\(mv.summary)\nlog:\n\(mount.logTail())")
        let moved = try #require(try await gcs.resource("moved.txt"))
        #expect((moved["metadata"] as? [String: String])?["goog-reserved-file-mtime"] == String(plainUpdated), "\(moved)")
        #expect(try await Self.mtime(mount.at("moved.txt")) == plainUpdated)

        // cp -p sets the time after writing: that one is stored.
        let touch = try await Tools.run("/usr/bin/touch", ["-d", "@1600000000", "\(scratch)/plain.txt"])
        #expect(touch.ok, "\(touch.summary)")
        let keep = try await Tools.run("/bin/cp", ["-p", "\(scratch)/plain.txt", mount.at("kept.txt")])
        #expect(keep.ok, "\(keep.summary)\nlog:\n\(mount.logTail())")
        let kept = try #require(try await gcs.resource("kept.txt"))
        #expect((kept["metadata"] as? [String: String])?["goog-reserved-file-mtime"] == "1600000000", "\(kept)")
    }

    /// The mtime `stat` shows, in whole seconds.
    static func mtime(_ path: String) async throws -> Int? {
        let stat = try await Tools.run("/usr/bin/stat", ["-c", "%Y", path])
        return Int(stat.out.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
