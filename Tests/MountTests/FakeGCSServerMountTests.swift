import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
import FSCoreTesting
#endif

extension MountTests {
    /// A smoke test of the mount against fake-gcs-server (the Go emulator
    /// many projects test against, scripts/fake_gcs_server.sh), a server
    /// whose reading of the protocol is not ours: reads, writes, the
    /// namespace, xattrs and a precondition conflict, each checked through
    /// its JSON API. Each test makes a bucket of its own (fake-gcs-server
    /// creates none on demand).
    ///
    /// Where fake-gcs-server departs from Cloud Storage's documentation the
    /// check says what GCS does and what this server does instead.
    @Suite struct FakeGCSServer {
        /// A new bucket holding `objects`, mounted whole.
        static func setUp(_ label: String, seeding objects: [(String, Data)] = [], options: [String] = []) async throws -> (DirectGCS, Mount) {
            let gcs = try await DirectGCS.fakeGCSServer(newBucket: "mt-\(label)-\(UUID().uuidString.prefix(8).lowercased())")
            for (name, data) in objects { try await gcs.put(name, data) }
            let mount = try await Mount.start(endpoint: gcs.base, bucket: gcs.bucket, prefix: "", options: options)
            return (gcs, mount)
        }

        @Test("ls and ls -l of seeded objects and prefixes; cat and cp out of 0 B to 9 MiB objects", .timeLimit(.minutes(3)))
        func readSeeded() async throws {
            let objects: [(String, Data)] = [
                ("hello.txt", Data("hello, world\n".utf8)), ("empty", Data()), ("one", Data([0x5A])),
                ("docs/readme.md", MountEnv.pattern(100, seed: 1)), ("docs/img/pic.bin", MountEnv.pattern(4096, seed: 2)),
                ("big.bin", MountEnv.pattern((9 << 20) + 123, seed: 3)), ("zdir/", Data()),
            ]
            let (_, mount) = try await Self.setUp("read", seeding: objects)
            defer { mount.cleanup() }
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }

