import Foundation
import TestServerClient
import Testing
import Transport
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

extension MountTests {
    /// The real binary's exit codes and messages outside a mount's own
    /// work: the copy and list commands against servers without the bucket,
    /// command lines refused before any request, --version and help, unmount
    /// of what is not mounted, a config file that is not JSON, status.
    @Suite struct CommandErrors {
        typealias Scratch = Transfers.Scratch

        /// Nothing a user should ever read: an SDK error domain or code,
        /// a Foundation dump, the parser's usage text.
        static func expectPlain(_ result: ToolResult, _ context: String) {
            for leak in ["ErrorDomain", "Code=", "-130", "Usage:", "USAGE:"] {
                #expect(!result.stderr.contains(leak), "\(context): \(leak) in \(result.stderr)")
            }
        }

        @Test("cp, put, get and ls of a missing bucket exit 2 saying so, on fake-gcs-server and the emulator", arguments: ["fake-gcs-server", "emulator"])
        func missingBucket(server: String) async throws {
            let scratch = try Scratch()
            let (small, _) = try scratch.file("small.txt", size: 100, seed: 61)
            let endpoint = server == "emulator" ? try MountEnv.emulator() : try MountEnv.fakeGCSServer()
            let bucket = "nosuch-" + UUID().uuidString.prefix(8).lowercased()
            let commands = [
                ["cp", small, "gs://\(bucket)/x"], ["put", small, "gs://\(bucket)/x"],
                ["get", "gs://\(bucket)/x", scratch.dirs.base + "/got"], ["cp", "gs://\(bucket)/x", scratch.dirs.base + "/"],
                ["ls", "gs://\(bucket)"],
            ]
            for command in commands {
                let result = try await runBucketfs(command + ["--endpoint", endpoint, "--anonymous"], environment: scratch.environment)
                #expect(result.status == 2, "\(command): \(result.summary)")
                #expect(result.stderr.contains("no such bucket: gs://\(bucket) (at \(endpoint)"), "\(command): \(result.stderr)")
                Self.expectPlain(result, "\(command)")
            }
            #expect(!FileManager.default.fileExists(atPath: scratch.dirs.base + "/got"))
        }

        @Test("a dead endpoint: ls and cp exit 4 saying it is unreachable once the retries are spent, not 64 with the usage")
        func deadEndpoint() async throws {
            let scratch = try Scratch()
            let (small, _) = try scratch.file("small.txt", size: 100, seed: 65)
            let endpoint = "http://127.0.0.1:\(try freePort())"
            let common = ["--endpoint", endpoint, "--anonymous"]
            let environment = scratch.environment
            // Side by side: each spends the transport's retries (about a minute).
            async let listed = runBucketfs(["ls", "gs://nb"] + common, timeout: .seconds(150), environment: environment)
            async let copied = runBucketfs(["cp", small, "gs://nb/x"] + common, timeout: .seconds(150), environment: environment)
            for result in try await [listed, copied] {
                #expect(result.status == 4 && !result.timedOut, "\(result.summary)")
                // The last line (the transport logs its retries before it).
                let last = result.stderr.split(separator: "\n").last ?? ""
                #expect(last.hasPrefix("bucketfs: endpoint unreachable: \(endpoint)"), "\(result.stderr)")
                Self.expectPlain(result, result.command)
            }
        }

