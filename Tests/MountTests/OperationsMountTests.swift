import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// Operating a mount: config file and environment, `bucketfs status`,
    /// dropping caches (status and SIGHUP), systemd readiness.
    @Suite struct Operations {
        /// `bucketfs status --json MOUNTPOINT`, decoded.
        static func status(_ mount: Mount, dropCaches: Bool = false) async throws -> [String: Any] {
            let result = try await runBucketfs(["status", "--json"] + (dropCaches ? ["--drop-caches"] : []) + [mount.path])
            #expect(result.ok, "\(result.summary)\nlog:\n\(mount.logTail())")
            let array = try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]], "status --json: \(result.out)")
            #expect(array.count == 1)
            return try #require(array.first)
        }

        static func settings(_ status: [String: Any]) -> [String: String] { status["settings"] as? [String: String] ?? [:] }
        static func filesystem(_ status: [String: Any]) -> [String: Any] { status["filesystem"] as? [String: Any] ?? [:] }

        static func writeConfig(_ mount: Mount, _ json: String) throws -> String {
            let path = mount.base + "/config.json"
            try Data(json.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }

        @Test("options come from the command line, then BUCKETFS_* variables, then the config file")
        func configPrecedence() async throws {
            let config = mountConfigDirectory() + "/precedence-\(UUID().uuidString.prefix(8)).json"
            defer { try? FileManager.default.removeItem(atPath: config) }
            try Data("""
                { "stat-ttl": 11, "negative-ttl": 3, "cache-size": 77, "read-only": true,
                  "upload-retry-time": 7.5, "fuse-options": ["default_permissions"] }
                """.utf8).write(to: URL(fileURLWithPath: config))
            let mount = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: MountEnv.uniquePrefix("config"),
                options: ["-o", "config=\(config),cache_size=99"],
                environment: ["BUCKETFS_STAT_TTL": "22", "BUCKETFS_CACHE_SIZE": "88"])
            defer { mount.cleanup() }
            let settings = Self.settings(try await Self.status(mount))
            #expect(settings["stat-ttl"] == "22.0", "environment over file: \(settings)")
            #expect(settings["negative-ttl"] == "3.0", "file over default: \(settings)")
            #expect(settings["cache-size"] == "99", "-o over environment and file: \(settings)")
            #expect(settings["upload-retry-time"] == "7.5", "\(settings)")
            #expect(settings["read-only"] == "true", "\(settings)")
            #expect(settings["config"] == config)
            // The file's read-only flag and FUSE option reached the kernel.
            let options = try #require(Kernel.mountOptions(mount.path), "no mountinfo line for \(mount.path)")
            #expect(options.contains("ro"), "mount options: \(options)")
            #expect(options.contains("default_permissions"), "mount options: \(options)")
            let fd = open(mount.at("new.txt"), O_CREAT | O_WRONLY, 0o644)
            let code = errno
            if fd >= 0 { close(fd) }
            #expect(fd == -1 && code == EROFS, "create on a read-only mount: fd \(fd), errno \(code)")
        }

        @Test("a config file with an unknown key, or a missing one, is refused with exit 64 and the reason")
        func badConfig() async throws {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let typo = try Self.writeConfig(dirs, #"{ "stat-tll": 5 }"#)
            let base = ["mount", "--endpoint", try MountEnv.emulator(), "--anonymous", "gs://\(MountEnv.bucket)", dirs.path,
                        "--cache-dir", dirs.cacheDir]
            let unknown = try await runBucketfs(base + ["--config", typo])
            #expect(unknown.status == 64 && unknown.stderr.contains("stat-tll"), "\(unknown.summary)")
            let missing = try await runBucketfs(base + ["--config", dirs.base + "/nope.json"])
            #expect(missing.status == 64 && missing.stderr.contains("nope.json"), "\(missing.summary)")
            let notJSON = try Self.writeConfig(dirs, "stat-ttl = 5")
            let invalid = try await runBucketfs(base + ["--config", notJSON])
            #expect(invalid.status == 64 && invalid.stderr.contains("is not JSON at line 1, column 1"), "\(invalid.summary)")
            let badValue = try await runBucketfs(base, environment: ["BUCKETFS_STAT_TTL": "soon"])
            #expect(badValue.status == 64 && badValue.stderr.contains("stat-ttl"), "\(badValue.summary)")
            #expect(!Kernel.isMounted(dirs.path))
        }

        @Test("every option of mount --help can be set in a config file and as -o name=value")
        func everyOptionConfigurable() async throws {
            let help = try await runBucketfs(["mount", "--help"])
            let names = Set(help.out.matches(of: /--([a-z][a-z-]+)/).map { String($0.output.1) })
                .subtracting(["help", "version", "foreground", "config"])
            #expect(names.count > 30 && names.contains("stat-ttl") && names.contains("kernel-read-ahead"), "\(names.sorted())")
            let dirs = try Mount()
            defer { dirs.cleanup() }
            // Values only need to be read; the mount then fails on the first
            // one that makes no sense (a bucket that does not exist at worst).
            let json = "{" + names.sorted().map { "\"\($0)\": \"1\"" }.joined(separator: ",") + "}"
            let config = try Self.writeConfig(dirs, json)
            let viaFile = try await runBucketfs(["mount", "gs://no-such-bucket-cfg", dirs.path, "--config", config], timeout: .seconds(30))
            #expect(!viaFile.stderr.contains("unknown option"), "\(viaFile.summary)")
            let viaO = try await runBucketfs(
                ["mount", "gs://no-such-bucket-cfg", dirs.path, "-o", names.sorted().map { "\($0.replacingOccurrences(of: "-", with: "_"))=1" }.joined(separator: ",")],
                timeout: .seconds(30))
            #expect(!viaO.stderr.contains("unknown mount option"), "\(viaO.summary)")
            #expect(!Kernel.isMounted(dirs.path))
        }

        @Test("status shows the bucket, uptime, a file being written, a failed upload with its cause, and cache use")
        func statusReport() async throws {
            let (gcs, prefix, mount) = try await MountTests.WriteFailures.conflictSetup("status")
            defer { mount.cleanup() }
            _ = try FileManager.default.contentsOfDirectory(atPath: mount.path)
            // The writer is a process of its own: every process this test
            // spawns (bucketfs status) would otherwise close a copy of the
            // descriptor between fork and exec, and each close uploads.
            let control = mount.base + "/writer"
            let writer = try Tools.Running(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", """
                import os, sys, time
                fd = os.open(sys.argv[1], os.O_WRONLY)
                os.write(fd, bytes(100000))
                open(sys.argv[2] + ".written", "w").close()
                while not os.path.exists(sys.argv[2] + ".close"):
                    time.sleep(0.02)
                try:
                    os.close(fd)
                    print("closed")
                except OSError as e:
                    print("errno", e.errno)
                """, mount.at("shared.txt"), control])
            defer { writer.kill() }
            let deadline = ContinuousClock.now + .seconds(20)
            while !FileManager.default.fileExists(atPath: control + ".written"), writer.isRunning, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }

            var status = try await Self.status(mount)
            #expect(status["bucket"] as? String == gcs.bucket)
            #expect(status["prefix"] as? String == prefix + "/")
            #expect(status["mountpoint"] as? String == mount.path)
            #expect((status["uptimeSeconds"] as? Double ?? -1) >= 0)
            #expect(status["pid"] as? Int == Int(mount.pid ?? -1))
            let pending = Self.filesystem(status)["pendingUploads"] as? [[String: Any]] ?? []
            #expect(pending.count == 1, "\(pending)")
            #expect(pending.first?["path"] as? String == "/shared.txt")
            #expect(pending.first?["state"] as? String == "writing")
            #expect(pending.first?["size"] as? Int == 100_000)
            let caches = Self.filesystem(status)["caches"] as? [String: Any] ?? [:]
            #expect((caches["statEntries"] as? Int ?? 0) >= 1, "\(caches)")

            // Another writer replaces the object: our close fails (ESTALE)
            // and the bytes go to the recovery folder, with the cause.
            try await gcs.put("\(prefix)/shared.txt", Data("theirs\n".utf8))
            FileManager.default.createFile(atPath: control + ".close", contents: nil)
            #expect(await writer.wait(.seconds(60)))
            let closed = writer.result()
            #expect(closed.out == "errno \(ESTALE)\n", "close after the object changed: \(closed.summary)\nlog:\n\(mount.logTail())")
            status = try await Self.status(mount)
            #expect((Self.filesystem(status)["pendingUploads"] as? [Any])?.isEmpty == true, "\(status)")
            let recovery = Self.filesystem(status)["recovery"] as? [[String: Any]] ?? []
            #expect(recovery.count == 1, "\(recovery)")
            #expect(recovery.first?["object"] as? String == "\(prefix)/shared.txt")
            #expect(recovery.first?["size"] as? Int == 100_000)
            #expect((recovery.first?["reason"] as? String ?? "").contains("precondition"), "\(recovery)")

            // The text form says the same for people.
            let text = try await runBucketfs(["status", mount.path])
            #expect(text.ok, "\(text.summary)")
            #expect(text.out.contains("gs://\(gcs.bucket)/\(prefix)/"), "\(text.out)")
            #expect(text.out.contains("recovery folder: 1 entry"), "\(text.out)")
            #expect(text.out.contains("\(prefix)/shared.txt"), "\(text.out)")
            // Without a mountpoint: every mount, this one among them.
            let all = try await runBucketfs(["status", "--json"])
            #expect(all.ok && all.out.contains("\"mountpoint\" : \"\(mount.path)\""), "\(all.summary)")
        }

        @Test("status of a directory that is no bucketfs mount exits 1")
        func statusNotAMount() async throws {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let result = try await runBucketfs(["status", dirs.path])
            #expect(result.status == 1 && result.stderr.contains("not a bucketfs mount"), "\(result.summary)")
        }

        /// An object added and one replaced behind the mount's back stay
        /// unseen for the hour-long TTL until the caches are dropped by `drop`.
        static func checkDropCaches(_ label: String, drop: (Mount) async throws -> Void) async throws {
            let gcs = try DirectGCS.emulator()
            let prefix = MountEnv.uniquePrefix(label)
            try await gcs.put("\(prefix)/old.txt", Data("short\n".utf8))
            let mount = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: prefix, options: ["--stat-ttl", "3600", "--negative-ttl", "3600"])
            defer { mount.cleanup() }
            #expect(try FileManager.default.contentsOfDirectory(atPath: mount.path) == ["old.txt"])
            #expect(try FileManager.default.attributesOfItem(atPath: mount.at("old.txt"))[.size] as? Int == 6)
            #expect(!FileManager.default.fileExists(atPath: mount.at("new.txt")))

            try await gcs.put("\(prefix)/new.txt", Data("new\n".utf8))
            try await gcs.put("\(prefix)/old.txt", Data("a longer text\n".utf8))
            #expect(try FileManager.default.contentsOfDirectory(atPath: mount.path) == ["old.txt"], "cached listing")
            #expect(!FileManager.default.fileExists(atPath: mount.at("new.txt")), "cached absence")

            try await drop(mount)
            #expect(try FileManager.default.contentsOfDirectory(atPath: mount.path).sorted() == ["new.txt", "old.txt"])
            #expect(FileManager.default.fileExists(atPath: mount.at("new.txt")), "log:\n\(mount.logTail())")
            #expect(try FileManager.default.attributesOfItem(atPath: mount.at("old.txt"))[.size] as? Int == 14)
            #expect(try String(contentsOfFile: mount.at("old.txt"), encoding: .utf8) == "a longer text\n")
            #expect(Kernel.isMounted(mount.path))
        }

        @Test("status --drop-caches makes changes made by other tools visible at once")
        func dropCachesByStatus() async throws {
            try await Self.checkDropCaches("dropstatus") { mount in
                let result = try await runBucketfs(["status", "--drop-caches", mount.path])
                #expect(result.ok && result.out.contains("caches dropped"), "\(result.summary)")
            }
        }

        @Test("SIGHUP drops the caches and keeps the mount")
        func dropCachesBySIGHUP() async throws {
            try await Self.checkDropCaches("drophup") { mount in
                let pid = try #require(mount.pid)
                #expect(kill(pid, SIGHUP) == 0)
                let deadline = ContinuousClock.now + .seconds(10)
                while !(try String(contentsOfFile: mount.logFile, encoding: .utf8)).contains("metadata caches dropped"),
                      ContinuousClock.now < deadline {
                    try await Task.sleep(for: .milliseconds(50))
                }
            }
        }

        @Test("under systemd (NOTIFY_SOCKET) the mount reports READY=1 with its pid, RELOADING=1 on SIGHUP, STOPPING=1 at unmount")
        func systemdNotify() async throws {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let socket = dirs.base + "/notify.sock"
            let received = dirs.base + "/notify.log"
            // A stand-in for systemd: a datagram socket that logs each message.
            let listener = try Tools.Running(try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", """
                import socket, sys
                s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
                s.bind(sys.argv[1])
                open(sys.argv[2] + ".ready", "w").close()
                while True:
                    with open(sys.argv[2], "a") as f:
                        f.write(s.recv(4096).decode() + "\\n--\\n")
                """, socket, received])
            defer { listener.kill() }
            let deadline = ContinuousClock.now + .seconds(10)
            while !FileManager.default.fileExists(atPath: received + ".ready"), ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let mount = try await Mount.start(
                endpoint: try MountEnv.emulator(), prefix: MountEnv.uniquePrefix("notify"), mode: .foreground,
                environment: ["NOTIFY_SOCKET": socket])
            defer { mount.cleanup() }
            let pid = try #require(mount.pid)
            func messages() -> String { (try? String(contentsOfFile: received, encoding: .utf8)) ?? "" }
            func waitFor(_ text: String) async throws -> Bool {
                let deadline = ContinuousClock.now + .seconds(10)
                while !messages().contains(text), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
                return messages().contains(text)
            }
            #expect(try await waitFor("READY=1\nMAINPID=\(pid)\n"), "messages: \(messages())")
            #expect(kill(pid, SIGHUP) == 0)
            #expect(try await waitFor("RELOADING=1"), "messages: \(messages())")
            #expect(Kernel.isMounted(mount.path))
            #expect(kill(pid, SIGTERM) == 0)
            #expect(try await waitFor("STOPPING=1"), "messages: \(messages())")
            let ended = await mount.waitForExit(.seconds(20))
            #expect(ended.exited && ended.status == 0, "\(ended)")
            #expect(mount.errorLogLines().isEmpty, "a clean unmount logs no error: \(mount.errorLogLines())")
            #expect(mount.logTail().contains("unmounted"), "\(mount.logTail())")
        }

        @Test("the systemd unit of docs/operations.md passes systemd-analyze verify")
        func systemdUnit() async throws {
            let page = try String(contentsOfFile: try MountEnv.repo() + "/docs/operations.md", encoding: .utf8)
            let start = try #require(page.range(of: "```ini\n[Unit]"), "no systemd unit in docs/operations.md")
            let end = try #require(page.range(of: "```", range: start.upperBound..<page.endIndex))
            var unit = String(page[page.index(start.lowerBound, offsetBy: 7)..<end.lowerBound])
            #expect(unit.contains("Type=notify") && unit.contains("ExecReload=/bin/kill -HUP $MAINPID"))
            // Where the unit names the installed binary, verify the built one.
            unit = unit.replacingOccurrences(of: "/usr/local/bin/bucketfs", with: try MountEnv.binary())
            let dirs = try Mount()
            defer { dirs.cleanup() }
            let path = dirs.base + "/bucketfs-photos.service"
            try Data(unit.utf8).write(to: URL(fileURLWithPath: path))
            let verify = try Tools.Running("/usr/bin/systemd-analyze", ["verify", path])
            _ = await verify.wait(.seconds(60))
            let result = verify.result()
            // Only complaints about this unit count (the host's own units may have some).
            let ours = result.stderr.split(separator: "\n").filter { $0.contains("bucketfs-photos.service") }
            #expect(result.ok && ours.isEmpty, "\(result.summary)")
        }
    }
}

/// A directory for config files that outlives no test (under the temp dir).
private func mountConfigDirectory() -> String {
    let path = FileManager.default.temporaryDirectory.path + "/bucketfs-config-tests"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}
