import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// `bucketfs fuse-fd-mount` (root: open /dev/fuse, mount(2), drop to a
    /// uid/gid, exec) and `bucketfs mount … /dev/fd/N` (serve a mount the
    /// caller made), as a CSI driver uses them, against fake-gcs-server
    /// with a bucket of its own per test.
    @Suite struct FuseDescriptor {
        static let uid: UInt32 = 4242
        static let gid: UInt32 = 4343

        /// A fresh fake-gcs-server bucket served through the helper, with a
        /// cache directory and log the unprivileged user can write. In the
        /// foreground the helper's pid, kept by the exec, is the serving
        /// process. `cleanup()` (in a defer) kills it if it still runs and
        /// unmounts.
        final class Served: Sendable {
            let gcs: DirectGCS
            let dirs: Mount
            let scratch: String
            let process: Tools.Running

            init(_ label: String, seeding objects: [(String, Data)] = [], foreground: Bool = true) async throws {
                gcs = try await DirectGCS.fakeGCSServer(newBucket: MountEnv.uniquePrefix(label))
                for (name, data) in objects { try await gcs.put(name, data) }
                dirs = try Mount(mode: .foreground)
                scratch = try Scratch.directory()
                do {
                    guard chown(scratch, FuseDescriptor.uid, FuseDescriptor.gid) == 0 else {
                        throw HarnessError("chown \(scratch): \(String(cString: strerror(errno)))")
                    }
                    process = try Tools.Running(
                        try MountEnv.binary(),
                        [
                            "fuse-fd-mount", "--uid", "\(FuseDescriptor.uid)", "--gid", "\(FuseDescriptor.gid)", "gs://\(gcs.bucket)",
                            dirs.path, "--", "--endpoint", gcs.base, "--anonymous", "--cache-dir", scratch + "/cache",
                            "--log-file", scratch + "/bucketfs.log", "--log-level", "debug",
                        ] + (foreground ? ["--foreground"] : []),
                        // Not root's runtime directory or home: the user could not write there.
                        environment: ["XDG_RUNTIME_DIR": "", "HOME": scratch])
                } catch {
                    dirs.cleanup()
                    Scratch.remove(scratch)
                    throw error
                }
            }

            var log: String { (try? String(contentsOfFile: scratch + "/bucketfs.log", encoding: .utf8)) ?? "(no log)" }

            func cleanup() {
                if process.isRunning { process.kill() }
                _ = process.waitBlocking(.seconds(10))
                dirs.cleanup()
                Scratch.remove(scratch)
            }
        }

        static func ids(_ pid: pid_t, _ field: String) -> [String] {
            let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix(field + ":") } ?? ""
            return line.split(whereSeparator: { $0 == "\t" || $0 == " " }).dropFirst().map(String.init)
        }

        @Test("fuse-fd-mount mounts with the CSI options and serves as the given uid/gid; writes reach the bucket", .timeLimit(.minutes(2)))
        func helperServesUnprivileged() async throws {
            let served = try await Served("fdmount", seeding: [("seeded.txt", Data("from the bucket\n".utf8))])
            let (gcs, dirs, serving) = (served.gcs, served.dirs, served.process)
            defer { served.cleanup() }

            #expect(await Kernel.waitMounted(dirs.path, true), "not mounted: \(serving.result().summary)")
            let options = try #require(Kernel.mountOptions(dirs.path))
            for wanted in ["nosuid", "nodev", "allow_other", "default_permissions", "user_id=\(Self.uid)", "group_id=\(Self.gid)"] {
                #expect(options.contains(wanted), "\(wanted) in \(options.sorted())")
            }
            let entry = try #require(try String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)
                .split(separator: "\n").first { $0.split(separator: " ")[4] == dirs.path })
            #expect(entry.contains(" - fuse.bucketfs gs://\(gcs.bucket)/ "), "type and source: \(entry)")

            let write = try await Tools.run("/bin/sh", ["-c", "printf 'written through the mount\\n' > \(dirs.at("new.txt"))"])
            #expect(write.ok, "\(write.summary)\nlog:\n\(served.log)")
            try await ObjectChecks.expect(gcs, "new.txt", holds: Data("written through the mount\n".utf8), "after the shell closed it")
            let read = try await Tools.run("/bin/cat", [dirs.at("seeded.txt")])
            #expect(read.ok && read.out == "from the bucket\n", "\(read.summary)")

            // The serving process is the helper's pid after the exec.
            #expect(serving.isRunning)
            #expect(Self.ids(serving.pid, "Uid") == Array(repeating: "\(Self.uid)", count: 4), "\(Self.ids(serving.pid, "Uid"))")
            #expect(Self.ids(serving.pid, "Gid") == Array(repeating: "\(Self.gid)", count: 4), "\(Self.ids(serving.pid, "Gid"))")
            #expect(Self.ids(serving.pid, "Groups") == ["\(Self.gid)"], "supplementary groups: \(Self.ids(serving.pid, "Groups"))")
            let arguments = (Kernel.arguments(of: serving.pid) ?? []).filter { !$0.isEmpty }
            #expect(arguments.dropLast().last == "gs://\(gcs.bucket)/" && arguments.last?.hasPrefix("/dev/fd/") == true,
                    "serves a descriptor: \(arguments)")
            #expect(arguments.contains(dirs.path), "told where it is mounted (for status): \(arguments)")

            // `status` as the mount's user finds its control socket by the directory.
            let status = try await Tools.run(
                "/usr/bin/setpriv",
                ["--reuid", "\(Self.uid)", "--regid", "\(Self.gid)", "--clear-groups", "/usr/bin/env", "XDG_RUNTIME_DIR=",
                 try MountEnv.binary(), "status", "--json", dirs.path])
            let reports = try? JSONSerialization.jsonObject(with: status.stdout) as? [[String: Any]]
            #expect(status.ok && reports?.count == 1, "\(status.summary) \(status.out)")
            #expect(reports?.first?["bucket"] as? String == gcs.bucket && reports?.first?["mountpoint"] as? String == dirs.path
                    && reports?.first?["pid"] as? Int == Int(serving.pid), "\(status.out)")

            // SIGTERM stops serving at once; the mount stays, the caller's to undo.
            let sockets = "/tmp/bucketfs-\(Self.uid)"
            let socketsBefore = Set((try? FileManager.default.contentsOfDirectory(atPath: sockets)) ?? [])
            kill(serving.pid, SIGTERM)
            #expect(await serving.wait(.seconds(10)), "still serving 10 s after SIGTERM")
            let ended = serving.result()
            #expect(ended.status == 0 && !ended.signaled, "\(ended.summary)\nlog:\n\(served.log)")
            #expect(Kernel.isMounted(dirs.path), "bucketfs must not unmount a descriptor mount")
            let socketsAfter = Set((try? FileManager.default.contentsOfDirectory(atPath: sockets)) ?? [])
            #expect(socketsBefore.subtracting(socketsAfter).count == 1, "its control socket is removed: \(socketsBefore) -> \(socketsAfter)")
        }

        @Test("the serving process killed leaves ENOTCONN; fusermount3 -uz (the caller's job) clears it", .timeLimit(.minutes(2)))
        func deadServerIsTheCallersToUnmount() async throws {
            let served = try await Served("fddead")
            let (dirs, serving) = (served.dirs, served.process)
            defer { served.cleanup() }
            #expect(await Kernel.waitMounted(dirs.path, true), "not mounted: \(serving.result().summary)")
            let list = try await Tools.run("/bin/ls", [dirs.path])
            #expect(list.ok, "\(list.summary)\nlog:\n\(served.log)")

            kill(serving.pid, SIGKILL)
            #expect(await serving.wait(.seconds(10)))
            var info = stat()
            #expect(stat(dirs.path, &info) == -1 && errno == ENOTCONN, "stat of the dead mount: errno \(errno)")
            let listDead = try await Tools.run("/bin/ls", [dirs.path])
            #expect(!listDead.ok && listDead.stderr.contains("Transport endpoint is not connected"), "\(listDead.summary)")

            let unmount = try await Tools.run("/usr/bin/fusermount3", ["-uz", dirs.path])
            #expect(unmount.ok, "\(unmount.summary)")
            #expect(await Kernel.waitMounted(dirs.path, false))
            #expect(stat(dirs.path, &info) == 0 && info.st_mode & S_IFMT == S_IFDIR, "the directory is usable again")
        }

        @Test("the caller's unmount ends the serving process with status 0", .timeLimit(.minutes(2)))
        func callersUnmountEndsServing() async throws {
            let served = try await Served("fdumount")
            let (gcs, dirs, serving) = (served.gcs, served.dirs, served.process)
            defer { served.cleanup() }
            #expect(await Kernel.waitMounted(dirs.path, true), "not mounted: \(serving.result().summary)")
            let write = try await Tools.run("/bin/sh", ["-c", "printf kept > \(dirs.at("kept.txt"))"])
            #expect(write.ok, "\(write.summary)\nlog:\n\(served.log)")

            let unmount = try await Tools.run("/usr/bin/fusermount3", ["-u", dirs.path])
            #expect(unmount.ok, "\(unmount.summary)")
            #expect(await serving.wait(.seconds(10)), "still serving 10 s after the unmount")
            let ended = serving.result()
            #expect(ended.status == 0 && !ended.signaled, "\(ended.summary)\nlog:\n\(served.log)")
            try await ObjectChecks.expect(gcs, "kept.txt", holds: Data("kept".utf8))
        }

        @Test("without --foreground the descriptor goes to the background process, which serves once the helper returns", .timeLimit(.minutes(2)))
        func backgroundServing() async throws {
            let served = try await Served("fdbg", foreground: false)
            let (gcs, dirs, helper) = (served.gcs, served.dirs, served.process)
            var daemon: pid_t?
            defer {
                if let daemon, !Kernel.hasExited(daemon) { kill(daemon, SIGKILL) }
                served.cleanup()
            }
            #expect(await helper.wait(.seconds(30)), "the helper did not return")
            let returned = helper.result()
            #expect(returned.status == 0 && !returned.signaled, "\(returned.summary)\nlog:\n\(served.log)")
            daemon = Kernel.bucketfsProcess(serving: dirs.path)
            let pid = try #require(daemon, "no background process serving \(dirs.path)")
            #expect(Self.ids(pid, "Uid") == Array(repeating: "\(Self.uid)", count: 4), "\(Self.ids(pid, "Uid"))")

            let write = try await Tools.run("/bin/sh", ["-c", "printf background > \(dirs.at("bg.txt"))"])
            #expect(write.ok, "\(write.summary)\nlog:\n\(served.log)")
            try await ObjectChecks.expect(gcs, "bg.txt", holds: Data("background".utf8))

            let unmount = try await Tools.run("/usr/bin/fusermount3", ["-u", dirs.path])
            #expect(unmount.ok, "\(unmount.summary)")
            let deadline = ContinuousClock.now + .seconds(10)
            while !Kernel.hasExited(pid), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            #expect(Kernel.hasExited(pid), "the background process still serves after the unmount")
        }

        @Test(
            "mount on /dev/fd/N that is not open, or not /dev/fuse, exits 5 naming it, before any request",
            arguments: [("/dev/fd/99", "is not an open file descriptor"), ("/dev/fd/0", "not on /dev/fuse"), ("/dev/fd/1", "not on /dev/fuse")])
        func descriptorRefused(mountpoint: String, complaint: String) async throws {
            // The harness gives the CLI /dev/null as 0, a regular file as 1, nothing at 99.
            let bucket = MountEnv.uniquePrefix("fdbad")
            let result = try await runBucketfs(
                ["mount", "--foreground", "--endpoint", try MountEnv.fake(), "--anonymous", "gs://\(bucket)", mountpoint])
            #expect(result.status == 5 && !result.signaled, "\(result.summary)")
            #expect(result.stderr.contains("mountpoint \(mountpoint) ") && result.stderr.contains(complaint), "\(result.summary)")
            let seen = try await MountTests.Lifecycle.requests(for: bucket)
            #expect(seen.isEmpty, "no request before the mountpoint is checked: \(seen)")
        }
    }
}
