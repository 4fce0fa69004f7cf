import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Creating, moving and removing names, and the everyday tools that do
    /// many of those at once (cp -r, tar x, git, rsync), checked through the
    /// server's API (issue 4).
    @Suite struct Namespace {
        static func emulatorMount(_ prefix: String) async throws -> Mount {
            try await Mount.start(endpoint: try MountEnv.emulator(), prefix: prefix)
        }

        @Test("cp -r of a 200-file tree: every object present with its bytes", .timeLimit(.minutes(5)))
        func copyTree() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("cpr")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let files = LocalTree.sample(count: 200, seed: 100)
            try LocalTree.write(files, under: "\(scratch)/tree")

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let cp = try await Tools.run("/bin/cp", ["-r", "\(scratch)/tree", mount.at("tree")], timeout: .seconds(240))
            #expect(cp.ok, "\(cp.summary)\nlog:\n\(mount.logTail())")
            let stored = try await gcs.tree(under: "\(prefix)/tree")
            let diff = ObjectChecks.differences(stored, files)
            #expect(diff.isEmpty, "cp -r: \(diff.count) differences: \(diff.prefix(20).joined(separator: "; "))")
        }

        // Checks semantics.md#write-unlinked-open
        @Test("rm of a file open read-only, read-write or write-only (uploaded or new): its descriptor reads and writes it until close; then nothing is stored or left")
        func unlinkedWhileOpen() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("unlinkopen")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            // Over three blocks: the reads and writes after rm need blocks
            // never fetched before it.
            let content = MountEnv.pattern(3 << 20 + 1234, seed: 18)
            try content.write(to: URL(fileURLWithPath: "\(scratch)/original"))
            let cases = ["up-r", "up-rw", "up-w", "new-r", "new-rw", "new-w"]
            for name in cases where name.hasPrefix("up-") { try await gcs.put("\(prefix)/\(name)", content) }

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            // One process per case would do; one process for all keeps the
            // test short. A new file is created (and written) through a
            // second descriptor that stays open until the end.
            let run = try await Tools.run(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", """
                import os, sys
                mnt, scratch = sys.argv[1], sys.argv[2]
                original = open(os.path.join(scratch, "original"), "rb").read()
                def read_all(fd, n):
                    data = b""
                    while len(data) < n:
                        chunk = os.pread(fd, n - len(data), len(data))
                        if not chunk:
                            break
                        data += chunk
                    return data
                for name in sys.argv[3:]:
                    path = os.path.join(mnt, name)
                    mode = name.split("-")[1]
                    creator = None
                    if name.startswith("new-"):
                        creator = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                        os.write(creator, original)
                    fd = os.open(path, {"r": os.O_RDONLY, "rw": os.O_RDWR, "w": os.O_WRONLY}[mode])
                    os.unlink(path)
                    size = len(original)
                    try:
                        if mode != "r":
                            os.pwrite(fd, b"tail", size)
                            size += 4
                        if os.fstat(fd).st_size != size:
                            print(name, "fstat size", os.fstat(fd).st_size)
                        if mode != "w":
                            open(os.path.join(scratch, name), "wb").write(read_all(fd, size + 10))
                        os.close(fd)
                        if creator is not None:
                            os.close(creator)
                        print(name, "ok")
                    except OSError as e:
                        print(name, "errno", e.errno, e.strerror)
                """, mount.path, scratch] + cases)
            #expect(run.ok, "\(run.summary)\nlog:\n\(mount.logTail())")
            #expect(run.lines == cases.map { "\($0) ok" }, "\(run.summary)\nlog:\n\(mount.logTail())")
            for name in ["up-r", "new-r"] {
                #expect(FileManager.default.contents(atPath: "\(scratch)/\(name)") == content, "\(name): the bytes read after rm")
            }
            for name in ["up-rw", "new-rw"] {
                #expect(FileManager.default.contents(atPath: "\(scratch)/\(name)") == content + Data("tail".utf8), "\(name): the bytes read after rm")
            }
            // Nothing uploaded, nothing left: not in the bucket, not in the
            // cache directory once the last releases are done.
            #expect(try await gcs.list(prefix: prefix + "/").isEmpty)
            let staging = "\(mount.cacheDir)/staging"
            let deadline = ContinuousClock.now + .seconds(10)
            var left = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
            while !left.isEmpty, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(100))
                left = (try? FileManager.default.contentsOfDirectory(atPath: staging)) ?? []
            }
            #expect(left.isEmpty, "staged files left: \(left)")
            #expect(((try? FileManager.default.contentsOfDirectory(atPath: "\(mount.cacheDir)/recovery")) ?? []).isEmpty)
            #expect(try await gcs.list(prefix: prefix + "/").isEmpty)
        }

        // Checks semantics.md#write-rename
        // Checks semantics.md#write-rename
        @Test("a descriptor open for reading reads on after mv of its file, and of its directory (no ESTALE)")
        func readersFollowARename() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("mvopen")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            // Over three blocks: most of it is read only after the rename.
            let content = MountEnv.pattern(3 << 20 + 4321, seed: 24)
            try content.write(to: URL(fileURLWithPath: "\(scratch)/original"))
            try await gcs.put("\(prefix)/file.bin", content)
            try await gcs.put("\(prefix)/dir/inner.bin", content)

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let run = try await Tools.run(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", """
                import os, sys
                mnt, scratch = sys.argv[1], sys.argv[2]
                original = open(os.path.join(scratch, "original"), "rb").read()
                for source, target, renamed in [("file.bin", "moved.bin", "moved.bin"), ("dir", "dir2", "dir2/inner.bin")]:
                    reading = "dir/inner.bin" if source == "dir" else source
                    fd = os.open(os.path.join(mnt, reading), os.O_RDONLY)
                    head = os.read(fd, 4096)
                    os.rename(os.path.join(mnt, source), os.path.join(mnt, target))
                    data = head
                    while True:
                        chunk = os.read(fd, 1 << 20)
                        if not chunk:
                            break
                        data += chunk
                    os.close(fd)
                    if data != original:
                        sys.exit(f"{reading}: read {len(data)} bytes after mv, not the object's")
                    if open(os.path.join(mnt, renamed), "rb").read() != original:
                        sys.exit(f"{renamed}: wrong bytes under the new name")
                """, mount.path, scratch])
            #expect(run.ok, "\(run.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expectGone(gcs, "\(prefix)/file.bin", "mv deletes the source")
            try await ObjectChecks.expect(gcs, "\(prefix)/moved.bin", holds: content)
            try await ObjectChecks.expectGone(gcs, "\(prefix)/dir/inner.bin", "mv of the directory deletes the source")
            try await ObjectChecks.expect(gcs, "\(prefix)/dir2/inner.bin", holds: content)
        }

        @Test("mv of a file: source gone, destination with the bytes, contentType and custom metadata")
        func moveFile() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("mvfile")
            let content = MountEnv.pattern(250_000, seed: 11)
            try await gcs.put(
                "\(prefix)/from.bin", content, metadata: ["owner": "team-b", "note": "moved by mv"],
                contentType: "application/x-bucketfs-test")

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let mkdir = try await Tools.run("/bin/mkdir", [mount.at("sub")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            let mv = try await Tools.run("/bin/mv", [mount.at("from.bin"), mount.at("sub/to.txt")])
            #expect(mv.ok, "\(mv.summary)\nlog:\n\(mount.logTail())")

            try await ObjectChecks.expectGone(gcs, "\(prefix)/from.bin", "mv should delete the source")
            try await ObjectChecks.expect(gcs, "\(prefix)/sub/to.txt", holds: content)
            let resource = try await gcs.resource("\(prefix)/sub/to.txt")
            #expect(resource?["contentType"] as? String == "application/x-bucketfs-test",
                    "contentType after mv (kept, not inferred from .txt): \(resource?["contentType"] ?? "nil")")
            let metadata = resource?["metadata"] as? [String: String] ?? [:]
            #expect(metadata["owner"] == "team-b" && metadata["note"] == "moved by mv", "custom metadata after mv: \(metadata)")
        }

        // Checks semantics.md#write-rename
        @Test("mv of a 50-file directory: everything below it moves, nothing stays behind", .timeLimit(.minutes(5)))
        func moveDirectory() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("mvdir")
            let files = LocalTree.sample(count: 50, seed: 200)
            try await gcs.putAll(files.map { ("\(prefix)/src/\($0.key)", $0.value) })
            try await gcs.put("\(prefix)/src/", Data())

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let mv = try await Tools.run("/bin/mv", [mount.at("src"), mount.at("dst")], timeout: .seconds(240))
            #expect(mv.ok, "\(mv.summary)\nlog:\n\(mount.logTail())")

            let left = try await gcs.list(prefix: "\(prefix)/src/")
            #expect(left.isEmpty, "objects left under src/: \(left.prefix(10))")
            let moved = try await gcs.tree(under: "\(prefix)/dst")
            let diff = ObjectChecks.differences(moved, files)
            #expect(diff.isEmpty, "mv of a directory: \(diff.count) differences: \(diff.prefix(20).joined(separator: "; "))")
            let ls = try await Tools.run("/bin/ls", ["-A", mount.path])
            #expect(ls.lines == ["dst"], "ls after mv: \(ls.summary) \(ls.out)")
        }

        @Test("rm -r removes every object below, placeholders included; rm of one file deletes it")
        func removeTree() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("rmr")
            let files = LocalTree.sample(count: 30, seed: 300)
            try await gcs.putAll(files.map { ("\(prefix)/doomed/\($0.key)", $0.value) })
            try await gcs.put("\(prefix)/doomed/", Data())
            try await gcs.put("\(prefix)/doomed/d1/", Data())
            try await gcs.put("\(prefix)/doomed/emptydir/", Data())
            try await gcs.put("\(prefix)/survivor.txt", Data("stays\n".utf8))
            try await gcs.put("\(prefix)/single.txt", Data("goes\n".utf8))

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let rm = try await Tools.run("/bin/rm", ["-r", mount.at("doomed")], timeout: .seconds(120))
            #expect(rm.ok, "\(rm.summary)\nlog:\n\(mount.logTail())")
            let rmOne = try await Tools.run("/bin/rm", [mount.at("single.txt")])
            #expect(rmOne.ok, "\(rmOne.summary)")
            #expect(try await gcs.list(prefix: prefix + "/") == ["\(prefix)/survivor.txt"])
        }

        // Checks semantics.md#write-directories, semantics.md#errno-enotempty
        @Test("mkdir makes a dir/ placeholder; rmdir removes it; rmdir of a non-empty directory is ENOTEMPTY")
        func mkdirAndRmdir() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("mkdir")
            try await gcs.put("\(prefix)/full/child.txt", Data("child\n".utf8))
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }

            let mkdir = try await Tools.run("/bin/mkdir", [mount.at("made")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            let placeholder = try await gcs.resource("\(prefix)/made/")
            #expect(placeholder?["size"] as? String == "0", "mkdir should upload an empty made/ placeholder: \(placeholder ?? [:])")
            let again = try await Tools.run("/bin/mkdir", [mount.at("made")])
            #expect(!again.ok && again.stderr.contains("File exists"), "mkdir of an existing directory: \(again.summary)")

            let rmdir = try await Tools.run("/bin/rmdir", [mount.at("made")])
            #expect(rmdir.ok, "\(rmdir.summary)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expectGone(gcs, "\(prefix)/made/", "rmdir should delete the placeholder")

            let notEmpty = try await Tools.run("/bin/rmdir", [mount.at("full")])
            #expect(!notEmpty.ok && notEmpty.stderr.contains("Directory not empty"), "rmdir of a non-empty directory: \(notEmpty.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/full/child.txt", holds: Data("child\n".utf8))
        }

        @Test("mkdir -p a/b/c creates the three placeholders")
        func mkdirParents() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("mkdirp")
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let mkdir = try await Tools.run("/bin/mkdir", ["-p", mount.at("a/b/c")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            #expect(try await gcs.list(prefix: prefix + "/") == ["\(prefix)/a/", "\(prefix)/a/b/", "\(prefix)/a/b/c/"])
            let deeper = try await Tools.run("/bin/mkdir", ["-p", mount.at("a/b/c/d/e")])
            #expect(deeper.ok, "\(deeper.summary)")
            #expect(try await gcs.resource("\(prefix)/a/b/c/d/e/") != nil, "mkdir -p of a deeper path: no a/b/c/d/e/ placeholder")
        }

        // Checks semantics.md#write-directories
        @Test("an empty directory survives a remount")
        func emptyDirectorySurvivesRemount() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("emptydir")
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let mkdir = try await Tools.run("/bin/mkdir", [mount.at("keepme")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            mount.cleanup()

            #expect(try await gcs.resource("\(prefix)/keepme/") != nil, "no keepme/ placeholder after unmount")
            let again = try await Self.emulatorMount(prefix)
            defer { again.cleanup() }
            let ls = try await Tools.run("/bin/ls", ["-A", again.path])
            #expect(ls.ok && ls.lines == ["keepme"], "ls after remount: \(ls.summary) \(ls.out)")
            let inner = try await Tools.run("/bin/ls", ["-A", again.at("keepme")])
            #expect(inner.ok && inner.lines.isEmpty, "ls keepme: \(inner.summary) \(inner.out)")
        }

        // Checks semantics.md#errno-eexist, semantics.md#errno-einval
        @Test("RENAME_NOREPLACE keeps an existing target (EEXIST); RENAME_EXCHANGE is EINVAL; mv -n keeps the target")
        func renameFlags() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("renflags")
            try await gcs.put("\(prefix)/a.txt", Data("a\n".utf8))
            try await gcs.put("\(prefix)/b.txt", Data("b\n".utf8))
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }

            let noReplace = Posix.rename2(mount.at("a.txt"), mount.at("b.txt"), flags: Posix.renameNoReplace)
            #expect(noReplace.rc == -1 && noReplace.code == EEXIST, "renameat2(NOREPLACE) onto an existing name: \(noReplace)")
            let exchange = Posix.rename2(mount.at("a.txt"), mount.at("b.txt"), flags: Posix.renameExchange)
            #expect(exchange.rc == -1 && exchange.code == EINVAL, "renameat2(EXCHANGE): \(exchange)")
            let mvn = try await Tools.run("/bin/mv", ["-n", mount.at("a.txt"), mount.at("b.txt")])
            #expect(!mvn.signaled && !mvn.timedOut, "\(mvn.summary)")
            try await ObjectChecks.expect(gcs, "\(prefix)/a.txt", holds: Data("a\n".utf8), "the source must stay")
            try await ObjectChecks.expect(gcs, "\(prefix)/b.txt", holds: Data("b\n".utf8), "the target must stay")

            let fresh = Posix.rename2(mount.at("a.txt"), mount.at("c.txt"), flags: Posix.renameNoReplace)
            #expect(fresh.rc == 0, "renameat2(NOREPLACE) onto a new name: \(fresh)\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/c.txt", holds: Data("a\n".utf8))
            try await ObjectChecks.expectGone(gcs, "\(prefix)/a.txt")
        }

        @Test("tar x of an archive into the mount: every file byte for byte, mtimes kept, empty dir kept", .timeLimit(.minutes(5)))
        func tarExtract() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("tarx")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let files = LocalTree.sample(count: 50, seed: 400)
            try LocalTree.write(files, emptyDirectories: ["d9/empty"], under: "\(scratch)/src")
            // Fixed mtimes, so the extracted copies must carry them over.
            let touch = try await Tools.run("/bin/sh", [
                "-c", "cd \"$1\" && find . -type f -exec touch -d @1234567890 {} +", "sh", "\(scratch)/src",
            ])
            try #require(touch.ok, "\(touch.summary)")
            let tar = try await Tools.run("/bin/tar", ["-C", "\(scratch)/src", "-cf", "\(scratch)/a.tar", "."])
            try #require(tar.ok, "\(tar.summary)")

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let mkdir = try await Tools.run("/bin/mkdir", [mount.at("x")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            let untar = try await Tools.run("/bin/tar", ["-C", mount.at("x"), "-xf", "\(scratch)/a.tar"], timeout: .seconds(240))
            #expect(untar.ok, "\(untar.summary)\nlog:\n\(mount.logTail())")

            let stored = try await gcs.tree(under: "\(prefix)/x")
            let diff = ObjectChecks.differences(stored, files)
            #expect(diff.isEmpty, "tar x: \(diff.count) differences: \(diff.prefix(20).joined(separator: "; "))")
            #expect(try await gcs.resource("\(prefix)/x/d9/empty/") != nil, "the archive's empty directory has no placeholder")
            var wrongTimes: [String] = []
            for name in files.keys.sorted() {
                let metadata = (try? await gcs.customMetadata("\(prefix)/x/\(name)")) ?? [:]
                if ObjectChecks.mtimeSeconds(metadata) != 1_234_567_890 { wrongTimes.append("\(name): \(metadata)") }
            }
            #expect(wrongTimes.isEmpty, "tar x should keep mtimes: \(wrongTimes.count) wrong, e.g. \(wrongTimes.prefix(3))")
        }

        @Test("git init, add, commit inside the mount; git clone into it", .timeLimit(.minutes(5)))
        func gitInMount() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("git")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let identity = ["-c", "user.name=Mount Test", "-c", "user.email=mount@test.invalid", "-c", "init.defaultBranch=main"]
            func git(_ dir: String, _ args: [String]) async throws -> ToolResult {
                try await Tools.run("/usr/bin/git", identity + ["-C", dir] + args, timeout: .seconds(120))
            }

            let mkdir = try await Tools.run("/bin/mkdir", [mount.at("repo")])
            #expect(mkdir.ok, "\(mkdir.summary)\nlog:\n\(mount.logTail())")
            let repo = mount.at("repo")
            let readme = Data("# in a bucket\n".utf8)
            let code = MountEnv.pattern(30_000, seed: 500)
            try readme.write(to: URL(fileURLWithPath: repo + "/README.md"))
            try FileManager.default.createDirectory(atPath: repo + "/src", withIntermediateDirectories: true)
            try code.write(to: URL(fileURLWithPath: repo + "/src/blob.bin"))
            for step in [["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "first"]] {
                let r = try await git(repo, step)
                #expect(r.ok, "git \(step.joined(separator: " ")): \(r.summary)\nlog:\n\(mount.logTail())")
            }
            let log = try await git(repo, ["log", "--format=%s"])
            #expect(log.ok && log.lines == ["first"], "git log: \(log.summary) \(log.out)")
            let status = try await git(repo, ["status", "--porcelain"])
            #expect(status.ok && status.lines.isEmpty, "git status: \(status.summary) \(status.out)")
            let fsck = try await git(repo, ["fsck", "--strict"])
            #expect(fsck.ok, "git fsck: \(fsck.summary)")

            let names = Set(try await gcs.list(prefix: "\(prefix)/repo/"))
            for needed in [".git/HEAD", ".git/config", ".git/index", "README.md", "src/blob.bin"] {
                #expect(names.contains("\(prefix)/repo/\(needed)"), "\(needed) missing in the bucket")
            }
            let objects = names.filter { $0.hasPrefix("\(prefix)/repo/.git/objects/") && !$0.hasSuffix("/") }
            #expect(objects.count >= 5, "expected blob, tree and commit objects under .git/objects: \(objects.sorted())")
            try await ObjectChecks.expect(gcs, "\(prefix)/repo/src/blob.bin", holds: code)

            // git clone of a local repository with some history into the mount.
            let origin = "\(scratch)/origin"
            try FileManager.default.createDirectory(atPath: origin, withIntermediateDirectories: true)
            let history = LocalTree.sample(count: 20, seed: 501)
            #expect(try await git(origin, ["init", "-q"]).ok)
            for (round, chunk) in [Array(history.keys.sorted().prefix(10)), Array(history.keys.sorted().dropFirst(10))].enumerated() {
                try LocalTree.write(Dictionary(uniqueKeysWithValues: chunk.map { ($0, history[$0]!) }), under: origin)
                #expect(try await git(origin, ["add", "-A"]).ok)
                #expect(try await git(origin, ["commit", "-q", "-m", "round \(round)"]).ok)
            }
            let clone = try await Tools.run("/usr/bin/git", identity + ["clone", "-q", "--no-hardlinks", origin, mount.at("clone")],
                                            timeout: .seconds(180))
            #expect(clone.ok, "git clone: \(clone.summary)\nlog:\n\(mount.logTail())")
            let cloneStatus = try await git(mount.at("clone"), ["status", "--porcelain"])
            #expect(cloneStatus.ok && cloneStatus.lines.isEmpty, "git status in the clone: \(cloneStatus.summary) \(cloneStatus.out)")
            let cloneLog = try await git(mount.at("clone"), ["log", "--format=%s"])
            #expect(cloneLog.lines == ["round 1", "round 0"], "git log in the clone: \(cloneLog.summary) \(cloneLog.out)")
            let worktree = try await gcs.tree(under: "\(prefix)/clone").filter { !$0.key.hasPrefix(".git/") }
            let diff = ObjectChecks.differences(worktree, history)
            #expect(diff.isEmpty, "git clone's work tree in the bucket: \(diff.prefix(20).joined(separator: "; "))")
        }

        // Checks semantics.md#write-attributes
        @Test("rsync -a into the mount keeps bytes, mtimes and modes, across a remount", .timeLimit(.minutes(5)))
        func rsyncArchive() async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix("rsync")
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let files = LocalTree.sample(count: 30, seed: 600)
            try LocalTree.write(files, under: "\(scratch)/src")
            let prepare = try await Tools.run("/bin/sh", [
                "-c", "cd \"$1\" && find . -type f -exec touch -d @1400000000 {} + && chmod 600 file5.dat && chmod 755 file10.dat",
                "sh", "\(scratch)/src",
            ])
            try #require(prepare.ok, "\(prepare.summary)")

            let mount = try await Self.emulatorMount(prefix)
            defer { mount.cleanup() }
            let rsync = try await Tools.run("/usr/bin/rsync", ["-a", "\(scratch)/src/", mount.at("dst/")], timeout: .seconds(240))
            #expect(rsync.ok, "\(rsync.summary)\nlog:\n\(mount.logTail())")
            let stored = try await gcs.tree(under: "\(prefix)/dst")
            let diff = ObjectChecks.differences(stored, files)
            #expect(diff.isEmpty, "rsync -a: \(diff.count) differences (temporary files left?): \(diff.prefix(20).joined(separator: "; "))")
            // file5.dat and file10.dat are at the top of LocalTree.sample's tree.
            let private5 = try await gcs.customMetadata("\(prefix)/dst/file5.dat")
            #expect(ObjectChecks.modeBits(private5) == 0o600, "file5.dat: \(private5)")
            #expect(ObjectChecks.mtimeSeconds(private5) == 1_400_000_000, "file5.dat: \(private5)")
            let executable10 = try await gcs.customMetadata("\(prefix)/dst/file10.dat")
            #expect(ObjectChecks.modeBits(executable10) == 0o755, "file10.dat: \(executable10)")

            mount.cleanup()
            let again = try await Self.emulatorMount(prefix)
            defer { again.cleanup() }
            // A second rsync finds nothing to do when mtimes and sizes survived.
            let second = try await Tools.run("/usr/bin/rsync", ["-a", "--itemize-changes", "\(scratch)/src/", again.at("dst/")],
                                             timeout: .seconds(120))
            #expect(second.ok, "\(second.summary)")
            let transfers = second.lines.filter { $0.hasPrefix(">f") }
            #expect(transfers.isEmpty, "after a remount rsync -a should see every file as up to date: \(transfers.prefix(10))")
        }
    }
}
