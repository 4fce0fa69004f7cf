import Foundation
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

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
