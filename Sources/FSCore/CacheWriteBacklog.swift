/// The block cache's background writes not yet done, as a value-type state
/// machine: the owner (`BlockCache`) feeds it each queued buffer, each
/// finished write and each read that asks whether it may go on, and
/// resumes or times out the waits it names. No I/O, no clock: tests drive
/// it directly.
///
/// Why reads wait. A download hands its blocks to the cache as they come
/// (the transport's thread: it must never wait), and a background writer
/// puts them on disk. On a machine whose cores the read itself fills (two
/// cores, loopback: the server, the transport, the FUSE threads and the
/// kernel's copies), the writer falls behind a cold read at full speed;
/// once its queue is full, blocks used to go uncached, and the next read
/// downloaded them again (a 256 MiB read left 20–22 blocks out in two of
/// three bench rounds). So there are two bounds:
/// - above `readsWaitAbove` queued bytes, a read that has its bytes waits
///   before it replies, until the writer brings the queue back under that
///   bound. The reader is held back, so its read-ahead asks for no more,
///   and the downloads still on their way (at most a read-ahead window per
///   reader) land in the room between the bounds;
/// - above `dropAbove`, a buffer is not cached (counted): the bound on
///   memory, reached only by several readers at once or a stalled writer.
/// A writer that finishes nothing for as long as a wait may last (a disk
/// that hangs) must not hang every read: a wait that times out marks the
/// writer `stalled`, ends every wait, and until the writer's next finished
/// write reads no longer wait (what does not fit is dropped, as before).
struct CacheWriteBacklog: Sendable, Equatable {
    /// Queued bytes above which reads wait.
    let readsWaitAbove: Int
    /// Queued bytes above which a buffer is not cached.
    let dropAbove: Int
    private(set) var queuedBytes = 0
    /// Reads waiting, oldest first.
    private(set) var waiting: [UInt64] = []
    /// A wait timed out, and the writer has finished nothing since.
    private(set) var stalled = false

    init(readsWaitAbove: Int, dropAbove: Int) {
        self.readsWaitAbove = min(readsWaitAbove, dropAbove)
        self.dropAbove = dropAbove
    }

    /// A downloaded buffer of `bytes` is offered to the writer: whether it
    /// is queued (counted) or not cached.
    mutating func offered(_ bytes: Int) -> Bool {
        guard queuedBytes + bytes <= dropAbove else { return false }
        queuedBytes += bytes
        return true
    }

    /// Whether a read arriving now would wait.
    var holdsReads: Bool { queuedBytes > readsWaitAbove && !stalled }

    /// A read with its bytes in hand asks to reply: false, it goes on;
    /// true, it waits as `id` until `written` or `timedOut` names it.
    mutating func readArrived(_ id: UInt64) -> Bool {
        guard holdsReads else { return false }
        waiting.append(id)
        return true
    }

    /// The writer finished a buffer of `bytes` (written or failed, it
    /// holds no memory now): the reads to resume.
    mutating func written(_ bytes: Int) -> [UInt64] {
        precondition(bytes >= 0 && bytes <= queuedBytes, "wrote \(bytes) of \(queuedBytes) queued bytes")
        queuedBytes -= bytes
        stalled = false
        guard queuedBytes <= readsWaitAbove else { return [] }
        defer { waiting = [] }
        return waiting
    }

    /// Wait `id` reached its time limit: the reads to resume. If it was
    /// still waiting, the writer counts as stalled and every wait ends
    /// (each would only time out in turn).
    mutating func timedOut(_ id: UInt64) -> [UInt64] {
        guard waiting.contains(id) else { return [] }
        stalled = true
        defer { waiting = [] }
        return waiting
    }

    /// Wait `id`'s read was interrupted: whether it was still waiting.
    mutating func cancelled(_ id: UInt64) -> Bool {
        guard let at = waiting.firstIndex(of: id) else { return false }
        waiting.remove(at: at)
        return true
    }
}
