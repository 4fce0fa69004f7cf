import Foundation
import Testing
import Transport
import FSCore
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

/// Tests that mount the built `bucketfs` binary on a fresh directory and
/// drive it with real tools. They share the single-request-at-a-time
/// emulator and time things, so they run one after another.
@Suite(.serialized) enum MountTests {}

// MARK: - Environment

/// The servers and paths `scripts/test.sh` provides. A missing variable fails
/// the test (never skips it).
enum MountEnv {
    static let bucket = "bucketfs-test"

    static func variable(_ name: String) throws -> String { try TestEnvironment.variable(name) }
    static func endpoint(_ name: String) throws -> String { try TestEnvironment.endpoint(name) }

    static func emulator() throws -> String { try endpoint("BUCKETFS_TEST_EMULATOR") }
    static func fake() throws -> String { try endpoint("BUCKETFS_TEST_FAKE_GCS") }
    /// fake-gcs-server, the independent Go emulator (scripts/fake_gcs_server.sh).
    static func fakeGCSServer() throws -> String { try endpoint("BUCKETFS_TEST_FAKE_GCS_SERVER") }
    /// firebase_emulator.py: Storage v0 + Auth + rules, and the JSON API.
    static func firebase() throws -> String { try endpoint("BUCKETFS_TEST_FIREBASE") }
    static func repo() throws -> String { try variable("BUCKETFS_TEST_REPO") }

