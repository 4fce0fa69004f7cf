import FSCore
import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

// MARK: - Mounts

/// One mount of the built binary on a fresh directory, with its own cache
/// directory and log file. Call `cleanup()` in a `defer` right after
/// creating it: it unmounts (lazily), waits for the process to end (killing
/// it if it does not), reaps it and removes the directories.
final class Mount: @unchecked Sendable {
    enum Mode { case background, foreground }

    /// The temporary directory holding mnt/, cache/, bucketfs.log.
    let base: String
    let path: String
    let cacheDir: String
    let logFile: String
    let mode: Mode
    /// No credentials option is added: the mount finds its credentials in
    /// its environment, as a user's would (`Mount.start`).
    var findsCredentials = false
    private(set) var pid: pid_t?
    private(set) var foregroundProcess: Tools.Running?
    private var cleaned = false

    /// Creates the directories (nothing mounted yet). With `cacheDir` the
    /// mount uses that existing directory as its cache instead of a fresh one
    /// under `base`, and `cleanup()` leaves it alone: a later mount can then
    /// find what an earlier one left there (staged files, recovery folder).
    init(mode: Mode = .background, cacheDir existingCacheDir: String? = nil) throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/bucketfs-mt-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw HarnessError("mkdtemp: \(String(cString: strerror(errno)))")
        }
        let dir = String(cString: made)
        if let resolved = realpath(dir, nil) {
            base = String(cString: resolved)
            free(resolved)
        } else {
            base = dir
        }
        path = base + "/mnt"
        cacheDir = existingCacheDir ?? base + "/cache"
        logFile = base + "/bucketfs.log"
        self.mode = mode
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        if existingCacheDir == nil {
            try FileManager.default.createDirectory(atPath: cacheDir, withIntermediateDirectories: false)
        }
        try Self.register(path)
    }

    /// Appends the mountpoint to test.sh's list of mounts to clean up.
    private static func register(_ mountpoint: String) throws {
        let dir = try MountEnv.repo() + "/.build/servers"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let file = dir + "/mounts"
        if !FileManager.default.fileExists(atPath: file) { _ = FileManager.default.createFile(atPath: file, contents: nil) }
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data((mountpoint + "\n").utf8))
    }

    /// Mounts `gs://bucket/prefix` from `endpoint` and waits until it is in
    /// /proc/self/mountinfo. Returns the mount; on failure cleans up and
    /// throws with the CLI's output and log. With `findsCredentials` the
    /// harness adds no `--anonymous` (see `arguments`).
    static func start(
        endpoint: String, bucket: String = MountEnv.bucket, prefix: String, options: [String] = [],
        mode: Mode = .background, cacheDir: String? = nil, environment: [String: String] = [:],
        findsCredentials: Bool = false
    ) async throws -> Mount {
        let mount = try Mount(mode: mode, cacheDir: cacheDir)
        mount.findsCredentials = findsCredentials
        do {
            try await mount.mount(endpoint: endpoint, bucket: bucket, prefix: prefix, options: options, environment: environment)
        } catch {
            mount.cleanup()
            throw error
        }
        return mount
    }

    /// Anonymous unless `options` sign in to Firebase (`--firebase-…`, or
    /// `-o firebase_…` as fstab gives it) or name credentials, or the mount
    /// `findsCredentials` itself.
    func arguments(endpoint: String, bucket: String, prefix: String, options: [String]) -> [String] {
        let named = options.contains { $0.hasPrefix("--firebase-") || $0.hasPrefix("firebase_") || $0 == "--token-file" || $0 == "--key-file" }
        let credentials = named || findsCredentials ? [] : ["--anonymous"]
        return ["mount", "--endpoint", endpoint] + credentials + ["gs://\(bucket)/\(prefix)", path,
         "--cache-dir", cacheDir, "--log-file", logFile, "--log-level", "debug"] + options
    }

    private func mount(endpoint: String, bucket: String, prefix: String, options: [String], environment: [String: String]) async throws {
        _ = Kernel.becomeSubreaper
        let binary = try MountEnv.binary()
        let args = arguments(endpoint: endpoint, bucket: bucket, prefix: prefix, options: options)
        switch mode {
        case .background:
            let front = try Tools.Running(binary, args, environment: environment)
            let exited = await front.wait(.seconds(30))
            if !exited { front.kill() }
            let result = front.result(timedOut: !exited)
            pid = Kernel.bucketfsProcess(serving: path)
            guard result.ok else {
                throw HarnessError("mount failed: \(result.summary)\nlog:\n\(logTail())")
            }
            guard await Kernel.waitMounted(path, true, timeout: .seconds(5)) else {
                throw HarnessError("`bucketfs mount` returned 0 but \(path) is not in /proc/self/mountinfo\nlog:\n\(logTail())")
            }
            guard pid != nil else { throw HarnessError("mounted, but no bucketfs process serves \(path)") }
        case .foreground:
            let process = try Tools.Running(binary, args + ["--foreground"], environment: environment)
            foregroundProcess = process
            pid = process.pid
            let deadline = ContinuousClock.now + .seconds(30)
            while !Kernel.isMounted(path) {
                if !process.isRunning {
                    let result = process.result()
                    throw HarnessError("bucketfs --foreground exited before mounting: \(result.summary)\nlog:\n\(logTail())")
                }
                if ContinuousClock.now >= deadline {
                    throw HarnessError("\(path) not mounted after 30 s\nlog:\n\(logTail())")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }

    /// The last lines of the mount's log, for failure messages.
    func logTail(_ lines: Int = 40) -> String {
        guard let text = try? String(contentsOfFile: logFile, encoding: .utf8) else { return "(no log)" }
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// The log's lines at error level or above (the text format: time,
    /// level, label, message).
    func errorLogLines() -> [String] {
        let text = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").map(String.init).filter { line in
            let level = line.split(separator: " ", maxSplits: 2).dropFirst().first
            return level == "error" || level == "critical"
        }
    }

    /// Waits up to `timeout` for the mount process to exit; returns its wait
    /// status (raw, as from waitpid) if it could be collected, or nil while
    /// it still runs. A background process is reaped here (we are its
    /// subreaper); a foreground one is our own child.
    func waitForExit(_ timeout: Duration) async -> (exited: Bool, status: Int32?) {
        guard let pid else { return (true, nil) }
        let deadline = ContinuousClock.now + timeout
        while true {
            if let fg = foregroundProcess {
                if let status = fg.status { return (true, status) }
            } else {
                switch Kernel.reap(pid) {
                case .exited(let status): return (true, status)
                case .running: break
                case .notOurChild:
                    // Not re-parented to us (no subreaper): watch /proc.
                    if Kernel.hasExited(pid) { return (true, nil) }
                }
            }
            if ContinuousClock.now >= deadline { return (false, nil) }
            try? await Task.sleep(for: .milliseconds(20))
        }
    }

    /// Idempotent, synchronous teardown for `defer`.
    func cleanup() {
        if cleaned { return }
        cleaned = true
        if Kernel.isMounted(path) { Tools.runBlocking("/usr/bin/fusermount3", ["-uz", path]) }
        if let fg = foregroundProcess {
            if !fg.waitBlocking(.seconds(10)) {
                Glibc.kill(fg.pid, SIGTERM)
                if !fg.waitBlocking(.seconds(3)) { fg.kill() }
            }
            if Kernel.isMounted(path) { Tools.runBlocking("/usr/bin/fusermount3", ["-uz", path]) }
            _ = fg.result()
        } else if let pid {
            let deadline = ContinuousClock.now + .seconds(10)
            var reaped = false
            while ContinuousClock.now < deadline {
                switch Kernel.reap(pid) {
                case .exited: reaped = true
                case .running: break
                case .notOurChild: reaped = Kernel.hasExited(pid)
                }
                if reaped { break }
                usleep(20_000)
            }
            if !reaped {
                Glibc.kill(pid, SIGKILL)
                var status: Int32 = 0
                // Ours to wait for if it was re-parented to us; otherwise it is gone soon.
                if waitpid(pid, &status, 0) != pid { usleep(100_000) }
            }
        }
        Kernel.reapOrphans()
        if Kernel.isMounted(path) { Tools.runBlocking("/usr/bin/fusermount3", ["-uz", path]) }
        if !Kernel.isMounted(path) {
            try? FileManager.default.removeItem(atPath: base)
        }
    }

    /// Runs a tool on a path inside the mount ("" is the root).
    func at(_ relative: String) -> String { relative.isEmpty ? path : path + "/" + relative }

    /// How many blocks the next mount on this cache directory finds in its
    /// block cache: the cache opened as a mount opens it (call it only
    /// when no mount uses the directory).
    func cachedBlockCount() throws -> Int {
        try BlockCache(directory: cacheDir, capacity: 1 << 40).blockCount
    }
}

/// Runs the CLI itself (not a mount we keep), e.g. to check exit codes.
/// Any background child it leaves is reaped or killed afterwards.
func runBucketfs(_ arguments: [String], timeout: Duration = .seconds(60), environment: [String: String] = [:]) async throws -> ToolResult {
    _ = Kernel.becomeSubreaper
    let running = try Tools.Running(try MountEnv.binary(), arguments, environment: environment)
    let exited = await running.wait(timeout)
    if !exited { running.kill() }
    let result = running.result(timedOut: !exited)
    try? await Task.sleep(for: .milliseconds(100))
    Kernel.reapOrphans()
    return result
}