            let ls = try await Tools.run("/bin/ls", [mount.path])
            #expect(ls.ok && ls.lines == ["big.bin", "docs", "empty", "hello.txt", "one", "zdir"], "ls: \(ls.summary) \(ls.out)")
            let long = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.path])
            #expect(long.ok, "\(long.summary)")
            let entries = Dictionary(Listing.parseLong(long.lines).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
            #expect(entries["hello.txt"] == Listing.LsEntry(type: "-", permissions: "rw-r--r--", size: 13, name: "hello.txt"), "\(long.out)")
            #expect(entries["empty"]?.size == 0 && entries["one"]?.size == 1, "\(long.out)")
            #expect(entries["big.bin"]?.size == Int64((9 << 20) + 123), "\(long.out)")
            #expect(entries["docs"]?.type == "d" && entries["zdir"]?.type == "d", "\(long.out)")
            let docs = try await Tools.run("/bin/ls", ["-la", "--time-style=+%s", mount.at("docs")])
            let docEntries = Listing.parseLong(docs.lines)
            #expect(docEntries.map(\.name) == [".", "..", "img", "readme.md"], "ls -la docs: \(docs.summary) \(docs.out)")
            #expect(docEntries.first { $0.name == "readme.md" }?.size == 100)
            let empty = try await Tools.run("/bin/ls", ["-A", mount.at("zdir")])
            #expect(empty.ok && empty.lines.isEmpty, "a placeholder is an empty directory: \(empty.summary) \(empty.out)")

            for (name, data) in objects where !name.hasSuffix("/") {
                let catOut = scratch + "/cat"
                let cat = try await Tools.run("/bin/cat", [mount.at(name)], stdoutPath: catOut)
                let read = FileManager.default.contents(atPath: catOut)
                let same = read == data  // outside #expect: no collection diff of megabytes
                #expect(cat.ok && same, "cat \(name): \(cat.summary), \(read?.count ?? -1) bytes of \(data.count)")
            }
            let cp = try await Tools.run("/bin/cp", [mount.at("big.bin"), scratch + "/big.out"])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            let copied = FileManager.default.contents(atPath: scratch + "/big.out")
            let same = copied == objects[5].1
            #expect(same, "cp out of big.bin: \(copied?.count ?? -1) bytes that differ")
        }

        /// One request at close (the store is on this host), and with
        /// `single-request-max=off` the session streamed while cp writes.
        @Test("cp in of 0 B, small and multi-chunk files: size, md5Hash and bytes through the JSON API", .timeLimit(.minutes(3)),
              arguments: [[], ["-o", "single-request-max=off", "--upload-chunk-size", "8"]])
        func copyIn(options: [String]) async throws {
            let (gcs, mount) = try await Self.setUp("cpin", options: options)
            defer { mount.cleanup() }
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            // 20 MiB is above the 8 MiB multipart limit: by default one
            // multipart request all the same (the store is near); with
            // single-request-max off a resumable upload in several chunks,
            // streamed while cp writes.
            let files: [(String, Data)] = [
                ("zero.bin", Data()), ("small.txt", Data("small file\n".utf8)),
                ("medium.bin", MountEnv.pattern(3 << 20, seed: 11)), ("chunks.bin", MountEnv.pattern((20 << 20) + 4321, seed: 12)),
            ]
            for (name, data) in files {
                try data.write(to: URL(fileURLWithPath: "\(scratch)/\(name)"))
                let cp = try await Tools.run("/bin/cp", ["\(scratch)/\(name)", mount.at(name)])
                #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
                try await ObjectChecks.expect(gcs, name, holds: data, "after cp in, checked as soon as cp returned")
            }
            let resource = try await gcs.resource("small.txt")
            #expect(resource?["contentType"] as? String == "text/plain", "contentType from the name: \(resource?["contentType"] ?? "nil")")
            let uploads = try FakeGCSServerLog.requests(bucket: gcs.bucket).filter { $0.hasPrefix("POST /upload/storage/v1/b/\(gcs.bucket)/o?") }
            let resumable = uploads.filter { $0.contains("uploadType=resumable") }
            #expect(uploads.count == files.count && resumable.count == (options.isEmpty ? 0 : 1), "\(uploads.joined(separator: "\n"))")
        }

        @Test("mv of a file and of a directory, rm, rm -r, mkdir and rmdir", .timeLimit(.minutes(3)))
        func namespace() async throws {
            let moved = MountEnv.pattern(250_000, seed: 21)
            let tree = LocalTree.sample(count: 12, seed: 22)
            let (gcs, mount) = try await Self.setUp(
                "ns", seeding: [("from.bin", moved), ("src/", Data()), ("single.txt", Data("goes\n".utf8)), ("doomed/", Data())]
                    + tree.map { ("src/\($0.key)", $0.value) } + tree.map { ("doomed/\($0.key)", $0.value) })
            defer { mount.cleanup() }
            try await gcs.patchMetadata("from.bin", ["metadata": ["owner": "team-b"], "contentType": "application/x-bucketfs-test"])

            let mvFile = try await Tools.run("/bin/mv", [mount.at("from.bin"), mount.at("to.txt")])
            #expect(mvFile.ok, "\(mvFile.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expectGone(gcs, "from.bin", "mv should delete the source")
            try await ObjectChecks.expect(gcs, "to.txt", holds: moved, "after mv")
            let resource = try await gcs.resource("to.txt")
            #expect(resource?["contentType"] as? String == "application/x-bucketfs-test", "contentType kept by mv: \(resource ?? [:])")
            #expect((resource?["metadata"] as? [String: String])?["owner"] == "team-b", "custom metadata kept by mv: \(resource ?? [:])")

            let mvDir = try await Tools.run("/bin/mv", [mount.at("src"), mount.at("dst")], timeout: .seconds(120))
            #expect(mvDir.ok, "\(mvDir.summary)\nlog:\n\(mount.logTail())")
            #expect(try await gcs.list(prefix: "src/").isEmpty, "objects left under src/")
            let diff = ObjectChecks.differences(try await gcs.tree(under: "dst"), tree)
            #expect(diff.isEmpty, "mv of a directory: \(diff.prefix(20).joined(separator: "; "))")

            let rm = try await Tools.run("/bin/rm", [mount.at("single.txt")])
            #expect(rm.ok, "\(rm.summary)")
            try await ObjectChecks.expectGone(gcs, "single.txt", "rm")
            let rmr = try await Tools.run("/bin/rm", ["-r", mount.at("doomed")], timeout: .seconds(120))
            #expect(rmr.ok, "\(rmr.summary)\nlog:\n\(mount.logTail())")
            #expect(try await gcs.list(prefix: "doomed/").isEmpty, "rm -r leaves nothing below doomed/, its placeholder included")

            let mkdir = try await Tools.run("/bin/mkdir", ["-p", mount.at("made/inner")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            #expect(try await gcs.list(prefix: "made/") == ["made/", "made/inner/"], "mkdir -p makes both placeholders")
            let notEmpty = try await Tools.run("/bin/rmdir", [mount.at("made")])
            #expect(!notEmpty.ok && notEmpty.stderr.contains("Directory not empty"), "rmdir of a non-empty directory: \(notEmpty.summary)")
            let rmdir = try await Tools.run("/bin/rmdir", [mount.at("made/inner"), mount.at("made")])
            #expect(rmdir.ok, "\(rmdir.summary)\nlog:\n\(mount.logTail())")
            #expect(try await gcs.list(prefix: "made/").isEmpty, "rmdir deletes the placeholders")
            #expect(try await gcs.list(prefix: "") == ["dst/"] + tree.keys.map { "dst/\($0)" }.sorted() + ["to.txt"])
        }

        @Test("touch makes an empty object; touch -d and chmod are metadata patches that keep the bytes")
        func touchAndChmod() async throws {
            let content = MountEnv.pattern(70_000, seed: 31)
            let (gcs, mount) = try await Self.setUp("touch", seeding: [("old.dat", content)])
            defer { mount.cleanup() }
            let generation = try await gcs.generation("old.dat")

            let touchNew = try await Tools.run("/usr/bin/touch", [mount.at("new-empty")])
            #expect(touchNew.ok, "\(touchNew.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "new-empty", holds: Data(), "touch of a new name")

            let touchOld = try await Tools.run("/usr/bin/touch", ["-d", "@1500000000", mount.at("old.dat")])
            #expect(touchOld.ok, "\(touchOld.summary)\nlog:\n\(mount.logTail())")
            #expect(ObjectChecks.mtimeSeconds(try await gcs.customMetadata("old.dat")) == 1_500_000_000)
            let chmod = try await Tools.run("/bin/chmod", ["600", mount.at("old.dat")])
            #expect(chmod.ok, "\(chmod.summary)\nlog:\n\(mount.logTail())")
            let metadata = try await gcs.customMetadata("old.dat")
            #expect(ObjectChecks.modeBits(metadata) == 0o600, "chmod 600: \(metadata)")
            #expect(ObjectChecks.mtimeSeconds(metadata) == 1_500_000_000, "chmod keeps the mtime: \(metadata)")
            #expect(try await gcs.generation("old.dat") == generation, "touch -d and chmod of a clean object must not re-upload it")
            try await ObjectChecks.expect(gcs, "old.dat", holds: content, "touch -d and chmod must not change the bytes")

            mount.cleanup()
            let again = try await Mount.start(endpoint: gcs.base, bucket: gcs.bucket, prefix: "")
            defer { again.cleanup() }
            let stat = try await Tools.run("/usr/bin/stat", ["-c", "%a %Y", again.at("old.dat")])
            #expect(stat.out.trimmingCharacters(in: .whitespacesAndNewlines) == "600 1500000000", "after a remount: \(stat.summary) \(stat.out)")
        }

        @Test("setfattr and getfattr of custom metadata and gcs.contentType, checked through the API")
        func xattrs() async throws {
            let (gcs, mount) = try await Self.setUp("xattr", seeding: [("f.txt", Data("hello\n".utf8))])
            defer { mount.cleanup() }
            try await gcs.patchMetadata("f.txt", ["metadata": ["location": "Yosemite, CA, USA"]])
            let f = mount.at("f.txt")
            // The object has no mtime key: its mtime is `updated`, which the
            // first PATCH stores so that no PATCH moves it (semantics.md#mtime-stored).
            let mtime = try #require(ObjectChecks.updatedSeconds(try await gcs.resource("f.txt"))).description

            #expect(try await Xattrs.dump(f) == ["user.location": "\"Yosemite, CA, USA\""])
            try await Xattrs.set(f, "user.colour", "blue")
            let city = "Zürich, 東京 🚀"
            try await Xattrs.set(f, "user.city", city)
            #expect(try await Xattrs.metadata(gcs, "f.txt") == ["location": "Yosemite, CA, USA", "colour": "blue", "city": city, "goog-reserved-file-mtime": mtime])
            #expect(try await Xattrs.value(f, "user.city") == city)

            try await Xattrs.set(f, "gcs.contentType", "text/markdown; charset=utf-8")
            #expect(try await gcs.resource("f.txt")?["contentType"] as? String == "text/markdown; charset=utf-8")
            #expect(try await Xattrs.value(f, "gcs.contentType") == "text/markdown; charset=utf-8")
            let resource = try await gcs.resource("f.txt") ?? [:]
            for (attribute, field) in [("gcs.size", "size"), ("gcs.generation", "generation"), ("gcs.md5Hash", "md5Hash"), ("gcs.crc32c", "crc32c")] {
                #expect(try await Xattrs.value(f, attribute) == resource[field] as? String, "\(attribute)")
            }

            try await Xattrs.run(Xattrs.setfattr, ["-x", "user.location", f])
            // Cloud Storage deletes a custom metadata key patched to null
            // (https://cloud.google.com/storage/docs/json_api/v1/objects/patch,
            // and "Editing object metadata": "set the value to null").
            // fake-gcs-server decodes the patch's metadata into a Go
            // map[string]string, so null becomes "" and is merged: the key
            // stays, empty (fakestorage/object.go patchObject,
            // internal/backend/object.go patch, v1.54.0). The mount sends
            // null (XattrMountTests checks the key is gone on the emulator)
            // and then shows what the server answered: the key, empty.
            #expect(try await Xattrs.metadata(gcs, "f.txt") == ["location": "", "colour": "blue", "city": city, "goog-reserved-file-mtime": mtime])
            #expect(try await Xattrs.dump(f).keys.sorted() == ["user.city", "user.colour", "user.location"])
            #expect(try await Xattrs.value(f, "user.location") == "")
        }

        @Test("chmod, chown and setfattr of a directory show at once in the mount that made them, and reach its placeholder")
        func directoryAttributes() async throws {
            let (gcs, mount) = try await Self.setUp("dirattr")
            defer { mount.cleanup() }
            let d = mount.at("d")
            #expect(mkdir(d, 0o755) == 0, "mkdir: \(String(cString: strerror(errno)))")
            // fake-gcs-server answers a PATCH without a metageneration and
            // keeps it at 1: the answer's metadata must still be shown.
            try await Xattrs.run("/bin/chmod", ["700", d])
            #expect(try await Self.stat(d) == "700 0 0", "stat after chmod\nlog:\n\(mount.logTail())")
            try await Xattrs.run("/bin/chown", ["1234:2345", d])
            #expect(try await Self.stat(d) == "700 1234 2345", "stat after chown\nlog:\n\(mount.logTail())")
            try await Xattrs.set(d, "user.a", "1")
            #expect(try await Xattrs.value(d, "user.a") == "1")
            try await Xattrs.set(d, "user.a", "2")
            #expect(try await Xattrs.value(d, "user.a") == "2", "a second change")

            let stored = try await gcs.customMetadata("d/")
            #expect(ObjectChecks.modeBits(stored) == 0o700, "\(stored)")
            #expect(stored["goog-reserved-posix-uid"] == "1234" && stored["goog-reserved-posix-gid"] == "2345", "\(stored)")
            #expect(stored["a"] == "2", "\(stored)")
        }

        /// `stat -c "%a %u %g"` of `path`.
        static func stat(_ path: String) async throws -> String {
            try await Xattrs.run("/usr/bin/stat", ["-c", "%a %u %g", path]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        @Test("the object replaced behind an open writer: close fails with ESTALE and the other writer's object stays")
        func conflictAtClose() async throws {
            let (gcs, mount) = try await Self.setUp("conflict", seeding: [("shared.txt", Data("original\n".utf8))])
            defer { mount.cleanup() }
            // A small file: closed with one multipart upload carrying
            // ifGenerationMatch, which fake-gcs-server checks (412). It
            // does not check it on resumable uploads (files over 8 MiB),
            // as GCS does: see ObjectStoreConformanceTests.
            try await WriteFailures.checkConflictAtClose(gcs, object: "shared.txt", mount: mount, file: "shared.txt")
        }
    }
}