    /// `BUCKETFS_TEST_EMULATOR_LOG`, else the log of test.sh's emulator.
    static func requestLogPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["BUCKETFS_TEST_EMULATOR_LOG"], !path.isEmpty { return path }
        return try repo() + "/.build/servers/emulator/requests.log"
    }

    /// The `bucketfs` executable beside the test bundle.
    static func binary() throws -> String {
        try builtExecutable("bucketfs", buildCommand: "swift build --build-tests")
    }

    static func builtExecutable(_ name: String, buildCommand: String) throws -> String {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestEnvironment.NotConfigured("no \(name) executable at \(path): build it first (\(buildCommand))")
        }
        return path
    }

    static func uniquePrefix(_ label: String) -> String { "mt-\(label)-\(UUID().uuidString.prefix(8).lowercased())" }

    /// Deterministic pseudo-random bytes.
    static func pattern(_ count: Int, seed: UInt64) -> Data {
        var data = Data(count: count)
        fillPattern(&data, seed: seed, offset: 0)
        return data
    }

    /// Fills `data` with the bytes at `offset...` of the stream for `seed`
    /// (offset must be a multiple of 8).
    static func fillPattern(_ data: inout Data, seed: UInt64, offset: Int) {
        precondition(offset % 8 == 0)
        data.withUnsafeMutableBytes { raw in
            let count = raw.count
            let words = count / 8
            guard let base = raw.baseAddress else { return }
            let p = base.bindMemory(to: UInt64.self, capacity: words)
            var index = UInt64(offset / 8)
            for i in 0..<words {
                // The value at (seed, position): any chunk can be made alone.
                p[i] = SplitMix64.value(seed: seed, index: index)
                index &+= 1
            }
            for i in (words * 8)..<count { raw[i] = UInt8(truncatingIfNeeded: (offset + i) &* 31 &+ Int(seed & 0xff)) }
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Running tools

struct ToolResult: Sendable {
    let command: String
    let status: Int32
    let signaled: Bool
    let stdout: Data
    let stderr: String
    let timedOut: Bool
    let elapsed: Duration

    var out: String { String(decoding: stdout, as: UTF8.self) }
    /// Non-empty lines of stdout.
    var lines: [String] { out.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }
    var ok: Bool { status == 0 && !signaled && !timedOut }
    var summary: String {
        "`\(command)` -> \(timedOut ? "TIMED OUT, " : "")\(signaled ? "signal" : "status") \(status) after \(elapsed); stderr: \(stderr.prefix(2000))"
    }
}

/// Runs tools with their output in temporary files (no pipe to fill up, and
/// a daemon that inherits nothing of ours cannot keep a pipe open).
enum Tools {
    static let environment: [String: String] = {
        var env = ProcessInfo.processInfo.environment
        env["LC_ALL"] = "C.UTF-8"
        env["TZ"] = "UTC"
        env["QUOTING_STYLE"] = "literal"
        return env
    }()

    /// A started process with its output files. Spawned with posix_spawn
    /// rather than Foundation.Process: Process leaves a socket open in the
    /// child and watches it to learn of the exit, so a daemon the child
    /// starts (inheriting that socket) would make the child look alive until
    /// the daemon ends. Here the child gets only 0/1/2, an empty signal mask
    /// and default signal actions (as from a shell), and we waitpid it.
    final class Running: @unchecked Sendable {
        let pid: pid_t
        let command: String
        let stdoutPath: String
        let stderrPath: String
        let started = ContinuousClock.now
        private let lock = NSLock()
        private var waitStatus: Int32?

        /// `environment` is added to (and overrides) `Tools.environment`.
        init(_ executable: String, _ arguments: [String], stdoutPath: String? = nil, environment: [String: String] = [:]) throws {
            let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("mt-out-\(UUID().uuidString)").path
            self.stdoutPath = stdoutPath ?? scratch + ".stdout"
            self.stderrPath = scratch + ".stderr"
            command = ([executable] + arguments).joined(separator: " ")

            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 1, self.stdoutPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            posix_spawn_file_actions_addopen(&actions, 2, self.stderrPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
            Tools.closeInheritedDescriptors(&actions)

            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            var empty = sigset_t()
            sigemptyset(&empty)
            posix_spawnattr_setsigmask(&attributes, &empty)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            for signal in [SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGPIPE, SIGCHLD] { sigaddset(&defaults, signal) }
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

            let argv = ([executable] + arguments).map { strdup($0) } + [nil]
            defer { argv.forEach { free($0) } }
            let envp = Tools.environment.merging(environment) { _, given in given }.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { envp.forEach { free($0) } }
            var child: pid_t = 0
            let rc = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
            guard rc == 0 else { throw HarnessError("cannot run \(executable): \(String(cString: strerror(rc)))") }
            pid = child
            Kernel.lock.withLock { _ = Kernel.ownChildren.insert(child) }
        }

        /// Collects the exit status if the process has ended.
        private func poll(block: Bool = false) -> Int32? {
            lock.withLock {
                if let waitStatus { return waitStatus }
                var status: Int32 = 0
                var rc: pid_t
                repeat { rc = waitpid(pid, &status, block ? 0 : WNOHANG) } while rc == -1 && errno == EINTR
                if rc == pid || rc == -1 {
                    // -1 (ECHILD): someone else reaped it; the status is lost.
                    waitStatus = rc == pid ? status : 0xFF00
                    Kernel.lock.withLock { _ = Kernel.ownChildren.remove(pid) }
                    return waitStatus
                }
                return nil
            }
        }

        var isRunning: Bool { poll() == nil }

        /// Waits up to `timeout`; true if it exited.
        func wait(_ timeout: Duration) async -> Bool {
            let deadline = ContinuousClock.now + timeout
            while poll() == nil {
                if ContinuousClock.now >= deadline { return false }
                try? await Task.sleep(for: .milliseconds(10))
            }
            return true
        }

        /// Blocking variant for `defer` blocks.
        func waitBlocking(_ timeout: Duration) -> Bool {
            let deadline = ContinuousClock.now + timeout
            while poll() == nil {
                if ContinuousClock.now >= deadline { return false }
                usleep(10_000)
            }
            return true
        }

        /// SIGKILL if still running, then reap it.
        func kill() {
            if poll() == nil {
                Glibc.kill(pid, SIGKILL)
                _ = poll(block: true)
            }
        }

        /// The raw wait status once exited.
        var status: Int32? { poll() }

        func result(timedOut: Bool = false, keepStdout: Bool = false) -> ToolResult {
            let stdout = (try? Data(contentsOf: URL(fileURLWithPath: stdoutPath))) ?? Data()
            let stderr = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
            if !keepStdout { try? FileManager.default.removeItem(atPath: stdoutPath) }
            try? FileManager.default.removeItem(atPath: stderrPath)
            let status = poll()
            let signaled = status.map { ($0 & 0x7f) != 0 } ?? false
            let code: Int32 = status.map { signaled ? $0 & 0x7f : ($0 >> 8) & 0xff } ?? -1
            return ToolResult(
                command: command, status: code, signaled: signaled,
                stdout: stdout, stderr: stderr, timedOut: timedOut,
                elapsed: ContinuousClock.now - started)
        }
    }

    /// Closes every descriptor above 2 in the child: glibc's
    /// posix_spawn_file_actions_addclosefrom_np (not imported into Swift,
    /// hence the lookup), else each fd open now.
    static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np"),
            unsafeBitCast(symbol, to: CloseFrom.self)(&actions, 3) == 0
        {
            return
        }
        let fds = ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).compactMap { Int32($0) }
        for fd in fds where fd > 2 { posix_spawn_file_actions_addclose(&actions, fd) }
    }

    /// Runs a tool to completion (killed after `timeout`). With `stdoutPath`
    /// its output goes (and stays) there, and `stdout` of the result is empty.
    static func run(
        _ executable: String, _ arguments: [String], timeout: Duration = .seconds(120), stdoutPath: String? = nil
    ) async throws -> ToolResult {
        let running = try Running(executable, arguments, stdoutPath: stdoutPath)
        let exited = await running.wait(timeout)
        if !exited { running.kill() }
        if stdoutPath != nil {
            let r = running.result(timedOut: !exited, keepStdout: true)
            return ToolResult(
                command: r.command, status: r.status, signaled: r.signaled, stdout: Data(), stderr: r.stderr,
                timedOut: r.timedOut, elapsed: r.elapsed)
        }
        return running.result(timedOut: !exited)
    }

    /// Blocking and short, for cleanup.
    static func runBlocking(_ executable: String, _ arguments: [String]) {
        guard let running = try? Running(executable, arguments) else { return }
        if !running.waitBlocking(.seconds(10)) { running.kill() }
        _ = running.result()
    }

    /// md5sum of a file, as hex.
    static func md5(_ path: String) async throws -> String {
        let result = try await run("/usr/bin/md5sum", [path])
        guard result.ok, let hex = result.out.split(separator: " ").first else {
            throw HarnessError("md5sum failed: \(result.summary)")
        }
        return String(hex)
    }
}

// MARK: - Processes and mounts in the kernel's view

enum Kernel {
    /// Mountpoints listed in /proc/self/mountinfo (field 5, octal escapes undone).
    static func mountpoints() -> [String] {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            return fields.count > 4 ? unescape(String(fields[4])) : nil
        }
    }

    static func isMounted(_ path: String) -> Bool { mountpoints().contains(path) }

    /// The mount options and superblock options of the mount on `path`
    /// (/proc/self/mountinfo fields 6 and after the separator's third).
    static func mountOptions(_ path: String) -> Set<String>? {
        guard let text = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false).map(String.init)
            guard fields.count > 5, unescape(fields[4]) == path, let dash = fields.firstIndex(of: "-"), dash + 3 < fields.count else { continue }
            return Set((fields[5] + "," + fields[dash + 3]).split(separator: ",").map(String.init))
        }
        return nil
    }

    /// Polls until the mount state of `path` is `mounted`.
    static func waitMounted(_ path: String, _ mounted: Bool, timeout: Duration = .seconds(10)) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while isMounted(path) != mounted {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return true
    }

    private static func unescape(_ field: String) -> String {
        var bytes: [UInt8] = []
        let utf8 = Array(field.utf8)
        var i = 0
        while i < utf8.count {
            if utf8[i] == UInt8(ascii: "\\"), i + 3 < utf8.count,
                let value = UInt8(String(decoding: utf8[(i + 1)...(i + 3)], as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                i += 4
            } else {
                bytes.append(utf8[i])
                i += 1
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func arguments(of pid: pid_t) -> [String]? {
        guard let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline"), !data.isEmpty else { return nil }
        return data.split(separator: 0, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
    }

    /// (state, ppid, comm) from /proc/PID/stat.
    static func stat(of pid: pid_t) -> (state: Character, ppid: pid_t, comm: String)? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let open = text.firstIndex(of: "("), let close = text.lastIndex(of: ")")
        else { return nil }
        let comm = String(text[text.index(after: open)..<close])
        let rest = text[text.index(after: close)...].split(separator: " ")
        guard rest.count >= 2, let state = rest[0].first, let ppid = pid_t(rest[1]) else { return nil }
        return (state, ppid, comm)
    }

    static func allPIDs() -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { pid_t($0) }
    }

    /// The live bucketfs process serving `mountpoint` (its command line ends
    /// with the mountpoint and --foreground), if any.
    static func bucketfsProcess(serving mountpoint: String) -> pid_t? {
        for pid in allPIDs() {
            guard let args = arguments(of: pid), args.contains(mountpoint), args.contains("--foreground"),
                let program = args.first, program.hasSuffix("bucketfs"),
                let st = stat(of: pid), st.state != "Z"
            else { continue }
            return pid
        }
        return nil
    }

    /// Whether `pid` has exited (gone, or a zombie). For processes that are
    /// not our children only: a multi-threaded process whose main thread
    /// ended first shows "Z" while its other threads still run.
    static func hasExited(_ pid: pid_t) -> Bool {
        guard let st = stat(of: pid) else { return true }
        return st.state == "Z" || st.state == "X"
    }

    enum ReapResult { case exited(Int32), running, notOurChild }

    /// Reaps `pid` if it is our (adopted) child and has exited.
    static func reap(_ pid: pid_t) -> ReapResult {
        var status: Int32 = 0
        var rc: pid_t
        repeat { rc = waitpid(pid, &status, WNOHANG) } while rc == -1 && errno == EINTR
        if rc == pid { return .exited(status) }
        if rc == 0 { return .running }
        return .notOurChild
    }

    /// Makes this process the reaper of orphaned descendants, so the
    /// background mount processes (whose parent, the `bucketfs mount` we ran,
    /// exits once the mount is ready) are re-parented to us and can be
    /// waited for, instead of staying zombies under a PID 1 that reaps
    /// nothing. prctl is variadic, hence the lookup.
    static let becomeSubreaper: Bool = {
        typealias Prctl = @convention(c) (Int32, UInt, UInt, UInt, UInt) -> Int32
        guard let symbol = dlsym(nil, "prctl") else { return false }
        let prctl = unsafeBitCast(symbol, to: Prctl.self)
        return prctl(36 /* PR_SET_CHILD_SUBREAPER */, 1, 0, 0, 0) == 0
    }()

    /// Children the harness spawned and waits for itself.
    nonisolated(unsafe) static var ownChildren: Set<pid_t> = []
    static let lock = NSLock()

    /// Reaps exited bucketfs processes that were re-parented to us (a
    /// background child that failed after its parent exited).
    static func reapOrphans() {
        let me = getpid()
        let owned = lock.withLock { ownChildren }
        for pid in allPIDs() where !owned.contains(pid) {
            guard let st = stat(of: pid), st.ppid == me, st.state == "Z", st.comm == "bucketfs" else { continue }
            _ = reap(pid) as ReapResult
        }
    }
}

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

// MARK: - The servers, directly

/// Plain HTTP access to a GCS-like server, bypassing StorageKit: uploads
/// test data and reads back what the server holds.
struct DirectGCS: Sendable {
    let base: String
    let bucket: String

    static let transport = HTTPTransport(configuration: TransportConfiguration(
        connectTimeout: .seconds(5), stallTimeout: .seconds(60),
        retry: RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(50), maxBackoff: .milliseconds(500), totalTimeout: .seconds(120))))

    static func emulator() throws -> DirectGCS { DirectGCS(base: try MountEnv.emulator(), bucket: MountEnv.bucket) }
    static func fake(bucket: String) throws -> DirectGCS { DirectGCS(base: try MountEnv.fake(), bucket: bucket) }

    /// A new bucket on fake-gcs-server, which (unlike fake_gcs.py) creates
    /// buckets only when asked: `POST /storage/v1/b` with `{"name": …}`.
    static func fakeGCSServer(newBucket bucket: String) async throws -> DirectGCS {
        let gcs = DirectGCS(base: try MountEnv.fakeGCSServer(), bucket: bucket)
        let response = try await transport.send(HTTPRequest(
            method: .post, url: "\(gcs.base)/storage/v1/b", headers: ["Content-Type": "application/json"],
            body: .bytes(try JSONSerialization.data(withJSONObject: ["name": bucket])), isIdempotent: false))
        guard response.status == 200 else {
            throw HarnessError("creating bucket \(bucket) answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
        }
        return gcs
    }

    static func encode(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
    }

    func objectURL(_ name: String) -> String { "\(base)/storage/v1/b/\(bucket)/o/\(Self.encode(name))" }

    /// Multipart upload with optional custom metadata and content type.
    func put(
        _ name: String, _ data: Data, metadata: [String: String] = [:], contentType: String = "application/octet-stream",
        contentEncoding: String? = nil
    ) async throws {
        let boundary = "mtboundary\(UUID().uuidString.prefix(8))"
        var resource: [String: Any] = ["name": name, "contentType": contentType]
        if !metadata.isEmpty { resource["metadata"] = metadata }
        if let contentEncoding { resource["contentEncoding"] = contentEncoding }
        var body = Data("--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".utf8)
        body += try JSONSerialization.data(withJSONObject: resource)
        body += Data("\r\n--\(boundary)\r\nContent-Type: application/octet-stream\r\n\r\n".utf8)
        body += data
        body += Data("\r\n--\(boundary)--\r\n".utf8)
        let response = try await Self.transport.send(HTTPRequest(
            method: .post, url: "\(base)/upload/storage/v1/b/\(bucket)/o?uploadType=multipart",
            headers: ["Content-Type": "multipart/related; boundary=\(boundary)"], body: .bytes(body), isIdempotent: false))
        guard response.status == 200 else {
            throw HarnessError("direct upload of \(name) answered \(response.status): \(String(decoding: response.body.prefix(500), as: UTF8.self))")
        }
    }

    /// Many small uploads, `width` at a time.
    func putAll(_ objects: [(String, Data)], width: Int = 8) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var iterator = objects.makeIterator()
            for _ in 0..<width {
                guard let (name, data) = iterator.next() else { break }
                group.addTask { try await put(name, data) }
            }
            while try await group.next() != nil {
                if let (name, data) = iterator.next() { group.addTask { try await put(name, data) } }
            }
        }
    }

    /// Media upload of a file with curl (streams it from disk).
    func putFile(_ name: String, path: String) async throws {
        let url = "\(base)/upload/storage/v1/b/\(bucket)/o?uploadType=media&name=\(Self.encode(name))"
        let result = try await Tools.run("/usr/bin/curl", [
            "-sS", "--fail-with-body", "-X", "POST", "-H", "Content-Type: application/octet-stream",
            "-H", "Expect:", "-T", path, "-o", "/dev/null", "-w", "%{http_code}", url,
        ], timeout: .seconds(300))
        guard result.ok, result.out == "200" else { throw HarnessError("curl upload of \(name): \(result.summary) \(result.out)") }
    }

    /// The object resource, or nil on 404.
    func resource(_ name: String) async throws -> [String: Any]? {
        let response = try await Self.transport.send(HTTPRequest(method: .get, url: objectURL(name), isIdempotent: true))
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw HarnessError("GET \(name) answered \(response.status)") }
        return try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
    }

    /// The object's bytes (`?alt=media`); throws on 404.
    func download(_ name: String) async throws -> Data {
        let response = try await Self.transport.send(HTTPRequest(
            method: .get, url: objectURL(name) + "?alt=media", isIdempotent: true))
        guard response.status == 200 else {
            throw HarnessError("GET \(name)?alt=media answered \(response.status): \(String(decoding: response.body.prefix(300), as: UTF8.self))")
        }
        return response.body
    }

    /// Names of every object whose name starts with `prefix` (no delimiter,
    /// so placeholders `dir/` and everything below are included), all pages.
    func list(prefix: String) async throws -> [String] {
        var names: [String] = []
        var pageToken: String?
        repeat {
            var url = "\(base)/storage/v1/b/\(bucket)/o?prefix=\(Self.encode(prefix))&maxResults=1000"
            if let pageToken { url += "&pageToken=\(Self.encode(pageToken))" }
            let response = try await Self.transport.send(HTTPRequest(method: .get, url: url, isIdempotent: true))
            guard response.status == 200,
                let page = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
            else { throw HarnessError("list of \(prefix) answered \(response.status)") }
            for item in page["items"] as? [[String: Any]] ?? [] {
                if let name = item["name"] as? String { names.append(name) }
            }
            pageToken = page["nextPageToken"] as? String
        } while pageToken != nil
        return names.sorted()
    }

    /// fake_gcs.py only: registers a fault.
    func fault(_ spec: [String: Any]) async throws {
        let response = try await Self.transport.send(HTTPRequest(
            method: .post, url: base + "/_faults", headers: ["Content-Type": "application/json"],
            body: .bytes(try JSONSerialization.data(withJSONObject: spec)), isIdempotent: false))
        guard response.isSuccess else { throw HarnessError("POST /_faults answered \(response.status)") }
    }

    /// fake_gcs.py only: the requests it has seen, as (method, path, query).
    func requests() async throws -> [LoggedRequest] {
        let response = try await Self.transport.send(HTTPRequest(method: .get, url: base + "/_requests", isIdempotent: true))
        let list = (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
        return list.map {
            LoggedRequest(
                method: $0["method"] as? String ?? "", path: $0["path"] as? String ?? "", query: $0["query"] as? String ?? "",
                authorization: $0["authorization"] as? String, userProject: $0["userProject"] as? String)
        }
    }
}

