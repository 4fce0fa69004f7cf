import Foundation
#if canImport(Glibc)
import Glibc
#endif

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
