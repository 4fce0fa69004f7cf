import Foundation
import TestServerClient
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Helpers for the write tests (issue 4): checking what the server holds,
// local trees to copy in and compare, syscalls from the test process, and a
// private emulator that a test may stop and start again.

// MARK: - What the server holds

extension DirectGCS {
    /// The object's custom metadata (empty when it has none).
    func customMetadata(_ name: String) async throws -> [String: String] {
        guard let resource = try await resource(name) else { throw HarnessError("\(name) does not exist") }
        return resource["metadata"] as? [String: String] ?? [:]
    }

    /// The object's generation, as the server reports it (a string in JSON).
    func generation(_ name: String) async throws -> String? {
        try await resource(name).flatMap { $0["generation"] as? String }
    }

    /// Every object below `prefix + "/"`, by name relative to it, with its
    /// bytes. Placeholders (names ending in `/`) are left out unless asked.
    func tree(under prefix: String, placeholders: Bool = false) async throws -> [String: Data] {
        var tree: [String: Data] = [:]
        for name in try await list(prefix: prefix + "/") {
            let relative = String(name.dropFirst(prefix.count + 1))
            if name.hasSuffix("/") {
                if placeholders { tree[relative] = Data() }
                continue
            }
            tree[relative] = try await download(name)
        }
        return tree
    }

    /// Polls until `name` exists (or `timeout` passes); its resource or nil.
    func waitForObject(_ name: String, timeout: Duration) async throws -> [String: Any]? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let resource = try await resource(name) { return resource }
            if ContinuousClock.now >= deadline { return nil }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}

enum ObjectChecks {
    /// Base64 of the MD5 digest of `data`, as GCS's `md5Hash` (via md5sum,
    /// so the tests need no crypto library of their own).
    static func md5Base64(of data: Data) async throws -> String {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("mt-md5-\(UUID().uuidString)").path
        try data.write(to: URL(fileURLWithPath: scratch))
        defer { Scratch.remove(scratch) }
        return try await md5Base64(file: scratch)
    }

    /// Base64 of the MD5 digest of a local file.
    static func md5Base64(file path: String) async throws -> String {
        let hex = try await Tools.md5(path)
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { throw HarnessError("md5sum printed \(hex)") }
            bytes.append(byte)
            index = next
        }
        return Data(bytes).base64EncodedString()
    }

    /// Expects the object to exist with exactly `expected`: its `size`, its
    /// `md5Hash` and its downloaded bytes.
    static func expect(
        _ gcs: DirectGCS, _ name: String, holds expected: Data, _ context: @autoclosure () -> String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        guard let resource = try await gcs.resource(name) else {
            Issue.record("\(name) is not in the bucket. \(context())", sourceLocation: sourceLocation)
            return
        }
        #expect(resource["size"] as? String == "\(expected.count)",
                "\(name): size \(resource["size"] ?? "nil"), expected \(expected.count). \(context())", sourceLocation: sourceLocation)
        let md5 = try await md5Base64(of: expected)
        #expect(resource["md5Hash"] as? String == md5,
                "\(name): md5Hash \(resource["md5Hash"] ?? "nil"), expected \(md5). \(context())", sourceLocation: sourceLocation)
        let bytes = try await gcs.download(name)
        // Compared outside #expect: on a failure swift-testing would diff the
        // two collections, which takes hours for megabytes.
        let same = bytes == expected
        #expect(same, "\(name): the server's \(bytes.count) bytes differ from the \(expected.count) expected. \(context())",
                sourceLocation: sourceLocation)
    }

    /// Expects `name` not to exist.
    static func expectGone(
        _ gcs: DirectGCS, _ name: String, _ context: @autoclosure () -> String = "",
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let resource = try await gcs.resource(name)
        #expect(resource == nil, "\(name) should not exist in the bucket. \(context())", sourceLocation: sourceLocation)
    }

    /// Compares two trees of relative name -> bytes; one line per difference.
    static func differences(_ actual: [String: Data], _ expected: [String: Data]) -> [String] {
        var lines: [String] = []
        for name in Set(actual.keys).union(expected.keys).sorted() {
            switch (actual[name], expected[name]) {
            case (nil, let e?): lines.append("missing \(name) (\(e.count) bytes)")
            case (let a?, nil): lines.append("unexpected \(name) (\(a.count) bytes)")
            case (let a?, let e?) where a != e: lines.append("\(name): \(a.count) bytes differ from the expected \(e.count)")
            default: break
            }
        }
        return lines
    }

    /// An object's `updated` (RFC 3339) in whole seconds since the epoch:
    /// the mtime of an object without `goog-reserved-file-mtime`, and what a
    /// metadata change or a rename stores as that key.
    static func updatedSeconds(_ resource: [String: Any]?) -> Int? {
        guard let text = resource?["updated"] as? String else { return nil }
        let fractional = ISO8601DateFormatter()
        fractional.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return (fractional.date(from: text) ?? ISO8601DateFormatter().date(from: text)).map { Int($0.timeIntervalSince1970.rounded(.down)) }
    }

    /// `goog-reserved-file-mtime` as whole seconds (it is written as decimal
    /// seconds; a fractional part is tolerated and dropped).
    static func mtimeSeconds(_ metadata: [String: String]) -> Int? {
        metadata["goog-reserved-file-mtime"].flatMap { Double($0) }.map { Int($0) }
    }

    /// The permission bits of `goog-reserved-posix-mode` (octal; a file-type
    /// part such as "100600" is tolerated).
    static func modeBits(_ metadata: [String: String]) -> UInt32? {
        metadata["goog-reserved-posix-mode"].flatMap { UInt32($0, radix: 8) }.map { $0 & 0o7777 }
    }
}

