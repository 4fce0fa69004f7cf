internal import CFuse
import FSCore
import Synchronization

/// FUSE_INTERRUPT: the kernel asks us to give up a request because a
/// signal reached the process waiting for it (Ctrl-C, kill). A FLUSH or
/// FSYNC that is already in userspace is only ever ended by our answer,
/// so without this a process closing a file during an upload outage could
/// not even be killed. An interrupt cancels the Task serving the request;
/// the core answers a cancelled wait with EINTR.
///
/// The requests that can be interrupted are the ones that wait on the
/// network without changing anything on their own (`respond(...,
/// interruptible: true)`); a rename or unlink half done and then cancelled
/// would leave the bucket between two states.
final class InterruptibleRequests: Sendable {
    private struct Entry {
        let token: UInt64
        let operation: StaticString
        var interrupted = false
        var task: Task<Void, Never>?
    }

    /// By the request's address. An entry is removed before its request is
    /// answered, and libfuse frees a request only after its answer, so an
    /// entry always belongs to a live request, never to an earlier one
    /// whose memory was reused.
    private let entries = OrderedLock<[UInt: Entry]>("interrupted requests", [:])
    private let lastToken = Atomic<UInt64>(0)

    /// Starts watching `request` for an interrupt. Must be called before
    /// the Task serving it starts (it may answer at once, and libfuse must
    /// not be handed an answered request); an interrupt that came earlier
    /// is delivered from inside this call.
    func watch(_ request: SendableReq, _ operation: StaticString) -> Interruption {
        let key = UInt(bitPattern: request.raw)
        let token = lastToken.add(1, ordering: .relaxed).newValue
        entries.withLock { $0[key] = Entry(token: token, operation: operation) }
        // Sound: the request is unanswered (its Task has not started), so
        // libfuse holds it. The callback gets only the request, which
        // libfuse keeps alive for the callback's duration even if it is
        // answered meanwhile (find_interrupted holds a reference), and the
        // context through fuse_req_userdata, which the session's +1 keeps
        // alive for as long as libfuse can call us.
        fuse_req_interrupt_func(request.raw, { req, _ in
            guard let req else { return }
            let context = BridgeContext.from(fuse_req_userdata(req))
            context.interrupts.interrupt(key: UInt(bitPattern: req), context)
        }, nil)
        return Interruption(requests: self, key: key, token: token)
    }

    /// Called by libfuse (on its own thread) when the kernel interrupts.
    private func interrupt(key: UInt, _ context: BridgeContext) {
        let (operation, task) = entries.withLock { entries -> (StaticString?, Task<Void, Never>?) in
            guard entries[key] != nil else { return (nil, nil) }  // already answered
            entries[key]!.interrupted = true
            return (entries[key]!.operation, entries[key]!.task)
        }
        guard let operation else { return }
        context.logger.debug("FUSE request interrupted by the kernel", metadata: ["op": "\(operation)"])
        // Outside the lock: cancelling runs the Task's cancellation
        // handlers right here.
        task?.cancel()
    }

    fileprivate func attach(_ task: Task<Void, Never>, key: UInt, token: UInt64) {
        let interrupted = entries.withLock { entries -> Bool in
            guard entries[key]?.token == token else { return false }  // already answered
            entries[key]!.task = task
            return entries[key]!.interrupted
        }
        if interrupted { task.cancel() }
    }

    fileprivate func finish(key: UInt, token: UInt64) {
        entries.withLock { entries in
            if entries[key]?.token == token { entries[key] = nil }
        }
    }

    /// Requests being watched (tests).
    var watching: Int { entries.withLock { $0.count } }
}

/// One watched request: `attach` the Task serving it, `finish` before
/// answering it.
struct Interruption: Sendable {
    fileprivate let requests: InterruptibleRequests
    fileprivate let key: UInt
    fileprivate let token: UInt64

    func attach(_ task: Task<Void, Never>) { requests.attach(task, key: key, token: token) }
    func finish() { requests.finish(key: key, token: token) }
}