        @Test("get of a missing object exits 1 naming it; cp gs://B/OBJ DIR/ writes DIR/OBJ and prints it with one slash")
        func objectsAndDirectories() async throws {
            let scratch = try Scratch()
            let gcs = try DirectGCS.emulator()
            let common = ["--endpoint", try MountEnv.emulator(), "--anonymous"]
            let prefix = MountEnv.uniquePrefix("cperr")
            let absent = try await runBucketfs(
                ["get", "gs://\(gcs.bucket)/\(prefix)/absent", scratch.dirs.base + "/absent"] + common, environment: scratch.environment)
            #expect(absent.status == 1 && absent.stderr.contains("no such object: gs://\(gcs.bucket)/\(prefix)/absent"), "\(absent.summary)")
            Self.expectPlain(absent, "get absent")

            let data = MountEnv.pattern(3000, seed: 62)
            try await gcs.put(prefix + "/x.bin", data)
            let directory = scratch.dirs.base + "/into"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            for target in [directory + "/", directory] {
                let copied = try await runBucketfs(["cp", "gs://\(gcs.bucket)/\(prefix)/x.bin", target] + common, environment: scratch.environment)
                #expect(copied.ok, "\(copied.summary)")
                #expect(copied.out == "\(directory)/x.bin\t3000 bytes\n", "\(copied.out)")
                #expect(FileManager.default.contents(atPath: directory + "/x.bin") == data)
                try FileManager.default.removeItem(atPath: directory + "/x.bin")
            }
            // A range into a directory: the object's name there, those bytes.
            let ranged = try await runBucketfs(
                ["get", "gs://\(gcs.bucket)/\(prefix)/x.bin", directory + "/", "--range", "10-19"] + common, environment: scratch.environment)
            #expect(ranged.ok && ranged.out == "10 bytes\n", "\(ranged.summary)")
            #expect(FileManager.default.contents(atPath: directory + "/x.bin") == data[10..<20])
            // cp FILE gs://BUCKET/DIR/ keeps the file's name.
            let (small, smallData) = try scratch.file("named.txt", size: 200, seed: 63)
            let rooted = try await runBucketfs(["cp", small, "gs://\(gcs.bucket)/\(prefix)/"] + common, environment: scratch.environment)
            #expect(rooted.ok && rooted.out.hasPrefix("\(prefix)/named.txt\t200 bytes"), "\(rooted.summary)\n\(rooted.out)")
            try await ObjectChecks.expect(gcs, prefix + "/named.txt", holds: smallData)
        }

        @Test("malformed URLs, put to a bucket's root and --endpoint notaurl exit 64 at once, without a request")
        func refusedAtOnce() async throws {
            let scratch = try Scratch()
            let (small, _) = try scratch.file("small.txt", size: 100, seed: 64)
            let proxy = try await FaultProxy()
            defer { proxy.stop() }
            let viaProxy = ["--endpoint", proxy.endpoint, "--anonymous"]
            let cases: [([String], String)] = [
                (["ls", "gs:/nb"] + viaProxy, "gs:/nb is not a gs:// URL (did you mean gs://nb?)"),
                (["cp", small, "gs:/nb/x"] + viaProxy, "gs:/nb/x is not a gs:// URL (did you mean gs://nb/x?)"),
                (["mount", "gs:/nb", scratch.dirs.path] + viaProxy, "did you mean gs://nb?"),
                (["gs:/nb", scratch.dirs.path] + viaProxy, "did you mean gs://nb?"),
                (["put", small, "gs://nb"] + viaProxy, "gs://nb names the bucket's root, not an object: a file is uploaded to gs://BUCKET/OBJECT"),
                (["get", "gs://nb/", small] + viaProxy, "gs://nb/ names the bucket's root, not an object"),
                (["cp", small, "gs://nb/x", "--endpoint", "notaurl", "--anonymous"], "--endpoint notaurl is not a URL"),
                (["ls", "gs://nb", "--endpoint", "notaurl", "--anonymous"], "--endpoint notaurl is not a URL"),
                (["mount", "gs://nb", scratch.dirs.path, "--endpoint", "notaurl", "--anonymous"], "--endpoint notaurl is not a URL"),
            ]
            for (arguments, message) in cases {
                let result = try await runBucketfs(arguments, environment: scratch.environment)
                #expect(result.status == 64, "\(arguments): \(result.summary)")
                #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
                #expect(result.elapsed < .seconds(2), "\(arguments) took \(result.elapsed)")
                #expect(!result.stderr.contains("ErrorDomain"), "\(result.stderr)")
            }
            #expect(try await proxy.requests().isEmpty, "a refused command line sent requests")
            #expect(!Kernel.isMounted(scratch.dirs.path))
        }