// MARK: - Local trees

enum LocalTree {
    /// Writes `files` (relative name -> bytes) below `root`, making the
    /// directories on the way, plus the empty directories in `emptyDirectories`.
    static func write(_ files: [String: Data], emptyDirectories: [String] = [], under root: String) throws {
        for (name, data) in files {
            let url = URL(fileURLWithPath: root + "/" + name)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try data.write(to: url)
        }
        for dir in emptyDirectories {
            try FileManager.default.createDirectory(atPath: root + "/" + dir, withIntermediateDirectories: true)
        }
    }

    /// Every regular file below `root`, by relative name, with its bytes.
    /// Walks with readdir + lstat itself: FileManager's enumerator (fts)
    /// trusts a directory link count of 2 to mean "no subdirectories" and
    /// then does not descend, and the mount reports 2 for every directory.
    static func read(_ root: String) throws -> [String: Data] {
        var tree: [String: Data] = [:]
        var pending = [""]
        while let relative = pending.popLast() {
            let dir = relative.isEmpty ? root : root + "/" + relative
            for entry in try FileManager.default.contentsOfDirectory(atPath: dir) {
                let name = relative.isEmpty ? entry : relative + "/" + entry
                var st = stat()
                guard lstat(root + "/" + name, &st) == 0 else { throw HarnessError("lstat \(root)/\(name): \(Posix.name(errno))") }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: pending.append(name)
                case S_IFREG: tree[name] = try Data(contentsOf: URL(fileURLWithPath: root + "/" + name))
                default: break
                }
            }
        }
        return tree
    }

    /// `count` files spread over nested directories, sizes from 0 to ~20 KiB
    /// (every 7th file empty), content from `seed`.
    static func sample(count: Int, seed: UInt64) -> [String: Data] {
        var files: [String: Data] = [:]
        for i in 0..<count {
            let dir = i % 5 == 0 ? "" : "d\(i % 4)/" + (i % 3 == 0 ? "sub\(i % 2)/" : "")
            let size = i % 7 == 0 ? 0 : (i * 2_971) % 20_000 + 1
            files["\(dir)file\(i).dat"] = MountEnv.pattern(size, seed: seed &+ UInt64(i))
        }
        return files
    }
}

