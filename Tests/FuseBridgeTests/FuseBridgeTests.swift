import FSCore
import Foundation
import FuseBridge
import Logging
import Synchronization
import Testing

/// In-process mount of `TinyFileSystem` through `FuseSession`. The loop and
/// the file I/O each run on a Thread of their own: a blocking syscall on the
/// cooperative pool could starve the Tasks that answer it.
@Suite(.serialized) struct FuseBridgeTests {
    // Checks semantics.md#unsupported-link
    @Test func mountListReadStatAndRefuseWrites() async throws {
        let mountpoint = try makeTemporaryDirectory()
        defer { rmdir(mountpoint) }
        let filesystem = TinyFileSystem()
        let session = try FuseSession(
            filesystem: filesystem, mountpoint: mountpoint,
            options: ["fsname=bucketfs-test", "subtype=bucketfs", "default_permissions"],
            debug: false, logger: Logger(label: "FuseBridgeTests"))
        defer { session.close() }  // never installs signal handlers: they are the runner's
        // Start serving before anything touches the mountpoint: until the
        // loop answers FUSE_INIT, even a stat of it blocks.
        let loop = LoopThread(session)
        #expect(isMounted(mountpoint))
        let observed = try await onThread { try exercise(mountpoint) }

        #expect(observed.rootNames == ["big.bin", "docs", "hello.txt", "many"])
        #expect(observed.docsNames == ["readme.md"])
        #expect(observed.hello == "Hello, bucketfs!\n")
        #expect(observed.big == TinyFileSystem.bigContents)
        #expect(observed.manyNames.count == TinyFileSystem.manyCount)
        #expect(observed.helloSize == 17)
        #expect(observed.helloMode == S_IFREG | 0o644)
        #expect(observed.helloInode == 2)
        #expect(observed.helloModification == TinyFileSystem.modificationTime)
        #expect(observed.docsMode == S_IFDIR | 0o755)
        #expect(observed.statfsBlocks == 1 << 20)
        #expect(observed.statfsNameMax == 1024)
        #expect(observed.mkdirErrno == EROFS)
        #expect(observed.createErrno == EROFS)
        #expect(observed.openForWriteErrno == EROFS)
        #expect(observed.hardLinkErrno == EPERM)

        // readdirplus: every packed entry is counted exactly once, never "."
        // or "..", even though /many took several pages.
        let counters = filesystem.counters.withLock { $0 }
        let counted = counters.countLookupsCalls.flatMap { $0 }
        #expect(counters.countLookupsCalls.count > 2)
        #expect(!counted.contains(1))
        #expect(Set(counted).isSuperset(of: [2, 3, 5, 6, 4]))
        #expect(Set(counted).isSuperset(of: (0..<UInt64(TinyFileSystem.manyCount)).map { 100 + $0 }))
        #expect(counted.count == Set(counted).count, "an entry was counted twice")
        #expect(counters.openFlags.contains { $0 & O_ACCMODE == O_WRONLY })

        session.stop()
        #expect(loop.finished.wait(timeout: .now() + 10) == .success)
        #expect(loop.result.withLock { $0 } == 0)
        session.close()
        session.close()  // idempotent
        #expect(!isMounted(mountpoint))
        #expect(session.fd == -1)
    }

    @Test func closeWhileRunningStopsTheLoopAndUnmounts() async throws {
        let mountpoint = try makeTemporaryDirectory()
        defer { rmdir(mountpoint) }
        let session = try FuseSession(
            filesystem: TinyFileSystem(), mountpoint: mountpoint, options: [], debug: false,
            logger: Logger(label: "FuseBridgeTests"))
        defer { session.close() }
        let loop = LoopThread(session)
        let hello = try await onThread { try String(contentsOfFile: mountpoint + "/docs/readme.md", encoding: .utf8) }
        #expect(hello == "# docs\n")

        session.close()  // no stop() first: close stops the loop and waits for it
        #expect(loop.finished.wait(timeout: .now() + 10) == .success)
        #expect(!isMounted(mountpoint))
        #expect(throws: FuseError.self) { _ = try session.run() }
    }

