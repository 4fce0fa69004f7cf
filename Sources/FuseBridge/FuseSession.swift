internal import CFuse
import FSCore
import Foundation
import Logging
import Synchronization

/// One mounted libfuse session serving a `FileSystemOperations`.
///
/// Lifecycle: `init` creates and mounts; optionally `installSignalHandlers()`;
/// `run()` blocks a thread serving requests until `stop()`, a signal, or an
/// external `fusermount3 -u`; then `close()` (explicitly: a global is never
/// deinitialised and `exit()` runs no deinit) unmounts and frees everything.
///
/// `@unchecked Sendable` is sound because all mutable state (the
/// fuse_session pointer, the Unmanaged context, the flags) is only touched
/// with `lock` held. `run()` calls the blocking loop without the lock, but
/// `close()` never destroys the session while the loop runs: it stops the
/// loop and waits for `run()` to return, then waits for the reply Tasks.
/// `stop()` from another thread is what libfuse expects: fuse_session_exit
/// is also what its own signal handlers call.
public final class FuseSession: @unchecked Sendable {
    public let mountpoint: String
    private let logger: Logger

    /// Guards everything below; signalled when the loop returns.
    private let lock = NSCondition()
    /// Set once `close` begins (see `invalidateKernelCaches`).
    private let closing = Atomic<Bool>(false)
    /// nil once closed. Set only after a successful mount, so a failed
    /// init (or a deinit after it) can never destroy a session twice.
    private var session: OpaquePointer?
    /// The +1 on the context libfuse hands back as userdata; released in close().
    private var context: Unmanaged<BridgeContext>?
    private var signalHandlersInstalled = false
    private var loopRunning = false

    /// Creates the session and mounts it.
    ///
    /// - Parameters:
    ///   - options: `-o` mount options, one per string (libfuse splits a
    ///     string on commas), e.g. `["fsname=bucketfs:gs://b",
    ///     "subtype=bucketfs", "allow_other", "default_permissions", "ro"]`.
    ///     `max_read=N` is also applied to the connection in FUSE_INIT, as
    ///     libfuse requires.
    ///   - debug: passes `-d`, libfuse's request trace on stderr.
    /// - Throws: `FuseError` if libfuse rejects the options or the mount.
    ///   - kernelReadAheadKiB: the kernel's read-ahead window for this
    ///     mount (nil keeps its default of 128 KiB; see `BridgeContext`).
    ///   - mountpoint: a directory, or `/dev/fd/N`: a /dev/fuse descriptor
    ///     the caller has mounted; libfuse then serves it and never mounts
    ///     or unmounts (`stop()` cannot end the loop: only the caller's
    ///     unmount or the process's exit does).
    ///   - directory: where the mount is, for the read-ahead setting, when
    ///     `mountpoint` is `/dev/fd/N` (default: `mountpoint`): absolute and
    ///     without symbolic links, as the mount table spells it.
    public init(
        filesystem: any FileSystemOperations, mountpoint: String, options: [String], debug: Bool, logger: Logger,
        kernelReadAheadKiB: Int? = nil, directory: String? = nil
    ) throws {
        self.mountpoint = mountpoint
        self.logger = logger

        // Only `-o` options and `-d`: `-f`, `-s` and the mountpoint belong to
        // fuse_parse_cmdline, and fuse_session_new fails on them.
        var arguments = ["bucketfs"]
        for option in options { arguments += ["-o", option] }
        if debug { arguments.append("-d") }

        let context = Unmanaged.passRetained(
            BridgeContext(
                filesystem: filesystem, logger: logger, maxRead: Self.maxRead(in: options),
                kernelReadAheadKiB: kernelReadAheadKiB,
                // `directory` comes resolved (realpath, before the mount
                // served): resolving it again would stat the mount's root,
                // and for a descriptor mount that waits for the very loop
                // this process has not started yet.
                mountpoint: directory ?? URL(fileURLWithPath: mountpoint).resolvingSymlinksInPath().path))
        var args = fuse_args(argc: 0, argv: nil, allocated: 0)
        defer { fuse_opt_free_args(&args) }
        for argument in arguments where fuse_opt_add_arg(&args, argument) != 0 {
            context.release()
            throw FuseError(.sessionCreationFailed, "out of memory building the arguments for fuse_session_new")
        }

        var ops = makeLowLevelOps()  // fuse_session_new copies it
        guard let session = fuse_session_new(&args, &ops, MemoryLayout<fuse_lowlevel_ops>.size, context.toOpaque())
        else {
            context.release()
            throw FuseError(
                .sessionCreationFailed,
                "fuse_session_new rejected the arguments \(arguments.dropFirst()) (libfuse printed why on stderr)")
        }
        guard fuse_session_mount(session, mountpoint) == 0 else {
            // `self.session` is still nil, so deinit/close cannot destroy
            // this session a second time.
            fuse_session_destroy(session)
            context.release()
            throw FuseError(.mountFailed, Self.mountFailureMessage(mountpoint))
        }
        self.session = session
        self.context = context
        logger.debug("FUSE session mounted", metadata: ["mountpoint": "\(mountpoint)", "options": "\(options)"])
    }

    deinit {
        close()
    }

    /// The /dev/fuse file descriptor, or -1 once closed.
    public var fd: Int32 {
        lock.lock()
        defer { lock.unlock() }
        return session.map { fuse_session_fd($0) } ?? -1
    }