// MARK: - Syscalls from the test process

/// Direct system calls on paths inside a mount, so that a test sees the exact
/// return value and errno of close(), fsync() and friends (tools print only
/// a message, and `cp` may not even report a failed close).
enum Posix {
    /// "EIO (5)" and the like, for failure messages.
    static func name(_ code: Int32) -> String {
        let known: [Int32: String] = [
            EIO: "EIO", ESTALE: "ESTALE", EROFS: "EROFS", ENOENT: "ENOENT", EEXIST: "EEXIST", EPERM: "EPERM",
            EINVAL: "EINVAL", ENOTEMPTY: "ENOTEMPTY", EISDIR: "EISDIR", ENOTDIR: "ENOTDIR", EBADF: "EBADF",
            ENOSYS: "ENOSYS", ENOTCONN: "ENOTCONN", EACCES: "EACCES", EXDEV: "EXDEV",
        ]
        return "\(known[code] ?? "errno") (\(code): \(String(cString: strerror(code))))"
    }

    /// Writes all of `data` at the current offset; nil, or the errno.
    static func writeAll(_ fd: Int32, _ data: Data) -> Int32? {
        data.withUnsafeBytes { raw -> Int32? in
            var done = 0
            while done < raw.count {
                let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return nil
        }
    }

    /// Writes all of `data` at `offset`; nil, or the errno.
    static func pwriteAll(_ fd: Int32, _ data: Data, at offset: Int) -> Int32? {
        data.withUnsafeBytes { raw -> Int32? in
            var done = 0
            while done < raw.count {
                let n = Glibc.pwrite(fd, raw.baseAddress! + done, raw.count - done, off_t(offset + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    return errno
                }
                done += n
            }
            return nil
        }
    }

    /// Reads up to `count` bytes at `offset` (fewer at the end); the bytes or the errno.
    static func pread(_ fd: Int32, count: Int, at offset: Int) -> Result<Data, PosixFailure> {
        var data = Data(count: count)
        let got = data.withUnsafeMutableBytes { raw -> Int in
            var done = 0
            while done < count {
                let n = Glibc.pread(fd, raw.baseAddress! + done, count - done, off_t(offset + done))
                if n < 0 {
                    if errno == EINTR { continue }
                    return -Int(errno)
                }
                if n == 0 { break }
                done += n
            }
            return done
        }
        if got < 0 { return .failure(PosixFailure(code: Int32(-got))) }
        return .success(data.prefix(got))
    }

    struct PosixFailure: Error, Equatable, CustomStringConvertible {
        let code: Int32
        var description: String { Posix.name(code) }
    }

    /// Outcome of a call that returns -1 and sets errno on failure.
    struct Outcome: Sendable, Equatable, CustomStringConvertible {
        let rc: Int32
        let code: Int32
        var description: String { rc == -1 ? "-1, \(Posix.name(code))" : "\(rc)" }
    }

    /// Runs a blocking call (close, fsync) on its own thread and waits up to
    /// `timeout` for it: a hung flush then fails the test instead of hanging
    /// it (the thread stays blocked until cleanup unmounts). nil on timeout.
    static func within(_ timeout: Duration, _ call: @escaping @Sendable () -> Int32) async -> (Outcome, Duration)? {
        final class Box: @unchecked Sendable {
            let lock = NSLock()
            var outcome: (Outcome, ContinuousClock.Instant)?
        }
        let box = Box()
        let started = ContinuousClock.now
        // The time is taken on the calling thread when the call returns, not
        // when this task next looks: other tests' blocking waits can keep a
        // task of the cooperative pool from running for seconds.
        let thread = Thread {
            let rc = call()
            let code = rc == -1 ? errno : 0
            let ended = ContinuousClock.now
            box.lock.withLock { box.outcome = (Outcome(rc: rc, code: code), ended) }
        }
        thread.start()
        let deadline = started + timeout
        while ContinuousClock.now < deadline {
            if let (outcome, ended) = box.lock.withLock({ box.outcome }) { return (outcome, ended - started) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// open(2); the descriptor, or throws naming the path and the errno.
    static func open(_ path: String, _ flags: Int32, mode: mode_t = 0o644) throws -> Int32 {
        let fd = Glibc.open(path, flags, mode)
        guard fd >= 0 else { throw HarnessError("open \(path): \(name(errno))") }
        return fd
    }

    /// renameat2(2) with flags (RENAME_NOREPLACE = 1, RENAME_EXCHANGE = 2).
    /// Looked up at run time: Swift's Glibc module does not declare it
    /// (it needs _GNU_SOURCE).
    static func rename2(_ from: String, _ to: String, flags: UInt32) -> Outcome {
        typealias Renameat2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
        guard let symbol = dlsym(nil, "renameat2") else { return Outcome(rc: -1, code: ENOSYS) }
        let rc = unsafeBitCast(symbol, to: Renameat2.self)(AT_FDCWD, from, AT_FDCWD, to, flags)
        return Outcome(rc: rc, code: rc == -1 ? errno : 0)
    }

    static let renameNoReplace: UInt32 = 1
    static let renameExchange: UInt32 = 2
}

// MARK: - A private emulator

/// An emulator of our own (scripts/emulator.sh --name NAME), for tests that
/// stop the server under a mount. Stopped by `stop()`; `remove()` (in a
/// defer) stops it and deletes its state directory.
struct PrivateEmulator {
    let name: String
    let repo: String

    init(label: String) throws {
        name = "mt-\(label)-\(UUID().uuidString.prefix(8).lowercased())"
        repo = try MountEnv.repo()
    }

    private func script(_ command: String) async throws -> ToolResult {
        try await Tools.run("/bin/bash", [repo + "/scripts/emulator.sh", command, "--name", name], timeout: .seconds(60))
    }

    /// Starts it (empty, with the bucket) and returns its endpoint.
    func start() async throws -> String {
        let started = try await script("start")
        guard started.ok else { throw HarnessError("emulator \(name) did not start: \(started.summary)") }
        let env = try await script("env")
        guard env.ok, let line = env.lines.first(where: { $0.hasPrefix("STORAGE_EMULATOR_HOST=") }) else {
            throw HarnessError("emulator.sh env --name \(name): \(env.summary) \(env.out)")
        }
        return String(line.dropFirst("STORAGE_EMULATOR_HOST=".count))
    }

    /// Stops it by signalling its saved PID from this process, not through
    /// emulator.sh: spawning a child while a test holds a descriptor open on
    /// a mount makes the child's close of its copy send FUSE a FLUSH, which
    /// uploads the file early (before the server is gone).
    func stop() async throws {
        let dir = repo + "/.build/servers/" + name
        guard let text = try? String(contentsOfFile: dir + "/pid", encoding: .utf8),
            let pid = pid_t(text.trimmingCharacters(in: .whitespacesAndNewlines)),
            let args = Kernel.arguments(of: pid), args.contains(where: { $0.hasSuffix("emulator_wrapper.py") })
        else { throw HarnessError("emulator \(name): no running emulator_wrapper.py under \(dir)/pid") }
        Glibc.kill(pid, SIGTERM)
        let deadline = ContinuousClock.now + .seconds(5)
        while Glibc.kill(pid, 0) == 0, Kernel.stat(of: pid).map({ $0.state != "Z" }) ?? false {
            if ContinuousClock.now >= deadline {
                Glibc.kill(pid, SIGKILL)
                break
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        // What emulator.sh stop removes, so that `start` works again.
        try? FileManager.default.removeItem(atPath: dir + "/pid")
        try? FileManager.default.removeItem(atPath: dir + "/port")
    }

    /// Blocking, for `defer`: stops it (by its saved PID) and removes its state.
    func remove() {
        Tools.runBlocking("/bin/bash", [repo + "/scripts/emulator.sh", "stop", "--name", name])
        Scratch.remove(repo + "/.build/servers/" + name)
    }
}