    @Test func mountOnAMissingDirectoryThrows() {
        #expect(throws: FuseError.self) {
            _ = try FuseSession(
                filesystem: TinyFileSystem(), mountpoint: "/nonexistent/bucketfs-\(getpid())", options: [],
                debug: false, logger: Logger(label: "FuseBridgeTests"))
        }
    }

    @Test func unknownOptionThrows() {
        let mountpoint = try? makeTemporaryDirectory()
        defer { mountpoint.map { _ = rmdir($0) } }
        #expect(throws: FuseError.self) {
            _ = try FuseSession(
                filesystem: TinyFileSystem(), mountpoint: mountpoint ?? "/tmp", options: ["no_such_option"],
                debug: false, logger: Logger(label: "FuseBridgeTests"))
        }
    }
}

/// What the I/O thread saw.
private struct Observed: Sendable {
    var rootNames: [String] = []
    var docsNames: [String] = []
    var manyNames: [String] = []
    var hello = ""
    var big = Data()
    var helloSize = 0
    var helloMode: UInt32 = 0
    var helloInode: UInt64 = 0
    var helloModification = Timestamp(seconds: 0)
    var docsMode: UInt32 = 0
    var statfsBlocks: UInt64 = 0
    var statfsNameMax: UInt64 = 0
    var mkdirErrno: Int32 = 0
    var createErrno: Int32 = 0
    var openForWriteErrno: Int32 = 0
    var hardLinkErrno: Int32 = 0
}

private func exercise(_ mountpoint: String) throws -> Observed {
    let files = FileManager.default
    var observed = Observed()
    observed.rootNames = try files.contentsOfDirectory(atPath: mountpoint).sorted()
    observed.docsNames = try files.contentsOfDirectory(atPath: mountpoint + "/docs").sorted()
    observed.manyNames = try files.contentsOfDirectory(atPath: mountpoint + "/many")
    observed.hello = try String(contentsOfFile: mountpoint + "/hello.txt", encoding: .utf8)
    observed.big = try Data(contentsOf: URL(fileURLWithPath: mountpoint + "/big.bin"))

    var st = stat()
    if stat(mountpoint + "/hello.txt", &st) == 0 {
        observed.helloSize = Int(st.st_size)
        observed.helloMode = st.st_mode
        observed.helloInode = UInt64(st.st_ino)
        observed.helloModification = Timestamp(
            seconds: Int64(st.st_mtim.tv_sec), nanoseconds: Int64(st.st_mtim.tv_nsec))
    }
    if stat(mountpoint + "/docs", &st) == 0 { observed.docsMode = st.st_mode }
    var vfs = statvfs()
    if statvfs(mountpoint, &vfs) == 0 {
        observed.statfsBlocks = UInt64(vfs.f_blocks)
        observed.statfsNameMax = UInt64(vfs.f_namemax)
    }

    observed.mkdirErrno = mkdir(mountpoint + "/newdir", 0o755) == 0 ? 0 : errno
    observed.createErrno = errnoOfOpen(mountpoint + "/new.txt", O_WRONLY | O_CREAT, 0o644)
    observed.openForWriteErrno = errnoOfOpen(mountpoint + "/hello.txt", O_WRONLY, 0)
    observed.hardLinkErrno = link(mountpoint + "/hello.txt", mountpoint + "/docs/hello-again.txt") == 0 ? 0 : errno
    return observed
}

private func errnoOfOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    let fd = open(path, flags, mode)
    guard fd >= 0 else { return errno }
    close(fd)
    return 0
}

/// Runs the session's loop on its own Thread.
final class LoopThread: Sendable {
    let finished = DispatchSemaphore(value: 0)
    let result = Mutex<Int32?>(nil)

    init(_ session: FuseSession) {
        let thread = Thread { [self] in
            let rc = (try? session.run()) ?? -1
            result.withLock { $0 = rc }
            finished.signal()
        }
        thread.name = "fuse-loop"
        thread.start()
    }
}

func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result(catching: body)) }.start()
    }
}

func makeTemporaryDirectory() throws -> String {
    let directory = NSTemporaryDirectory().hasSuffix("/") ? NSTemporaryDirectory() : NSTemporaryDirectory() + "/"
    var template = Array((directory + "fusebridge-XXXXXX").utf8CString)
    guard let path = mkdtemp(&template) else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    return String(cString: path)
}

/// Field 5 of /proc/self/mountinfo is the mountpoint. (No URL(fileURLWithPath:)
/// here: it stats the path, which would block on a mount nobody serves.)
func isMounted(_ mountpoint: String) -> Bool {
    guard let table = try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8) else { return false }
    return table.split(separator: "\n").contains { line in
        let fields = line.split(separator: " ")
        return fields.count > 4 && fields[4] == mountpoint
    }
}