// MARK: - The emulator's request log

struct LoggedRequest: Sendable, CustomStringConvertible {
    let method: String
    /// As sent (URL-encoded).
    let path: String
    let query: String
    /// The emulator only: the Range header as sent ("bytes=0-1048575"), nil if none.
    var byteRange: String? = nil
    /// fake_gcs.py only: the Authorization and x-goog-user-project headers.
    var authorization: String? = nil
    var userProject: String? = nil

    var decodedPath: String { path.removingPercentEncoding ?? path }

    func parameter(_ key: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == key else { continue }
            return String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        return nil
    }

    /// A list request (GET .../b/B/o) for exactly `prefix`.
    func isList(prefix: String) -> Bool {
        method == "GET" && path.hasSuffix("/o") && parameter("prefix") == prefix
    }

    /// The object a metadata or media request names, if any.
    var objectName: String? {
        guard let range = decodedPath.range(of: "/o/") else { return nil }
        return String(decodedPath[range.upperBound...])
    }

    /// A request on one object (metadata or media) strictly below `prefix`
    /// (not the `prefix` placeholder itself).
    func touchesObject(under prefix: String) -> Bool {
        guard let name = objectName else { return false }
        return name.hasPrefix(prefix) && name.count > prefix.count
    }

    var description: String { "\(method) \(path)?\(query)" }
}

/// The emulator's request log (one `METHOD\tPATH\tQUERY` line per request).
struct RequestLog {
    let path: String
    let start: UInt64

    /// Marks the current end of the log; `entries()` returns what follows.
    static func mark() throws -> RequestLog {
        let path = try MountEnv.requestLogPath()
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? NSNumber
        else {
            throw HarnessError("no emulator request log at \(path) (set BUCKETFS_TEST_EMULATOR_LOG, or run with scripts/test.sh)")
        }
        return RequestLog(path: path, start: size.uint64Value)
    }

    func entries() throws -> [LoggedRequest] {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: start)
        let data = try handle.readToEnd() ?? Data()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count >= 2 else { return nil }
            return LoggedRequest(
                method: String(fields[0]), path: String(fields[1]), query: fields.count > 2 ? String(fields[2]) : "",
                byteRange: fields.count > 3 && !fields[3].isEmpty ? String(fields[3]) : nil)
        }
    }
}

// MARK: - Small helpers

enum Scratch {
    /// A fresh temporary directory (removed by the caller's `defer`).
    static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-mt-data-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
}
