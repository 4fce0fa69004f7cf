internal import CFuse
import FSCore
import Foundation
import Logging

/// A libfuse request handle that may cross threads.
///
/// `@unchecked Sendable` is sound because libfuse allows a request to be
/// answered from any thread, also after the op callback has returned, as
/// long as it is answered exactly once; `Reply` is what guarantees the
/// "exactly once". Only libfuse dereferences the pointer.
struct SendableReq: @unchecked Sendable {
    let raw: fuse_req_t
}

/// The one answer a kernel request is owed.
///
/// Non-copyable, so it cannot be answered twice: each `consuming` method
/// sends one fuse_reply_* and ends the value (`discard self`). If a Reply
/// is dropped unanswered, `deinit` answers EIO (`Refusal.ioError`) and logs
/// an error, so the calling process gets an error instead of hanging.
///
/// It names no errno itself: errors are `Refusal` cases or an `FSError`,
/// both chosen in FSCore's table (ErrnoMapping.swift).
///
/// Every stored property is trivial (a pointer and a StaticString), as
/// `discard self` requires; the logger is fetched through the request's
/// userdata, which stays valid until the request is answered.
struct Reply: ~Copyable, Sendable {
    private let request: SendableReq
    /// The operation's name, for the log.
    let operation: StaticString

    init(_ request: SendableReq, _ operation: StaticString) {
        self.request = request
        self.operation = operation
    }

    init(_ req: fuse_req_t?, _ operation: StaticString) {
        self.init(SendableReq(raw: req!), operation)
    }

    /// The bridge context of this request's session.
    var context: BridgeContext { BridgeContext.from(fuse_req_userdata(request.raw)) }

    consuming func entry(_ reply: EntryReply) {
        var param = makeEntryParam(reply)
        send { fuse_reply_entry($0, &param) }
    }

    consuming func attributes(_ reply: AttributesReply) {
        var st = makeStat(reply.attributes)
        send { fuse_reply_attr($0, &st, reply.timeout) }
    }

    /// Answers open/opendir. False if the kernel did not take the handle
    /// (the request was interrupted): then no release will follow, and the
    /// caller must release the handle itself.
    consuming func open(_ reply: OpenReply) -> Bool {
        var fi = makeFileInfo(reply, allowsDirectIO: context.allowsDirectIO)
        return send { fuse_reply_open($0, &fi) }
    }

    /// Answers create: the new entry and its open handle. False if the
    /// kernel did not take them (then no release will follow).
    consuming func create(_ entry: EntryReply, _ open: OpenReply) -> Bool {
        var param = makeEntryParam(entry)
        var fi = makeFileInfo(open, allowsDirectIO: context.allowsDirectIO)
        return send { fuse_reply_create($0, &param, &fi) }
    }

    /// Answers write: how many bytes were taken.
    consuming func written(_ count: Int) {
        send { fuse_reply_write($0, count) }
    }

    /// Answers readlink.
    consuming func link(_ target: String) {
        send { fuse_reply_readlink($0, target) }
    }

    consuming func data(_ data: Data) {
        send { req in
            data.withUnsafeBytes { bytes in
                fuse_reply_buf(req, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
            }
        }
    }

    consuming func directory(_ page: DirectoryPage) {
        send { req in
            page.bytes.withUnsafeBufferPointer { fuse_reply_buf(req, $0.baseAddress, page.used) }
        }
    }

    consuming func statfs(_ statistics: FilesystemStatistics) {
        var buf = makeStatvfs(statistics)
        send { fuse_reply_statfs($0, &buf) }
    }

    /// The size of an extended attribute or attribute list (size-0 queries).
    consuming func xattrSize(_ size: Int) {
        send { fuse_reply_xattr($0, size) }
    }

    /// An extended attribute's value or a name list, as getxattr(2) and
    /// listxattr(2) define it for a caller's buffer of `size` bytes: 0
    /// asks only for the length, a buffer too small is ERANGE.
    consuming func xattr(_ bytes: Data, size: Int) {
        if size == 0 {
            xattrSize(bytes.count)
        } else if bytes.count > size {
            refuse(.bufferTooSmall)
        } else {
            data(bytes)
        }
    }

    /// Success for the operations that answer with no data (an error
    /// reply of 0 is success in the FUSE protocol).
    consuming func success() {
        send { fuse_reply_err($0, 0) }
    }

    /// Answers a request the bridge refuses by itself, without the core.
    consuming func refuse(_ refusal: Refusal) {
        send { fuse_reply_err($0, refusal.errno) }
    }

    /// Answers the error's errno and logs what the kernel was told.
    consuming func failure(_ error: FSError) {
        context.metrics.recordError(operation, errno: error.code)
        context.logger.log(
            // A missing name is routine (every shell probes for them).
            level: error.code == Refusal.notFound.code ? .trace : .debug,
            "FUSE request failed",
            metadata: ["operation": "\(operation)", "errno": "\(error.code.name)", "error": "\(error)"])
        send { fuse_reply_err($0, error.errno) }
    }

    /// forget and forget_multi are answered with no reply at all.
    consuming func none() {
        let req = request.raw
        discard self
        fuse_reply_none(req)
    }

    /// Packs `entries` with fuse_add_direntry(_plus) into a buffer of the
    /// kernel's requested `size`, stopping at the first entry that does not
    /// fit. Needs the request (libfuse's packing API takes it), so it
    /// borrows the reply; the page is then sent with `directory(_:)`.
    borrowing func packDirectory(_ entries: [DirectoryEntry], size: Int, plus: Bool) -> DirectoryPage {
        var page = DirectoryPage(bytes: [CChar](repeating: 0, count: size), used: 0, packedInodes: [])
        let req = request.raw
        page.bytes.withUnsafeMutableBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            for entry in entries {
                let room = size - page.used
                let needed: Int
                if plus {
                    var param = makeEntryParam(entry.entry)
                    needed = fuse_add_direntry_plus(req, base + page.used, room, entry.name, &param, off_t(entry.nextOffset))
                } else {
                    var st = makeStat(entry.entry.attributes)
                    needed = fuse_add_direntry(req, base + page.used, room, entry.name, &st, off_t(entry.nextOffset))
                }
                if needed > room { break }
                page.used += needed
                if plus && entry.name != "." && entry.name != ".." {
                    page.packedInodes.append(entry.entry.attributes.inode)
                }
            }
        }
        return page
    }

