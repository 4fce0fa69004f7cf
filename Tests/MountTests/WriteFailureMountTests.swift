import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Writes that cannot reach the bucket as planned: the endpoint goes away
    /// (EIO, bytes kept in the recovery folder, uploaded later by
    /// --retry-pending), or someone else replaced the object (ESTALE, their
    /// object intact). Issue 4.
    @Suite struct WriteFailures {
        /// Where a failed upload's bytes are kept:
        /// `<cache-dir>/recovery/<bucket>/<object name>`, with a JSON sidecar
        /// `<that path>.bucketfs-pending.json` beside it.
        static func recoveryPath(cacheDir: String, bucket: String, object: String) -> String {
            "\(cacheDir)/recovery/\(bucket)/\(object)"
        }

        // Checks semantics.md#write-failures-keep-bytes, semantics.md#errno-eio
        @Test("endpoint gone at close: EIO, bytes in the recovery folder, uploaded intact by --retry-pending", .timeLimit(.minutes(3)))
        func endpointGoneAtClose() async throws {
            let emulator = try PrivateEmulator(label: "gone")
            defer { emulator.remove() }
            let endpoint = try await emulator.start()
            let prefix = MountEnv.uniquePrefix("gone")
            let object = "\(prefix)/pending.bin"
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let cacheDir = scratch + "/cache"
            try FileManager.default.createDirectory(atPath: cacheDir, withIntermediateDirectories: true)
            let data = MountEnv.pattern(3 << 20, seed: 700)
            // The last bytes are written after the server is gone: any process
            // forked meanwhile (by another suite) closes its copy of the
            // descriptor, which FLUSHes and may upload early; this tail makes
            // the file dirty again, so the close must still upload.
            let tailStart = data.count - (64 << 10)

            let mount = try await Mount.start(
                endpoint: endpoint, prefix: prefix, options: ["--retry-attempts", "2", "--retry-max-time", "3", "--upload-retry-time", "0"], cacheDir: cacheDir)
            defer { mount.cleanup() }
            let fd = try Posix.open(mount.at("pending.bin"), O_WRONLY | O_CREAT | O_TRUNC)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            #expect(Posix.writeAll(fd, data.prefix(tailStart)) == nil, "write: \(Posix.name(errno))\nlog:\n\(mount.logTail())")

            try await emulator.stop()
            #expect(Posix.writeAll(fd, data.suffix(from: tailStart)) == nil, "write after the server stopped: \(Posix.name(errno))")
            let outcome = await Posix.within(.seconds(30)) { Glibc.close(fd) }
            closed = outcome != nil
            let (result, elapsed) = try #require(outcome, "close hung for 30 s with the endpoint gone\nlog:\n\(mount.logTail())")
            #expect(result.rc == -1 && result.code == EIO, "close with the endpoint gone: \(result), expected EIO\nlog:\n\(mount.logTail())")
            print("close with the endpoint gone returned \(result) after \(elapsed)")

            let recovery = Self.recoveryPath(cacheDir: cacheDir, bucket: MountEnv.bucket, object: object)
            let kept = FileManager.default.contents(atPath: recovery)
            let keptIntact = kept == data  // outside #expect: no collection diff of megabytes
            #expect(keptIntact, "recovery file \(recovery): \(kept.map { "\($0.count) bytes that differ" } ?? "missing")")
            #expect(FileManager.default.fileExists(atPath: recovery + ".bucketfs-pending.json"), "no sidecar beside \(recovery)")
            let log = (try? String(contentsOfFile: mount.logFile, encoding: .utf8)) ?? ""
            #expect(log.contains(recovery), "the mount's log should say where the bytes are (\(recovery))\nlog:\n\(mount.logTail())")
            mount.cleanup()

            // The emulator comes back empty (it is in memory) but with the bucket.
            let endpointAgain = try await emulator.start()
            let gcsAgain = DirectGCS(base: endpointAgain, bucket: MountEnv.bucket)
            #expect(try await gcsAgain.resource(object) == nil, "a fresh emulator should not hold \(object) yet")
            let retry = try await Mount.start(endpoint: endpointAgain, prefix: prefix, options: ["--retry-pending"], cacheDir: cacheDir)
            defer { retry.cleanup() }
            let uploaded = try await gcsAgain.waitForObject(object, timeout: .seconds(30))
            #expect(uploaded != nil, "--retry-pending did not upload \(object) within 30 s\nlog:\n\(retry.logTail())")
            if uploaded != nil { try await ObjectChecks.expect(gcsAgain, object, holds: data, "after --retry-pending") }
            #expect(!FileManager.default.fileExists(atPath: recovery), "the recovery file should be gone once uploaded")
            #expect(!FileManager.default.fileExists(atPath: recovery + ".bucketfs-pending.json"), "the sidecar should be gone once uploaded")
        }

        // Checks semantics.md#write-failures-keep-bytes
        @Test("the mount killed with unsaved writes: the next mount keeps the bytes, --retry-pending uploads them", .timeLimit(.minutes(3)))
        func killedWithUnsavedWrites() async throws {
            let gcs = try DirectGCS.emulator()
            let endpoint = try MountEnv.emulator()
            let prefix = MountEnv.uniquePrefix("killed")
            let object = "\(prefix)/unsaved.bin"
            let scratch = try Scratch.directory()
            defer { Scratch.remove(scratch) }
            let cacheDir = scratch + "/cache"
            try FileManager.default.createDirectory(atPath: cacheDir, withIntermediateDirectories: true)
            let data = MountEnv.pattern(2 << 20, seed: 710)
            let tailStart = data.count - 4096

            let mount = try await Mount.start(endpoint: endpoint, prefix: prefix, cacheDir: cacheDir)
            defer { mount.cleanup() }
            let fd = try Posix.open(mount.at("unsaved.bin"), O_WRONLY | O_CREAT | O_TRUNC)
            #expect(Posix.writeAll(fd, data.prefix(tailStart)) == nil, "write: \(Posix.name(errno))")
            // Written last, right before the kill, so that an early flush
            // (another suite forking) cannot have made the file clean.
            #expect(Posix.writeAll(fd, data.suffix(from: tailStart)) == nil, "write: \(Posix.name(errno))")
            let pid = try #require(mount.pid, "no bucketfs process")
            Glibc.kill(pid, SIGKILL)
            _ = await Posix.within(.seconds(10)) { Glibc.close(fd) }
            mount.cleanup()
            #expect(try await gcs.resource(object) == nil, "nothing was uploaded before the kill")

            let retry = try await Mount.start(endpoint: endpoint, prefix: prefix, options: ["--retry-pending"], cacheDir: cacheDir)
            defer { retry.cleanup() }
            let uploaded = try await gcs.waitForObject(object, timeout: .seconds(30))
            #expect(uploaded != nil, "--retry-pending did not upload \(object)\nlog:\n\(retry.logTail())")
            if uploaded != nil { try await ObjectChecks.expect(gcs, object, holds: data, "after the kill and --retry-pending") }
            let recovery = Self.recoveryPath(cacheDir: cacheDir, bucket: MountEnv.bucket, object: object)
            #expect(!FileManager.default.fileExists(atPath: recovery), "the recovery file should be gone once uploaded")
            let log = (try? String(contentsOfFile: retry.logFile, encoding: .utf8)) ?? ""
            #expect(log.contains("unsaved writes"), "the next mount should say it found unsaved writes\nlog:\n\(retry.logTail())")
        }

        /// Seeds `shared.txt` on the fake server (which honours preconditions)
        /// and mounts its prefix.
        static func conflictSetup(_ label: String) async throws -> (DirectGCS, String, Mount) {
            let gcs = try DirectGCS.fake(bucket: "mounttests")
            let prefix = MountEnv.uniquePrefix(label)
            try await gcs.put("\(prefix)/shared.txt", Data("original\n".utf8))
            let mount = try await Mount.start(endpoint: try MountEnv.fake(), bucket: gcs.bucket, prefix: prefix)
            return (gcs, prefix, mount)
        }

        // Checks semantics.md#write-conflicts, semantics.md#errno-estale
        @Test("the object replaced behind an open writer: close fails with ESTALE and the other writer's object stays")
        func conflictAtClose() async throws {
            let (gcs, prefix, mount) = try await Self.conflictSetup("conflict")
            defer { mount.cleanup() }
            try await Self.checkConflictAtClose(gcs, object: "\(prefix)/shared.txt", mount: mount, file: "shared.txt")
        }

        /// With the default --stat-ttl (60 s): without forgetting what it
        /// cached, the mount would show "original" (neither version) until
        /// the TTL passed.
        // Checks semantics.md#write-conflicts
        @Test("after a lost conflict at close the mount shows the other writer's object at once; the recovery folder has mine")
        func lostConflictShowsTheirsAtOnce() async throws {
            let (gcs, prefix, mount) = try await Self.conflictSetup("conflictfresh")
            defer { mount.cleanup() }
            let object = "\(prefix)/shared.txt"
            let before = try await Tools.run("/usr/bin/stat", ["-c", "%s", mount.at("shared.txt")])
            #expect(before.ok && before.out == "9\n", "stat before: \(before.summary)")
            let fd = try Posix.open(mount.at("shared.txt"), O_WRONLY | O_TRUNC)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            let mine = Data("mine\n".utf8)
            #expect(Posix.pwriteAll(fd, mine, at: 0) == nil, "write\nlog:\n\(mount.logTail())")
            let theirs = Data("theirs, longer\n".utf8)
            try await gcs.put(object, theirs)
            // Dirty again right before close (see checkConflictAtClose).
            #expect(Posix.pwriteAll(fd, mine, at: 0) == nil)
            // The kernel now caches the open file's attributes for the TTL:
            // only its invalidation makes the next stat ask the mount.
            let during = try await Tools.run("/usr/bin/stat", ["-c", "%s", mount.at("shared.txt")])
            #expect(during.ok && during.out == "\(mine.count)\n", "stat while written: \(during.summary)")
            let outcome = await Posix.within(.seconds(60)) { Glibc.close(fd) }
            closed = outcome != nil
            let (result, _) = try #require(outcome, "close hung\nlog:\n\(mount.logTail())")
            #expect(result.rc == -1 && result.code == ESTALE, "close after the object changed: \(result), expected ESTALE\nlog:\n\(mount.logTail())")

            try await Self.expectShown(theirs, mount: mount, file: "shared.txt", "right after the ESTALE close")
            try await ObjectChecks.expect(gcs, object, holds: theirs, "the other writer's object must be intact")
            let recovery = Self.recoveryPath(cacheDir: mount.cacheDir, bucket: gcs.bucket, object: object)
            #expect(FileManager.default.contents(atPath: recovery) == mine, "the rejected bytes are kept in \(recovery)")
        }

        /// Writes to `file` (an existing object), has another writer
        /// replace the object, and expects close to fail with ESTALE, their
        /// object to be left as it is, and the mount to show it at once.
        static func checkConflictAtClose(_ gcs: DirectGCS, object: String, mount: Mount, file: String) async throws {
            let fd = try Posix.open(mount.at(file), O_WRONLY)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            #expect(Posix.writeAll(fd, MountEnv.pattern(64 << 10, seed: 800)) == nil, "write\nlog:\n\(mount.logTail())")

            let theirs = Data("the other writer's version\n".utf8)
            try await gcs.put(object, theirs)
            // Dirty again right before close, in case a process forked by
            // another suite FLUSHed our descriptor (closing its copy) and
            // uploaded the first bytes before their put.
            #expect(Posix.writeAll(fd, Data("more\n".utf8)) == nil)
            let outcome = await Posix.within(.seconds(60)) { Glibc.close(fd) }
            closed = outcome != nil
            let (result, _) = try #require(outcome, "close hung\nlog:\n\(mount.logTail())")
            #expect(result.rc == -1 && result.code == ESTALE, "close after the object changed: \(result), expected ESTALE\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, object, holds: theirs, "the other writer's object must be intact")
            try await expectShown(theirs, mount: mount, file: file, "right after the ESTALE close")
        }

        /// `stat` and `cat` of `file` through the mount show `data`.
        static func expectShown(_ data: Data, mount: Mount, file: String, _ when: String) async throws {
            let size = try await Tools.run("/usr/bin/stat", ["-c", "%s", mount.at(file)])
            #expect(size.ok && size.out == "\(data.count)\n", "stat \(when): \(size.summary)\nlog:\n\(mount.logTail())")
            let cat = try await Tools.run("/bin/cat", [mount.at(file)])
            #expect(cat.ok && cat.stdout == data, "cat \(when): \(cat.summary)\nlog:\n\(mount.logTail())")
        }

        // Checks semantics.md#write-conflicts
        @Test("the object replaced between two fsyncs: the second fsync fails with ESTALE, the other object stays")
        func conflictAtFsync() async throws {
            let (gcs, prefix, mount) = try await Self.conflictSetup("conflictfsync")
            defer { mount.cleanup() }
            let fd = try Posix.open(mount.at("shared.txt"), O_RDWR)
            var closed = false
            defer { if !closed { Glibc.close(fd) } }
            let mine = Data("mine, first\n".utf8)
            #expect(Posix.pwriteAll(fd, mine, at: 0) == nil)
            let first = await Posix.within(.seconds(60)) { fsync(fd) }
            #expect(first?.0.rc == 0, "first fsync: \(first.map { "\($0.0)" } ?? "hung")\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/shared.txt", holds: mine, "after the first fsync")

            let theirs = Data("theirs\n".utf8)
            try await gcs.put("\(prefix)/shared.txt", theirs)
            #expect(Posix.pwriteAll(fd, Data("mine, second\n".utf8), at: 0) == nil)
            let second = await Posix.within(.seconds(60)) { fsync(fd) }
            let (result, _) = try #require(second, "second fsync hung\nlog:\n\(mount.logTail())")
            #expect(result.rc == -1 && result.code == ESTALE, "fsync after the object changed: \(result), expected ESTALE\nlog:\n\(mount.logTail())")
            try await ObjectChecks.expect(gcs, "\(prefix)/shared.txt", holds: theirs, "the other writer's object must be intact")
            let close = await Posix.within(.seconds(60)) { Glibc.close(fd) }
            closed = close != nil
            try await ObjectChecks.expect(gcs, "\(prefix)/shared.txt", holds: theirs, "close after the conflict must not overwrite it either")
        }
    }
}