    /// Lets SIGHUP, SIGINT and SIGTERM end `run()` (fuse_set_signal_handlers;
    /// it only replaces handlers that are still SIG_DFL). Never in tests: it
    /// would take the test runner's signals.
    public func installSignalHandlers() throws {
        lock.lock()
        defer { lock.unlock() }
        guard let session, !signalHandlersInstalled else { return }
        guard fuse_set_signal_handlers(session) == 0 else {
            throw FuseError(.signalHandlersFailed, "fuse_set_signal_handlers failed")
        }
        signalHandlersInstalled = true
    }

    /// Serves requests on the calling thread until `stop()`, a signal or an
    /// unmount (fuse_session_loop_mt: worker threads on one /dev/fuse fd, up
    /// to 10 kept idle). Returns the loop's result: 0 after an unmount, the
    /// signal number after a signal, a negative errno on failure.
    public func run() throws -> Int32 {
        lock.lock()
        guard let session, !loopRunning else {
            let closed = self.session == nil
            lock.unlock()
            throw FuseError(.invalidState, closed ? "the session is closed" : "the loop is already running")
        }
        loopRunning = true
        lock.unlock()
        defer {
            lock.lock()
            loopRunning = false
            lock.broadcast()
            lock.unlock()
        }

        guard let config = fuse_loop_cfg_create() else {
            throw FuseError(.loopConfigurationFailed, "fuse_loop_cfg_create failed")
        }
        defer { fuse_loop_cfg_destroy(config) }
        fuse_loop_cfg_set_clone_fd(config, 0)
        fuse_loop_cfg_set_idle_threads(config, 10)
        let result = fuse_session_loop_mt(session, config)
        logger.debug("FUSE loop returned", metadata: ["result": "\(result)"])
        return result
    }

    /// Makes a blocked `run()` return: fuse_session_exit, then unmount (the
    /// kernel then ends the pending /dev/fuse reads). Safe from any thread.
    public func stop() {
        lock.lock()
        defer { lock.unlock() }
        guard let session else { return }
        fuse_session_exit(session)
        fuse_session_unmount(session)
    }

    /// Tells the kernel to forget the names (positive and negative dentries)
    /// and the inodes' attributes it caches, so the next lookup or stat asks
    /// the filesystem (`bucketfs status --drop-caches`, SIGHUP). Cached file
    /// pages are kept (their generation is checked at open) except those of
    /// `pages`: inodes whose object changed behind the mount
    /// (`FileSystem.setKernelCacheInvalidator`). Safe from any thread but a
    /// filesystem operation's (the kernel may wait for the directory's
    /// lock, or for a page a read holds). Returns how many the kernel
    /// accepted (it refuses names and inodes it no longer holds, which is
    /// fine).
    public func invalidateKernelCaches(names: [(parent: UInt64, name: String)], inodes: [UInt64], pages: [UInt64] = []) -> Int {
        // `close` holds the lock while it waits for requests to finish, one
        // of which may be waiting for this: nothing to invalidate then.
        if closing.load(ordering: .acquiring) { return 0 }
        lock.lock()
        defer { lock.unlock() }
        guard let session else { return 0 }
        var accepted = 0
        for (parent, name) in names {
            let rc = name.withCString { fuse_lowlevel_notify_inval_entry(session, fuse_ino_t(parent), $0, name.utf8.count) }
            if rc == 0 { accepted += 1 }
        }
        // Offset -1: attributes only; offset 0, length 0: all pages too.
        let withPages = Set(pages)
        for inode in inodes where fuse_lowlevel_notify_inval_inode(session, fuse_ino_t(inode), withPages.contains(inode) ? 0 : -1, 0) == 0 {
            accepted += 1
        }
        return accepted
    }

    /// Idempotent teardown: stops a running loop and waits for it, unmounts,
    /// removes the signal handlers (only if installed), waits for in-flight
    /// replies, destroys the session and releases the context. Do not call
    /// it from inside a filesystem operation.
    public func close() {
        closing.store(true, ordering: .releasing)
        lock.lock()
        defer { lock.unlock() }
        guard let session, let context else { return }
        self.session = nil
        self.context = nil
        if loopRunning {
            fuse_session_exit(session)
            fuse_session_unmount(session)
            while loopRunning { lock.wait() }
        }
        fuse_session_unmount(session)
        if signalHandlersInstalled {
            fuse_remove_signal_handlers(session)
            signalHandlersInstalled = false
        }
        // A reply Task still running would answer into a destroyed session.
        // If the filesystem never answers, leaking the session is the lesser evil.
        guard context.takeUnretainedValue().waitForRequestsToFinish(timeout: .seconds(30)) else {
            logger.error(
                "FUSE requests still unanswered after 30 s; leaking the session",
                metadata: ["mountpoint": "\(mountpoint)"])
            return
        }
        fuse_session_destroy(session)
        context.release()
        logger.debug("FUSE session closed", metadata: ["mountpoint": "\(mountpoint)"])
    }

    private static func maxRead(in options: [String]) -> UInt32? {
        options.lazy.flatMap { $0.split(separator: ",") }
            .last { $0.hasPrefix("max_read=") }
            .flatMap { UInt32($0.dropFirst("max_read=".count)) }
    }

    private static func mountFailureMessage(_ mountpoint: String) -> String {
        var st = stat()
        if stat(mountpoint, &st) != 0 {
            let code = errno
            let hint = code == ENOTCONN ? " (a dead FUSE mount: run fusermount3 -u \(mountpoint))" : ""
            return "fuse_session_mount failed: \(String(cString: strerror(code)))\(hint)"
        }
        return "fuse_session_mount failed (libfuse printed why on stderr; for non-root users, allow_other "
            + "needs user_allow_other in /etc/fuse.conf)"
    }
}