    /// Sends one reply and ends this value without running `deinit`.
    /// Returns whether libfuse delivered it (it fails when the request was
    /// interrupted or the connection is gone; that is logged, not fatal).
    @discardableResult
    private consuming func send(_ body: (fuse_req_t) -> Int32) -> Bool {
        let req = request.raw
        let operation = self.operation
        // Still valid after the reply: the session's +1 on the context
        // outlives every request (see BridgeContext).
        let userdata = fuse_req_userdata(req)
        discard self
        let rc = body(req)
        guard rc == 0 else {
            BridgeContext.from(userdata).logger.debug(
                "FUSE reply not delivered", metadata: ["op": "\(operation)", "rc": "\(rc)"])
            return false
        }
        return true
    }

    deinit {
        let req = request.raw
        BridgeContext.from(fuse_req_userdata(req)).logger.error(
            "FUSE request dropped without a reply; answering \(Refusal.ioError.code.name)", metadata: ["op": "\(operation)"])
        _ = fuse_reply_err(req, Refusal.ioError.errno)
    }
}

/// A readdir(plus) answer: `used` bytes of `bytes`, and the inodes of the
/// packed readdirplus entries other than "." and ".." (the kernel counts a
/// lookup for each of those).
struct DirectoryPage: Sendable {
    var bytes: [CChar]
    var used: Int
    var packedInodes: [UInt64]
}

/// Answers `req` from a new Task: asks the filesystem with `work`, then
/// sends the value with `send`, or the error with `Reply.failure`. The
/// request is counted in flight until the Task has answered, so
/// `FuseSession.close()` can wait for it.
///
/// The Task starts immediately on the libfuse thread (`Task.immediate`)
/// and runs there until it first waits: a request the core answers from
/// what it holds (a cached lookup or attribute, a write into a staged
/// file, a read from the block cache) is answered on the thread that read
/// it, with no hand-over to another thread; one that waits for the network
/// goes on in Swift's pool, and the libfuse thread returns to the kernel
/// at that first wait. Handing every request to another thread cost
/// several scheduler wake-ups per small file, which on a busy machine
/// were most of its time.
///
/// `interruptible`: a FUSE_INTERRUPT for the request cancels the Task
/// (`InterruptibleRequests`), for requests that wait on the network and
/// are safe to abandon halfway.
func respond<Value: Sendable>(
    _ req: fuse_req_t?,
    _ operation: StaticString,
    interruptible: Bool = false,
    _ work: @escaping @Sendable (any FileSystemOperations) async throws(FSError) -> Value,
    then send: @escaping @Sendable (consuming Reply, Value) async -> Void
) {
    let request = SendableReq(raw: req!)
    let context = BridgeContext.from(fuse_req_userdata(req))
    let started = ContinuousClock.now
    // fuse_req_ctx is valid for the request's lifetime; copied out here.
    let caller = fuse_req_ctx(req).map {
        Caller(uid: $0.pointee.uid, gid: $0.pointee.gid, requestID: context.nextRequestID())
    }
    context.requestArrived()
    context.requestStarted()
    let interruption = interruptible ? context.interrupts.watch(request, operation) : nil
    let task = Task.immediate {
        await Caller.$current.withValue(caller) {
            await answer(Reply(request, operation), context.filesystem, work, send, interruption)
        }
        context.metrics.recordRequest(operation, since: started)
        context.requestFinished()
    }
    interruption?.attach(task)
}

private func answer<Value: Sendable>(
    _ reply: consuming Reply,
    _ filesystem: any FileSystemOperations,
    _ work: @Sendable (any FileSystemOperations) async throws(FSError) -> Value,
    _ send: @Sendable (consuming Reply, Value) async -> Void,
    _ interruption: Interruption?
) async {
    let value: Value
    do {
        value = try await work(filesystem)
    } catch {
        interruption?.finish()
        reply.failure(error)
        return
    }
    // Before the answer: libfuse may free the request once it is answered.
    interruption?.finish()
    await send(reply, value)
}