        @Test("--version prints the version; lss exits 64 suggesting ls; help nosuch exits 64; help ls shows ls")
        func commandWords() async throws {
            let version = try await runBucketfs(["--version"])
            #expect(version.ok && version.out == bucketfsVersion + "\n", "\(version.summary) \(version.out)")

            let scratch = try Scratch()
            let slip = try await runBucketfs(["lss", "gs://nb"], environment: scratch.environment)
            #expect(slip.status == 64 && slip.stderr.contains("no command lss (did you mean ls?)"), "\(slip.summary)")
            #expect(!slip.stderr.contains("mountpoint"), "it tried to mount: \(slip.stderr)")

            let unknown = try await runBucketfs(["help", "nosuch"])
            #expect(unknown.status == 64 && unknown.stderr.contains("no command nosuch"), "\(unknown.summary)")
            #expect(unknown.out.isEmpty, "help printed anyway: \(unknown.out)")
            let known = try await runBucketfs(["help", "ls"])
            #expect(known.ok && known.out.contains("USAGE: bucketfs ls"), "\(known.summary)")
        }

        @Test("unmount of a directory that is not mounted exits 1 saying so; of a mount, 0")
        func unmountNotMounted() async throws {
            let dirs = try Mount()
            defer { dirs.cleanup() }
            for path in [dirs.path, dirs.base + "/absent"] {
                let result = try await runBucketfs(["unmount", path])
                #expect(result.status == 1 && result.stderr == "bucketfs: \(path) is not mounted\n", "\(result.summary)")
                #expect(!result.stderr.contains("Invalid argument"))
            }
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: MountEnv.uniquePrefix("unmount"))
            defer { mount.cleanup() }
            let unmounted = try await runBucketfs(["unmount", mount.path])
            #expect(unmounted.ok, "\(unmounted.summary)")
            #expect(await Kernel.waitMounted(mount.path, false, timeout: .seconds(5)))
        }

        @Test("a config file that is not JSON: exit 64 naming the file, line and column, no Foundation dump")
        func configNotJSON() async throws {
            let scratch = try Scratch()
            let config = scratch.dirs.base + "/config.json"
            try Data("{\n  \"stat-ttl\": 30,\n  oops\n}\n".utf8).write(to: URL(fileURLWithPath: config))
            let result = try await runBucketfs(
                ["mount", "gs://\(MountEnv.bucket)", scratch.dirs.path, "--config", config, "--endpoint", try MountEnv.emulator(), "--anonymous"])
            #expect(result.status == 64, "\(result.summary)")
            #expect(result.stderr.contains("config file \(config) is not JSON at line 3, column 3"), "\(result.stderr)")
            #expect(!result.stderr.contains("NSCocoaErrorDomain") && !result.stderr.contains("Code=3840"), "\(result.stderr)")
            #expect(!Kernel.isMounted(scratch.dirs.path))
        }

        @Test("status --json shows only the settings docs/mounting.md lists")
        func statusSettingsDocumented() async throws {
            let mount = try await Mount.start(endpoint: try MountEnv.emulator(), prefix: MountEnv.uniquePrefix("status"))
            defer { mount.cleanup() }
            let status = try await runBucketfs(["status", "--json", mount.path])
            #expect(status.ok, "\(status.summary)")
            let reports = try #require(try JSONSerialization.jsonObject(with: status.stdout) as? [[String: Any]])
            let settings = try #require(reports.first?["settings"] as? [String: String])
            let page = try String(contentsOfFile: try MountEnv.repo() + "/docs/mounting.md", encoding: .utf8)
            #expect(settings["listing-stat-width"] == nil)
            #expect(!settings.isEmpty)
            for name in settings.keys {
                #expect(page.contains("`--\(name)`") || page.contains("`--\(name) "), "status shows \(name), which docs/mounting.md does not list")
            }
        }
    }
}
