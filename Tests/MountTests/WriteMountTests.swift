import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Writing file contents and attributes with real tools (issue 4),
    /// checked through the server's API.
    @Suite struct Writing {
        static func emulatorMount(_ prefix: String, options: [String] = []) async throws -> Mount {
            try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix, options: options)
        }

        static func sh(_ script: String, in dir: String) async throws -> ToolResult {
            try await Tools.run("/bin/sh", ["-c", "cd \"$1\" && \(script)", "sh", dir])
        }

        // Checks semantics.md#write-when-uploaded
        @Test("cp in of 0 B, 1 B and 5 MiB files: size, md5Hash and bytes on the server; contentType from the name")
        func cpInSmallAndMedium() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("cpin")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let files: [(String, Data)] = [
                ("zero.bin", Data()), ("one.bin", Data([0xA5])), ("five-mib.bin", MountEnv.pattern(5 << 20, seed: 41)),
                ("page.html", Data("<html><body>hi</body></html>\n".utf8)),
            ]
            for (name, data) in files { try data.write(to: URL(fileURLWithPath: "\(scratch)/\(name)")) }

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            for (name, data) in files {
                let cp = try await Tools.run("/bin/cp", ["\(scratch)/\(name)", mount.at(name)])
                #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
                let md5 = try await ObjectChecks.md5Base64(file: "\(scratch)/\(name)")
                let resource = try await gcs.resource("\(prefix)/\(name)")
                #expect(resource?["md5Hash"] as? String == md5, "\(name): md5Hash \(resource?["md5Hash"] ?? "nil"), local \(md5)")
                // Checked as soon as cp returned: close is where an upload
                // failure can still be reported, so even an empty new file
                // must exist by then (not only after the asynchronous release).
                try await ObjectChecks.expect(gcs, "\(prefix)/\(name)", holds: data, "checked right after cp returned")
            }
            let html = try await gcs.resource("\(prefix)/page.html")
            #expect((html?["contentType"] as? String)?.hasPrefix("text/html") == true,
                    "contentType of page.html should be inferred from the name: \(html?["contentType"] ?? "nil")")
        }

        @Test("cp in of a 300 MiB file: size and md5Hash on the server", .timeLimit(.minutes(10)))
        func cpInBig() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("cpbig")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let source = "\(scratch)/big.bin"
            let size = 300 << 20
            let made = try await Tools.run("/usr/bin/head", ["-c", "\(size)", "/dev/urandom"], stdoutPath: source)
            try #require(made.ok, "\(made.summary)")
            let md5 = try await ObjectChecks.md5Base64(file: source)

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let cp = try await Tools.run("/bin/cp", [source, mount.at("big.bin")], timeout: .seconds(400))
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            print("cp in of 300 MiB until durable: \(cp.elapsed)")
            let resource = try await gcs.resource("\(prefix)/big.bin")
            // The emulator is on this host, so 300 MiB goes up in one
            // request at close (`--single-request-max`). Of a composed
            // object the emulator answers the size as a JSON number
            // where GCS sends a string (int64 fields are strings in the JSON
            // API: https://cloud.google.com/storage/docs/json_api/v1/objects),
            // so the size is compared as text either way.
            #expect(resource?["size"].map { "\($0)" } == "\(size)", "size on the server: \(resource?["size"] ?? "nil")")
            #expect(resource?["md5Hash"] as? String == md5, "md5Hash on the server \(resource?["md5Hash"] ?? "nil"), local \(md5)")
        }

        // Checks semantics.md#write-when-uploaded
        @Test("overwriting an object (cp over it, `>` over it) replaces its bytes and keeps its custom metadata")
        func overwrite() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("overwrite")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            try await gcs.put("\(prefix)/doc.dat", MountEnv.pattern(300_000, seed: 1), metadata: ["owner": "team-a"])
            let replacement = MountEnv.pattern(123_457, seed: 2)
            try replacement.write(to: URL(fileURLWithPath: "\(scratch)/new.dat"))

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let cp = try await Tools.run("/bin/cp", ["\(scratch)/new.dat", mount.at("doc.dat")])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/doc.dat", holds: replacement, "after cp over it")
            #expect(try await gcs.customMetadata("\(prefix)/doc.dat")["owner"] == "team-a", "custom metadata lost by the overwrite")

            // `>` opens with O_TRUNC: shorter content must not keep a tail.
            let redirect = try await Self.sh("printf 'short' > doc.dat", in: mount.path)
            #expect(redirect.ok, "\(redirect.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/doc.dat", holds: Data("short".utf8), "after > over it")
            #expect(try await gcs.customMetadata("\(prefix)/doc.dat")["owner"] == "team-a", "custom metadata lost by `>`")
        }

        @Test("`>` creates, `>>` appends (also to a 2 MiB object made elsewhere)")
        func appendRedirection() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("append")
            let big = MountEnv.pattern(2 << 20, seed: 3)
            try await gcs.put("\(prefix)/big.log", big)

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            for step in ["printf 'one\\n' > notes.txt", "printf 'two\\n' >> notes.txt", "printf 'three\\n' >> notes.txt"] {
                let r = try await Self.sh(step, in: mount.path)
                #expect(r.ok, "\(r.summary)\nlog:\n\(mount.logTail())")
            }
            try await ObjectChecks.expect(gcs, "\(prefix)/notes.txt", holds: Data("one\ntwo\nthree\n".utf8))

            let tail = try await Self.sh("printf 'appended tail' >> big.log", in: mount.path)
            #expect(tail.ok, "\(tail.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/big.log", holds: big + Data("appended tail".utf8))
        }

        @Test("truncate -s shrinks and grows (zeros), also a new file")
        func truncateSizes() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("truncate")
            let original = MountEnv.pattern(1 << 20, seed: 4)
            try await gcs.put("\(prefix)/t.bin", original)

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let shrink = try await Tools.run("/usr/bin/truncate", ["-s", "1000", mount.at("t.bin")])
            #expect(shrink.ok, "\(shrink.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/t.bin", holds: original.prefix(1000), "after truncate -s 1000")

            let grow = try await Tools.run("/usr/bin/truncate", ["-s", "5000", mount.at("t.bin")])
            #expect(grow.ok, "\(grow.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/t.bin", holds: original.prefix(1000) + Data(count: 4000), "after truncate -s 5000")

            let zero = try await Tools.run("/usr/bin/truncate", ["-s", "0", mount.at("t.bin")])
            #expect(zero.ok, "\(zero.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/t.bin", holds: Data(), "after truncate -s 0")

            let fresh = try await Tools.run("/usr/bin/truncate", ["-s", "3M", mount.at("sparse.bin")])
            #expect(fresh.ok, "\(fresh.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/sparse.bin", holds: Data(count: 3 << 20), "truncate -s 3M of a new name")
        }

        // Checks semantics.md#write-when-uploaded
        @Test("touch: a new name becomes an empty object; touch -d on a clean object is a metadata patch")
        func touchFiles() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("touch")
            let content = MountEnv.pattern(70_000, seed: 5)
            try await gcs.put("\(prefix)/old.dat", content)
            let generation = try await gcs.generation("\(prefix)/old.dat")

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let touchNew = try await Tools.run("/usr/bin/touch", [mount.at("new-empty")])
            #expect(touchNew.ok, "\(touchNew.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/new-empty", holds: Data(), "touch of a new name, checked right after touch returned")

            let touchOld = try await Tools.run("/usr/bin/touch", ["-d", "@1500000000", mount.at("old.dat")])
            #expect(touchOld.ok, "\(touchOld.summary)\nlog:\n\(mount.logTail())")
            let metadata = try await gcs.customMetadata("\(prefix)/old.dat")
            #expect(ObjectChecks.mtimeSeconds(metadata) == 1_500_000_000, "goog-reserved-file-mtime: \(metadata)")
            #expect(try await gcs.generation("\(prefix)/old.dat") == generation, "touch -d of a clean object re-uploaded it (new generation)")
            try await ObjectChecks.expect(gcs, "\(prefix)/old.dat", holds: content, "touch -d must not change the bytes")
        }

        // Checks semantics.md#write-staged-files
        @Test("read-your-writes: a second descriptor reads the bytes before close; another process after it")
        func readYourWrites() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("ryw")
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let data = MountEnv.pattern(1 << 20, seed: 6)

            // Read in this process: a spawned reader's close of its inherited
            // copy of `fd` would send a FLUSH, and upload before we read.
            let fd = try Posix.open(mount.at("live.bin"), O_WRONLY | O_CREAT | O_TRUNC)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            #expect(Posix.writeAll(fd, data) == nil, "write failed\nlog:\n\(mount.logTail())")
            let reader = try Posix.open(mount.at("live.bin"), O_RDONLY)
            let before = Posix.pread(reader, count: data.count + 10, at: 0)
            let beforeSame = (try? before.get()) == data  // outside #expect: no collection diff of megabytes
            #expect(beforeSame, "pread through a second descriptor before close: \(before.map { "\($0.count) bytes" })")
            Glibc.close(reader)

            let outcome = await Posix.within(.seconds(60)) { Glibc.close(fd) }
            closed = outcome != nil
            #expect(outcome?.0.rc == 0, "close: \(outcome.map { "\($0.0)" } ?? "hung")\nlog:\n\(mount.logTail())")
            let after = try await Tools.run("/bin/cat", [mount.at("live.bin")])
            let afterSame = after.stdout == data  // outside #expect: no collection diff of megabytes
            #expect(after.ok && afterSame, "cat after close: \(after.summary), \(after.stdout.count) bytes")
            try await ObjectChecks.expect(gcs, "\(prefix)/live.bin", holds: data)
        }

        // Checks semantics.md#write-only-direct
        @Test("a write-only descriptor leaves no page in the kernel's cache, and a reader that cached a range reads the new bytes")
        func writeOnlyHandlesBypassThePageCache() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("wronly")
            let page = Int(sysconf(Int32(_SC_PAGESIZE)))
            let size = 4 << 20
            let old = MountEnv.pattern(size, seed: 81)
            try await gcs.put("\(prefix)/f.bin", old)
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }

            // A write-only descriptor opens (the kernel drops the inode's
            // cached pages at any open that keeps none); then a reader
            // caches every page of the old bytes, seen through a shared
            // mapping of its descriptor (mincore: which pages are cached).
            let reader = try Posix.open(mount.at("f.bin"), O_RDONLY)
            defer { Glibc.close(reader) }
            let writer = try Posix.open(mount.at("f.bin"), O_WRONLY)
            var closed = false
            defer { if !closed { Glibc.close(writer) } }
            let first = try Posix.pread(reader, count: size, at: 0).get()
            #expect(first == old, "the reader reads the object")
            let mapped = mmap(nil, size, PROT_READ, MAP_SHARED, reader, 0)
            try #require(mapped != MAP_FAILED, "mmap of the reader: \(Posix.name(errno))")
            defer { munmap(mapped, size) }
            func cachedPages(_ range: Range<Int>) -> Int {
                var resident = [UInt8](repeating: 0, count: (size + page - 1) / page)
                guard mincore(mapped, size, &resident) == 0 else { return -1 }
                return resident[(range.lowerBound / page)..<((range.upperBound + page - 1) / page)].filter { $0 & 1 != 0 }.count
            }
            try #require(cachedPages(0..<size) == size / page, "the kernel caches what the reader read: \(cachedPages(0..<size)) pages")

            // The writer overwrites a whole mebibyte and a piece that starts
            // and ends inside pages.
            let patch = MountEnv.pattern(1 << 20, seed: 82), small = MountEnv.pattern(5000, seed: 83)
            let smallAt = 2 * (1 << 20) + 1234
            var expected = old
            expected.replaceSubrange(0..<patch.count, with: patch)
            expected.replaceSubrange(smallAt..<(smallAt + small.count), with: small)
            #expect(Posix.pwriteAll(writer, patch, at: 0) == nil && Posix.pwriteAll(writer, small, at: smallAt) == nil,
                    "writes\nlog:\n\(mount.logTail())")
            // Its bytes did not go into the page cache (buffered writes
            // leave the pages they wrote cached), and the reader's pages
            // of those ranges are gone; those of the rest stay.
            #expect(cachedPages(0..<patch.count) == 0, "pages of the written mebibyte still cached: \(cachedPages(0..<patch.count))")
            #expect(cachedPages(smallAt..<(smallAt + small.count)) == 0, "pages of the small write still cached")
            #expect(cachedPages((3 << 20)..<size) == (1 << 20) / page, "pages nobody wrote stay cached")
            let again = try Posix.pread(reader, count: size, at: 0).get()
            let fresh = again == expected  // outside #expect: no collection diff of megabytes
            #expect(fresh, "the reader reads the bytes written, not its cached ones")

            let outcome = await Posix.within(.seconds(60)) { Glibc.close(writer) }
            closed = outcome != nil
            #expect(outcome?.0.rc == 0, "close: \(outcome.map { "\($0.0)" } ?? "hung")\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/f.bin", holds: expected)
        }

        // Checks semantics.md#write-when-uploaded
        @Test("only a dirty file uploads: a second fsync and the close leave the generation alone")
        func secondFlushUploadsNothing() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("flush")
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let data = MountEnv.pattern(200_000, seed: 7)

            let fd = try Posix.open(mount.at("f.bin"), O_RDWR | O_CREAT | O_TRUNC)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            #expect(Posix.writeAll(fd, data) == nil)
            let first = await Posix.within(.seconds(60)) { fsync(fd) }
            #expect(first?.0.rc == 0, "first fsync: \(first.map { "\($0.0)" } ?? "hung")\nlog:\n\(mount.logTail())")
            let generation = try await gcs.generation("\(prefix)/f.bin")
            try #require(generation != nil, "fsync of a dirty file must upload it")

            let second = await Posix.within(.seconds(60)) { fsync(fd) }
            #expect(second?.0.rc == 0, "second fsync: \(second.map { "\($0.0)" } ?? "hung")")
            #expect(try await gcs.generation("\(prefix)/f.bin") == generation, "a second fsync of an unchanged file uploaded again")
            let close = await Posix.within(.seconds(60)) { Glibc.close(fd) }
            closed = true
            #expect(close?.0.rc == 0, "close: \(close.map { "\($0.0)" } ?? "hung")")
            #expect(try await gcs.generation("\(prefix)/f.bin") == generation, "close of an unchanged file uploaded again")
            try await ObjectChecks.expect(gcs, "\(prefix)/f.bin", holds: data)
        }

        // Checks semantics.md#write-attributes
        @Test("cp -p keeps mtime and chmod 600 keeps the mode, in goog-reserved-* metadata and across a remount")
        func mtimeAndModeSurviveRemount() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("posix")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let content = MountEnv.pattern(10_000, seed: 8)
            try content.write(to: URL(fileURLWithPath: "\(scratch)/kept.dat"))
            let setTime = try await Tools.run("/usr/bin/touch", ["-d", "@1600000000", "\(scratch)/kept.dat"])
            try #require(setTime.ok, "\(setTime.summary)")

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let cp = try await Tools.run("/bin/cp", ["-p", "\(scratch)/kept.dat", mount.at("kept.dat")])
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            let plain = try await Tools.run("/bin/cp", ["\(scratch)/kept.dat", mount.at("private.dat")])
            #expect(plain.ok, "\(plain.summary)")
            let generation = try await gcs.generation("\(prefix)/private.dat")
            let chmod = try await Tools.run("/bin/chmod", ["600", mount.at("private.dat")])
            #expect(chmod.ok, "\(chmod.summary)\nlog:\n\(mount.logTail())")

            let kept = try await gcs.customMetadata("\(prefix)/kept.dat")
            #expect(ObjectChecks.mtimeSeconds(kept) == 1_600_000_000, "cp -p: goog-reserved-file-mtime in \(kept)")
            let mode = try await gcs.customMetadata("\(prefix)/private.dat")
            #expect(ObjectChecks.modeBits(mode) == 0o600, "chmod 600: goog-reserved-posix-mode in \(mode)")
            #expect(try await gcs.generation("\(prefix)/private.dat") == generation, "chmod of a clean object re-uploaded it")
            try await ObjectChecks.expect(gcs, "\(prefix)/kept.dat", holds: content)
            try await ObjectChecks.expect(gcs, "\(prefix)/private.dat", holds: content)

            mount.cleanup()
            let again = try await Self.emulatorMount(prefix)
            defer { again.cleanup() }
            let mtime = try await Tools.run("/usr/bin/stat", ["-c", "%Y", again.at("kept.dat")])
            #expect(mtime.out.trimmingCharacters(in: .whitespacesAndNewlines) == "1600000000", "mtime after remount: \(mtime.summary) \(mtime.out)")
            let perms = try await Tools.run("/usr/bin/stat", ["-c", "%a", again.at("private.dat")])
            #expect(perms.out.trimmingCharacters(in: .whitespacesAndNewlines) == "600", "mode after remount: \(perms.summary) \(perms.out)")
        }

        @Test("an editor-style save: temp file, fsync, rename over the original")
        func editorSave() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("editor")
            try await gcs.put("\(prefix)/notes.txt", Data("first draft\n".utf8))
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }

            // What editors do (vim with backupcopy=no, gedit, many IDEs).
            let script = """
                import os, sys
                d = sys.argv[1]
                tmp = os.path.join(d, ".notes.txt.swp")
                with open(tmp, "wb") as f:
                    f.write(b"second draft\\n" * 1000)
                    f.flush()
                    os.fsync(f.fileno())
                os.rename(tmp, os.path.join(d, "notes.txt"))
                """
            let save = try await Tools.run("/usr/bin/python3", ["-c", script, mount.path])
            #expect(save.ok, "\(save.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/notes.txt", holds: Data(String(repeating: "second draft\n", count: 1000).utf8))
            try await ObjectChecks.expectGone(gcs, "\(prefix)/.notes.txt.swp", "the temporary file should be renamed away")
            #expect(try await gcs.list(prefix: prefix + "/") == ["\(prefix)/notes.txt"])
        }

        // Checks semantics.md#write-rename
        @Test("renaming an open, dirty file: later writes through the descriptor land under the new name")
        func renameOpenDirtyFile() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("renopen")
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let head = MountEnv.pattern(100_000, seed: 9)
            let tail = MountEnv.pattern(50_000, seed: 10)

            let fd = try Posix.open(mount.at("draft.bin"), O_WRONLY | O_CREAT | O_TRUNC)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            #expect(Posix.writeAll(fd, head) == nil)
            #expect(rename(mount.at("draft.bin"), mount.at("final.bin")) == 0, "rename: \(Posix.name(errno))\nlog:\n\(mount.logTail())")
            #expect(Posix.writeAll(fd, tail) == nil)
            let close = await Posix.within(.seconds(60)) { Glibc.close(fd) }
            closed = true
            #expect(close?.0.rc == 0, "close: \(close.map { "\($0.0)" } ?? "hung")\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/final.bin", holds: head + tail)
            try await ObjectChecks.expectGone(gcs, "\(prefix)/draft.bin")
        }

        // Checks semantics.md#write-symlinks
        @Test("ln -s stores a gcsfuse-style link (metadata gcsfuse_symlink_target); readlink reads ours and gcsfuse's")
        func symlinks() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("symlink")
            try await gcs.put("\(prefix)/target.txt", Data("pointed at\n".utf8))
            // A link as gcsfuse writes it: an empty object marked by metadata.
            try await gcs.put("\(prefix)/theirs", Data(), metadata: ["gcsfuse_symlink_target": "sub/dir/file"])

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let ln = try await Tools.run("/bin/ln", ["-s", "target.txt", mount.at("link")])
            #expect(ln.ok, "\(ln.summary)\nlog:\n\(mount.logTail())")
            let mine = try await Tools.run("/usr/bin/readlink", [mount.at("link")])
            #expect(mine.ok && mine.out == "target.txt\n", "readlink of our link: \(mine.summary) \(mine.out)")
            let metadata = try await gcs.customMetadata("\(prefix)/link")
            #expect(metadata["gcsfuse_symlink_target"] == "target.txt", "the link object's metadata: \(metadata)")
            let through = try await Tools.run("/bin/cat", [mount.at("link")])
            #expect(through.ok && through.out == "pointed at\n", "cat through the link: \(through.summary)")

            mount.cleanup()
            let again = try await Self.emulatorMount(prefix)
            defer { again.cleanup() }
            for (name, target) in [("link", "target.txt"), ("theirs", "sub/dir/file")] {
                let kind = try await Tools.run("/usr/bin/stat", ["-c", "%F", again.at(name)])
                #expect(kind.out == "symbolic link\n", "\(name) after remount: \(kind.summary) \(kind.out)")
                let read = try await Tools.run("/usr/bin/readlink", [again.at(name)])
                #expect(read.ok && read.out == "\(target)\n", "readlink \(name): \(read.summary) \(read.out)")
            }
        }

        // Checks semantics.md#errno-eperm, semantics.md#unsupported-link
        @Test("ln (a hard link) fails with EPERM and creates nothing")
        func hardLinkRefused() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("hardlink")
            try await gcs.put("\(prefix)/a.txt", Data("a\n".utf8))
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let ln = try await Tools.run("/bin/ln", [mount.at("a.txt"), mount.at("b.txt")])
            #expect(!ln.ok && ln.stderr.contains("Operation not permitted"), "\(ln.summary)")
            #expect(try await gcs.list(prefix: prefix + "/") == ["\(prefix)/a.txt"])
        }

        // Checks semantics.md#write-read-only, semantics.md#errno-erofs
        @Test("--read-only refuses cp, mkdir, rm, touch, >>, mv and chmod with EROFS; the bucket is unchanged")
        func readOnlyMount() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("ro")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            try Data("local\n".utf8).write(to: URL(fileURLWithPath: "\(scratch)/local.txt"))
            try await gcs.put("\(prefix)/keep.txt", Data("keep\n".utf8))
            try await gcs.put("\(prefix)/dir/inner", Data("inner\n".utf8))
            let before = try await gcs.list(prefix: prefix + "/")
            let generation = try await gcs.generation("\(prefix)/keep.txt")

            let mount = try await Self.emulatorMount(prefix, options: ["--read-only"])
            defer { mount.cleanup() }
            let attempts: [(String, [String])] = [
                ("/bin/cp", ["\(scratch)/local.txt", mount.at("new.txt")]),
                ("/bin/cp", ["\(scratch)/local.txt", mount.at("keep.txt")]),
                ("/bin/mkdir", [mount.at("newdir")]),
                ("/bin/rm", [mount.at("keep.txt")]),
                ("/bin/rm", ["-r", mount.at("dir")]),
                ("/usr/bin/touch", [mount.at("keep.txt")]),
                ("/usr/bin/touch", [mount.at("new-empty")]),
                ("/bin/mv", [mount.at("keep.txt"), mount.at("moved.txt")]),
                ("/bin/chmod", ["600", mount.at("keep.txt")]),
                ("/bin/sh", ["-c", "printf x >> \"$1\"", "sh", mount.at("keep.txt")]),
            ]
            for (tool, args) in attempts {
                let r = try await Tools.run(tool, args)
                #expect(!r.ok && r.stderr.contains("Read-only file system"), "\(r.summary)")
            }
            #expect(try await gcs.list(prefix: prefix + "/") == before, "the bucket changed under a read-only mount")
            #expect(try await gcs.generation("\(prefix)/keep.txt") == generation)
            #expect(try await gcs.customMetadata("\(prefix)/keep.txt").isEmpty)
        }
    }
}
