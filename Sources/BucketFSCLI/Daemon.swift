import ArgumentParser
import Foundation

/// Running in the background without fork(): a Swift process has threads
/// (curl's, the runtime's) that fork would not carry over, so the command
/// starts itself again with `--foreground --ready-fd 3` in a new session,
/// and waits on a pipe until the child reports the mount ready or failed.
enum Daemon {
    /// `fuseDescriptor`: the /dev/fuse descriptor of a `/dev/fd/N`
    /// mountpoint, which the child inherits under the same number.
    static func spawnForegroundChild(logFile: String?, fuseDescriptor: Int32? = nil) throws {
        if let fuseDescriptor, fuseDescriptor <= 3 {
            // 0-2 become /dev/null in the child, 3 its ready pipe.
            throw CLIError.usage("/dev/fd/\(fuseDescriptor) cannot be passed to the background process: use a descriptor above 3, or --foreground")
        }
        let (readEnd, writeEnd) = try readyPipe()
        closeInheritedDescriptors(except: Set([readEnd, writeEnd] + (fuseDescriptor.map { [$0] } ?? [])))
        let executable = OwnExecutable.path
        let arguments = CommandLine.arguments + ["--" + Settings.foreground.name, "--" + Settings.readyFD.name, "3"]

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        if let logFile {
            posix_spawn_file_actions_addopen(&actions, 2, logFile, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        } else {
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        }
        // dup2 clears close-on-exec on the copy at 3; both originals are
        // close-on-exec and above 3, so they vanish at exec and nothing
        // closes 3 after the copy lands there.
        posix_spawn_file_actions_adddup2(&actions, writeEnd, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // POSIX_SPAWN_SETSID (0x80) is a GNU extension Glibc does not export to Swift.
        posix_spawnattr_setflags(&attributes, Int16(0x80))

        var pid: pid_t = 0
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let rc = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        close(writeEnd)
        guard rc == 0 else {
            close(readEnd)
            throw CLIError.bucket("cannot start the mount process: \(String(cString: strerror(rc)))", exitCode: 1)
        }
        let report = ReadyPipe.wait(fd: readEnd)
        close(readEnd)
        switch report {
        case .ready:
            return
        case .failed(let code, let message):
            throw CLIError.bucket(message, exitCode: code)
        case .vanished:
            var status: Int32 = 0
            waitpid(pid, &status, 0)
            throw CLIError.bucket("the mount process \(describe(waitStatus: status)) before the mount was ready", exitCode: 1)
        }
    }

    /// The pipe the child reports on, both ends close-on-exec and numbered
    /// above 3. A read end that was 3 itself (a parent that had not opened
    /// much yet) would be closed in the child right after the write end was
    /// copied onto 3: the child's first descriptor, libdispatch's epoll,
    /// then took 3, and the READY report closed it (libdispatch traps on
    /// EBADF: SIGILL at every such start).
    static func readyPipe() throws -> (readEnd: Int32, writeEnd: Int32) {
        var fds: [Int32] = [0, 0]
        // pipe2 is not exported to Swift: the copies made below are the
        // close-on-exec ones, the originals are closed on return.
        guard pipe(&fds) == 0 else { throw CLIError.usage("pipe: \(String(cString: strerror(errno)))") }
        defer { fds.forEach { close($0) } }
        let readEnd = fcntl(fds[0], F_DUPFD_CLOEXEC, 10)
        let writeEnd = fcntl(fds[1], F_DUPFD_CLOEXEC, 10)
        guard readEnd >= 0, writeEnd >= 0 else {
            let cause = String(cString: strerror(errno))
            if readEnd >= 0 { close(readEnd) }
            if writeEnd >= 0 { close(writeEnd) }
            throw CLIError.usage("pipe: \(cause)")
        }
        return (readEnd, writeEnd)
    }

    /// A waitpid status in words: "exited with status N" or "was killed by
    /// signal N (NAME)".
    static func describe(waitStatus status: Int32) -> String {
        let signal = status & 0x7f
        guard signal != 0 else { return "exited with status \((status >> 8) & 0xff)" }
        return "was killed by signal \(signal) (\(String(cString: strsignal(signal))))"
    }
}

/// The daemon must not hold on to descriptors of whoever ran `bucketfs
/// mount` (a pipe it keeps open would make `bucketfs mount | cat` wait until
/// unmount): everything above stderr is marked close-on-exec before the
/// spawn. The parent exits right after, so changing its flags is harmless.
private func closeInheritedDescriptors(except keep: Set<Int32>) {
    guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
    for fd in entries.compactMap({ Int32($0) }) where fd > 2 && !keep.contains(fd) {
        let flags = fcntl(fd, F_GETFD)
        if flags >= 0 { _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC) }
    }
}

/// One line from the child: "READY" or "FAILED <code> <message>".
enum ReadyPipe {
    enum Report { case ready, failed(Int32, String), vanished }

    static func report(fd: Int32, ready: Bool = false, code: Int32 = 0, message: String = "") {
        let line = ready ? "READY\n" : "FAILED \(code) \(message)\n"
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    static func wait(fd: Int32) -> Report {
        var data = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            data += buffer[0..<n]
            if data.contains(UInt8(ascii: "\n")) { break }
        }
        let line = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line == "READY" { return .ready }
        guard line.hasPrefix("FAILED ") else { return .vanished }
        let rest = line.dropFirst(7)
        let code = Int32(rest.prefix { $0 != " " }) ?? 1
        return .failed(code, String(rest.drop { $0 != " " }.dropFirst()))
    }
}
