import Foundation
import TestServerClient
import Testing
import TestSupport

extension MountTests {
    /// The README's tour block marked `emulator`, run by bash as written,
    /// with the built `bucketfs` first in PATH; only the emulator's URL, the
    /// bucket (a prefix of the test bucket of its own) and the mountpoint
    /// are the test's. What it wrote is checked through the server's API.
    @Suite struct ReadmeTour {
        @Test("the README's emulator block mounts with --endpoint and --anonymous, writes, lists and unmounts")
        func emulatorBlockRuns() async throws {
            let repository = try MountEnv.repo()
            let fences = try MarkdownFence.read(page: "README.md", repository: repository).filter { $0.has("emulator") }
            let fence = try #require(fences.count == 1 ? fences.first : nil, "README.md has \(fences.count) emulator blocks")
            let prefix = MountEnv.uniquePrefix("readme")
            let dirs = try Mount()
            defer { dirs.cleanup() }

            var script = fence.body.joined(separator: "\n")
            let substitutions = [
                ("http://127.0.0.1:9023", try MountEnv.emulator()),
                ("gs://bucketfs-test", "gs://\(MountEnv.bucket)/\(prefix)"),
                ("~/emulator", dirs.path),
            ]
            for (documented, actual) in substitutions {
                #expect(script.contains(documented), "\(fence.place) does not say \(documented)")
                script = script.replacingOccurrences(of: documented, with: actual)
            }
            let builtDirectory = URL(fileURLWithPath: try MountEnv.binary()).deletingLastPathComponent().path
            let path = builtDirectory + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
            let ran = try await Tools.run(
                "/usr/bin/env",
                ["PATH=\(path)", "BUCKETFS_CACHE_DIR=\(dirs.cacheDir)", "BUCKETFS_LOG_FILE=\(dirs.logFile)",
                 "/bin/bash", "-euo", "pipefail", "-c", script])
            #expect(ran.ok, "\(fence.place): \(ran.summary)")
            #expect(ran.lines.contains { $0.hasSuffix(" hello.txt") }, "ls -l: \(ran.out)")
            #expect(try await DirectGCS.emulator().download("\(prefix)/hello.txt") == Data("hello, emulator\n".utf8))
            #expect(await Kernel.waitMounted(dirs.path, false), "the block's unmount left \(dirs.path) mounted")
        }
    }
}
