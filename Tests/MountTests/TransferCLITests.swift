import Foundation
import TestServerClient
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension MountTests {
    /// `bucketfs cp`, `put`, `get`: the progress bar on a real terminal (a
    /// pty), Ctrl-C, and resuming an interrupted upload. Results are checked
    /// on the server directly.
    @Suite struct Transfers {
        /// A scratch directory with a cache of its own (XDG_CACHE_HOME), so
        /// saved interrupted uploads of one test never meet another's.
        final class Scratch {
            let dirs: Mount
            var environment: [String: String] { ["XDG_CACHE_HOME": dirs.base + "/xdg-cache"] }
            var savedUploads: [String] {
                (try? FileManager.default.contentsOfDirectory(atPath: dirs.base + "/xdg-cache/bucketfs/uploads")) ?? []
            }

            init() throws { dirs = try Mount() }
            deinit { dirs.cleanup() }

            func file(_ name: String, size: Int, seed: UInt64) throws -> (String, Data) {
                let data = MountEnv.pattern(size, seed: seed)
                let path = dirs.base + "/" + name
                try data.write(to: URL(fileURLWithPath: path))
                return (path, data)
            }
        }

        /// Runs the CLI on a pseudo-terminal (Python's pty module): what a
        /// person at a terminal sees, in the result's stdout.
        static func onTerminal(_ arguments: [String], environment: [String: String]) async throws -> ToolResult {
            let script = """
                import os, pty, sys
                status = pty.spawn(sys.argv[1:])
                sys.exit(os.waitstatus_to_exitcode(status))
                """
            let running = try Tools.Running(
                try MountEnv.variable("BUCKETFS_TEST_PYTHON"), ["-c", script, try MountEnv.binary()] + arguments,
                environment: environment)
            let exited = await running.wait(.seconds(120))
            if !exited { running.kill() }
            return running.result(timedOut: !exited)
        }

        @Test("cp up and down on a terminal draws a progress bar (bytes, %, rate, ETA); without one, only the result line")
        func progressBar() async throws {
            let scratch = try Scratch()
            let (path, data) = try scratch.file("big.bin", size: 20 << 20, seed: 41)
            let gcs = try DirectGCS.emulator()
            let object = MountEnv.uniquePrefix("cp") + "/big.bin"
            let common = ["--endpoint", try MountEnv.emulator(), "--anonymous"]

            let up = try await Self.onTerminal(["cp", path, "gs://\(gcs.bucket)/\(object)", "--chunk-size", "2"] + common, environment: scratch.environment)
            #expect(up.ok, "\(up.summary)\n\(up.out)")
            #expect(up.out.contains("\r"), "no redraw: \(up.out)")
            #expect(up.out.contains("20.0 MiB / 20.0 MiB") && up.out.contains("100%") && up.out.contains("/s  ETA"), "\(up.out)")
            try await ObjectChecks.expect(gcs, object, holds: data)

            let copy = scratch.dirs.base + "/copy.bin"
            let down = try await Self.onTerminal(["cp", "gs://\(gcs.bucket)/\(object)", copy] + common, environment: scratch.environment)
            #expect(down.ok && down.out.contains("100%") && down.out.contains("\r"), "\(down.summary)\n\(down.out)")
            #expect(FileManager.default.contents(atPath: copy) == data)

            // Not a terminal: the result line only, no bar.
            let quiet = try await runBucketfs(["put", path, "gs://\(gcs.bucket)/\(object)"] + common, environment: scratch.environment)
            #expect(quiet.ok, "\(quiet.summary)")
            #expect(!quiet.stderr.contains("\r") && !quiet.stderr.contains("MiB /"), "\(quiet.stderr)")
            #expect(quiet.out.hasPrefix(object + "\t\(20 << 20) bytes\tgeneration "), "\(quiet.out)")
            // --progress forces it, --no-progress silences a terminal.
            let forced = try await runBucketfs(["get", "gs://\(gcs.bucket)/\(object)", copy, "--progress"] + common, environment: scratch.environment)
            #expect(forced.ok && forced.stderr.contains("100%"), "\(forced.summary)")
            let silenced = try await Self.onTerminal(["get", "gs://\(gcs.bucket)/\(object)", copy, "--no-progress"] + common, environment: scratch.environment)
            #expect(silenced.ok && !silenced.out.contains("%"), "\(silenced.out)")
        }

        /// Starts `bucketfs cp` of `path` through `proxy` (each chunk held
        /// 0.3 s), waits for `chunks` chunk requests, sends Ctrl-C.
        static func interruptedUpload(
            _ path: String, to url: String, proxy: FaultProxy, scratch: Scratch, afterChunks chunks: Int
        ) async throws -> ToolResult {
            try await proxy.fault([["method": "PUT", "min_body_bytes": 1, "stall_seconds": 0.3, "for_seconds": 120]])
            let running = try Tools.Running(
                try MountEnv.binary(), ["cp", path, url, "--endpoint", proxy.endpoint, "--anonymous", "--chunk-size", "1"],
                environment: scratch.environment)
            let deadline = ContinuousClock.now + .seconds(60)
            while try await proxy.requests().filter({ $0.method == "PUT" }).count < chunks, running.isRunning,
                  ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            kill(running.pid, SIGINT)
            let exited = await running.wait(.seconds(30))
            if !exited { running.kill() }
            return running.result(timedOut: !exited)
        }

        @Test("Ctrl-C pauses a resumable upload (exit 130, no object); the same cp goes on from what the server holds")
        func interruptAndResume() async throws {
            let scratch = try Scratch()
            let bucket = "mounttests"
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: bucket)
            defer { proxy.stop() }
            let (path, data) = try scratch.file("resume.bin", size: 12 << 20, seed: 42)
            let object = MountEnv.uniquePrefix("resume") + "/resume.bin"
            let url = "gs://\(bucket)/\(object)"

            let first = try await Self.interruptedUpload(path, to: url, proxy: proxy, scratch: scratch, afterChunks: 3)
            #expect(first.status == 130 && !first.signaled, "\(first.summary)")
            #expect(first.stderr.contains("Run the same command again to resume"), "\(first.stderr)")
            #expect(try await proxy.gcs.resource(object) == nil, "an interrupted upload must not make the object")
            #expect(scratch.savedUploads.count == 1, "\(scratch.savedUploads)")

            try await proxy.clearFaults()
            try await proxy.clearRequests()
            let second = try await runBucketfs(
                ["cp", path, url, "--endpoint", proxy.endpoint, "--anonymous", "--chunk-size", "1"], environment: scratch.environment)
            #expect(second.ok, "\(second.summary)")
            #expect(second.stderr.contains("resuming the interrupted upload"), "\(second.stderr)")
            let requests = try await proxy.requests()
            // No new session (POST), and fewer PUTs than the 12 chunks: the
            // status query plus the chunks the server did not have yet.
            #expect(!requests.contains { $0.method == "POST" }, "\(requests.map { "\($0.method) \($0.path)" })")
            let puts = requests.filter { $0.method == "PUT" }.count
            #expect(puts >= 2 && puts <= 11, "\(puts) PUTs after resuming")
            try await ObjectChecks.expect(proxy.gcs, object, holds: data)
            #expect(scratch.savedUploads.isEmpty, "the saved session must go once the upload is done")
        }

        @Test("a file changed after its upload was interrupted is uploaded from the start; --no-resume starts over too")
        func changedFileStartsOver() async throws {
            let scratch = try Scratch()
            let bucket = "mounttests"
            let proxy = try await FaultProxy(upstream: try MountEnv.fake(), bucket: bucket)
            defer { proxy.stop() }
            let (path, _) = try scratch.file("changing.bin", size: 10 << 20, seed: 43)
            let object = MountEnv.uniquePrefix("changed") + "/changing.bin"
            let url = "gs://\(bucket)/\(object)"
            let first = try await Self.interruptedUpload(path, to: url, proxy: proxy, scratch: scratch, afterChunks: 2)
            #expect(first.status == 130, "\(first.summary)")
            try await proxy.clearFaults()

            let changed = MountEnv.pattern(10 << 20, seed: 44)
            try changed.write(to: URL(fileURLWithPath: path))
            try await proxy.clearRequests()
            let second = try await runBucketfs(
                ["cp", path, url, "--endpoint", proxy.endpoint, "--anonymous", "--chunk-size", "1"], environment: scratch.environment)
            #expect(second.ok && second.stderr.contains("changed since its upload was interrupted"), "\(second.summary)")
            #expect(try await proxy.requests().contains { $0.method == "POST" }, "a new session")
            try await ObjectChecks.expect(proxy.gcs, object, holds: changed)
            #expect(scratch.savedUploads.isEmpty)

            // Interrupted again; --no-resume starts a new session anyway.
            try await proxy.clearRequests()
            let third = try await Self.interruptedUpload(path, to: url, proxy: proxy, scratch: scratch, afterChunks: 2)
            #expect(third.status == 130 && scratch.savedUploads.count == 1, "\(third.summary)")
            try await proxy.clearFaults()
            try await proxy.clearRequests()
            let fresh = try await runBucketfs(
                ["cp", path, url, "--endpoint", proxy.endpoint, "--anonymous", "--chunk-size", "1", "--no-resume"],
                environment: scratch.environment)
            #expect(fresh.ok && !fresh.stderr.contains("resuming"), "\(fresh.summary)")
            #expect(try await proxy.requests().contains { $0.method == "POST" }, "--no-resume starts a new session")
            try await ObjectChecks.expect(proxy.gcs, object, holds: changed)
        }

        @Test("Ctrl-C during a download exits 130 and leaves no partial file")
        func interruptDownload() async throws {
            let scratch = try Scratch()
            let gcs = try DirectGCS.emulator()
            let object = MountEnv.uniquePrefix("getint") + "/obj.bin"
            try await gcs.put(object, MountEnv.pattern(4 << 20, seed: 45))
            let proxy = try await FaultProxy()
            defer { proxy.stop() }
            try await proxy.fault([["method": "GET", "path_contains": "alt=media", "stall_seconds": 20, "for_seconds": 60]])
            let target = scratch.dirs.base + "/partial.bin"
            let running = try Tools.Running(
                try MountEnv.binary(), ["get", "gs://\(gcs.bucket)/\(object)", target, "--endpoint", proxy.endpoint, "--anonymous"],
                environment: scratch.environment)
            let deadline = ContinuousClock.now + .seconds(30)
            while try await !proxy.requests().contains(where: { $0.query.contains("alt=media") }), running.isRunning,
                  ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            kill(running.pid, SIGINT)
            let exited = await running.wait(.seconds(15))
            if !exited { running.kill() }
            let result = running.result(timedOut: !exited)
            #expect(result.status == 130 && !result.signaled, "\(result.summary)")
            #expect(result.stderr.contains("interrupted"), "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: target), "the partial file is left behind")
        }
    }
}
