import Foundation
#if canImport(Glibc)
import Glibc
#endif

// The pieces of a `FileReader` stream: the blocks readers wait for, the
// request behind them, and the filler that cuts the response body into
// blocks as it arrives.

/// One block of a stream: readers wait for it until the stream delivers
/// it whole, or fails.
final class StreamBlock: Sendable {
    let range: Range<Int64>
    private typealias Waiter = CheckedContinuation<Result<Data, StoreError>, Never>
    private struct Progress {
        var result: Result<Data, StoreError>?
        var waiting: [UInt64: Waiter] = [:]
        /// Waiters for the block's first `need` bytes only.
        var early: [UInt64: (need: Int, waiter: Waiter)] = [:]
        /// How many of the block's bytes have come, and where they are.
        var arrived = 0
        var filling: ByteSink?
        var lastWaiter: UInt64 = 0
        /// Waiters cancelled before they stored their continuation.
        var gaveUp: Set<UInt64> = []
    }
    private let progress = OrderedLock("read-ahead part", Progress())

    init(range: Range<Int64>) { self.range = range }

    /// The block's bytes once the stream has delivered them, or its
    /// failure; with `prefix`, its first `prefix` bytes (a copy) as soon as
    /// they have come. A waiter whose Task is cancelled (the kernel
    /// interrupted its read) gets `.cancelled` at once; the stream goes on
    /// for the others. A block already delivered is returned without a
    /// hand-over.
    func value(prefix need: Int? = nil) async -> Result<Data, StoreError> {
        let (ready, id, source) = progress.withLock { p -> (Result<Data, StoreError>?, UInt64, ByteSink?) in
            if let result = p.result { return (result, 0, nil) }
            p.lastWaiter += 1
            return (nil, p.lastWaiter, need.map { $0 <= p.arrived } == true ? p.filling : nil)
        }
        if let ready { return ready }
        // Copied outside the lock; short if the block was completed (its
        // sink emptied) meanwhile: then the whole block is a moment away.
        if let source, let need, case let bytes = source.copyPrefix(need), bytes.count >= need { return .success(bytes) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: Waiter) in
                let answer = progress.withLock { p -> Result<Data, StoreError>? in
                    if let result = p.result { return result }
                    if p.gaveUp.remove(id) != nil { return .failure(.cancelled) }
                    // Bytes that came since the check above are handed over
                    // by the next `progressed` or by `finish`.
                    if let need { p.early[id] = (need, continuation) } else { p.waiting[id] = continuation }
                    return nil
                }
                if let answer { continuation.resume(returning: answer) }
            }
        } onCancel: {
            let waiter = progress.withLock { p -> Waiter? in
                guard p.result == nil else { return nil }
                if let waiter = p.waiting.removeValue(forKey: id) ?? p.early.removeValue(forKey: id)?.waiter { return waiter }
                p.gaveUp.insert(id)
                return nil
            }
            waiter?.resume(returning: .failure(.cancelled))
        }
    }

    /// The stream has put the block's first `arrived` bytes into `sink`
    /// (called by the stream, between two of its appends): waiters for a
    /// prefix that has come get a copy of it.
    func progressed(_ arrived: Int, in sink: ByteSink) {
        let due = progress.withLock { p -> [(need: Int, waiter: Waiter)] in
            p.arrived = arrived
            p.filling = sink
            guard !p.early.isEmpty else { return [] }
            let ready = p.early.filter { $0.value.need <= arrived }
            for id in ready.keys { p.early.removeValue(forKey: id) }
            return Array(ready.values)
        }
        for (need, waiter) in due { waiter.resume(returning: .success(sink.copyPrefix(need))) }
    }

    /// Settles the block once; later calls do nothing.
    func finish(_ result: Result<Data, StoreError>) {
        // The sink is let go after the lock: its last release gives its
        // buffer back to the pool, which takes the pool's lock.
        let (waiting, sink) = progress.withLock { p -> ([Waiter], ByteSink?) in
            guard p.result == nil else { return ([], nil) }
            p.result = result
            p.gaveUp = []
            defer {
                p.filling = nil
                p.waiting = [:]
                p.early = [:]
            }
            return (Array(p.waiting.values) + p.early.values.map(\.waiter), p.filling)
        }
        withExtendedLifetime(sink) {
            for waiter in waiting { waiter.resume(returning: result) }
        }
    }
}

/// The request behind a stream, cancelled when no part waits for it.
final class StreamRequest: @unchecked Sendable {
    // @unchecked: `task` is set once, under the reader's state lock, right
    // after creation, and read only under that lock (`cancel` from `drop`).
    var task: Task<Void, Never>?
    func cancel() { task?.cancel() }
}

/// Cuts a stream's body into its blocks as it arrives: each block's bytes
/// are copied once, from the transport's buffer into the block's, and the
/// full block is handed to the cache and to the readers waiting for it.
/// The store calls `append` sequentially, from arbitrary threads, then
/// `finish` or `fail` once.
final class StreamFiller: Sendable {
    /// Where the body has got to. The lock guards only this bookkeeping:
    /// a sink is made, filled and handed on after it, since those take
    /// locks of their own (the buffer pool's, the sink's, a block's, the
    /// block cache's).
    private struct Cursor: Sendable {
        /// The block being filled; `blocks.count` once all are settled.
        var next = 0
        /// How many of its bytes have come, and where they are.
        var filled = 0
        var sink: ByteSink?
        /// When the body's first bytes arrived.
        var firstByte: ContinuousClock.Instant?
    }

    /// What one `append` does with its bytes in one block.
    private struct Step {
        let block: Int
        let count: Int
        let filled: Int
        let sink: ByteSink?
        /// The block is whole after these bytes.
        let completes: Bool
        /// When the body began, if these bytes complete the first block.
        let firstBlockStarted: ContinuousClock.Instant?
    }

    private let blocks: [StreamBlock]
    private let cursor = OrderedLock("stream filler", Cursor())
    private let keep: @Sendable (Data, Int64) -> Void
    private let firstBlock: @Sendable (Int64, ContinuousClock.Instant, ContinuousClock.Instant) -> Void

    /// `firstBlock` hears the first block's size, when the body's first
    /// bytes arrived and when that block was whole (to measure the link).
    init(
        blocks: [StreamBlock], keep: @escaping @Sendable (Data, Int64) -> Void,
        firstBlock: @escaping @Sendable (Int64, ContinuousClock.Instant, ContinuousClock.Instant) -> Void
    ) {
        self.blocks = blocks
        self.keep = keep
        self.firstBlock = firstBlock
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        // Read before the lock (a vDSO call).
        let now = ContinuousClock.now
        var rest = bytes
        while !rest.isEmpty, let step = advance(by: rest.count, at: now) {
            let block = blocks[step.block]
            let sink = step.sink ?? ByteSink(capacity: block.range.count)
            if step.sink == nil, !step.completes {
                cursor.withLock { c in if c.next == step.block { c.sink = sink } }
            }
            sink.append(UnsafeRawBufferPointer(rebasing: rest[..<step.count]))
            rest = UnsafeRawBufferPointer(rebasing: rest[step.count...])
            guard step.completes else {
                block.progressed(step.filled, in: sink)
                continue
            }
            let data = sink.take()
            keep(data, block.range.lowerBound)
            block.finish(.success(data))
            if let started = step.firstBlockStarted { firstBlock(Int64(block.range.count), started, now) }
        }
    }

    /// Books `available` arriving bytes against the block being filled:
    /// how many of them it takes, or nil once every block is settled.
    private func advance(by available: Int, at now: ContinuousClock.Instant) -> Step? {
        cursor.withLock { c -> Step? in
            if c.firstByte == nil { c.firstByte = now }
            guard c.next < blocks.count else { return nil }
            let index = c.next
            let size = blocks[index].range.count
            let count = min(available, size - c.filled)
            let sink = c.sink
            c.filled += count
            let step = Step(
                block: index, count: count, filled: c.filled, sink: sink, completes: c.filled == size,
                firstBlockStarted: index == 0 && c.filled == size ? c.firstByte : nil)
            if step.completes {
                c.next += 1
                c.filled = 0
                c.sink = nil
            }
            return step
        }
    }

    /// The request ended with `received` bytes: blocks still missing fail.
    func finish(received: Int64, of what: String) {
        fail(.other("short read of \(what): \(received) bytes"))
    }

    func fail(_ error: StoreError) {
        // The sink is let go after the lock (see `StreamBlock.finish`).
        let (missing, sink) = cursor.withLock { c -> (ArraySlice<StreamBlock>, ByteSink?) in
            defer {
                c.next = blocks.count
                c.sink = nil
            }
            return (blocks[min(c.next, blocks.count)...], c.sink)
        }
        withExtendedLifetime(sink) {
            for block in missing { block.finish(.failure(error)) }
        }
    }
}

/// Collects streamed bytes into one buffer of the expected size; the
/// store calls it sequentially, but from arbitrary threads, and readers
/// of a block's prefix copy from it meanwhile, hence the lock.
/// Buffers of 1 MiB and more come from `ReadBuffers`, so a streaming
/// reader reuses memory whose pages are already mapped instead of
/// faulting in fresh pages for every part.
final class ByteSink: Sendable {
    private struct Buffer: @unchecked Sendable {
        // @unchecked: the memory `pointer` points to is owned by the sink
        // (until `take` hands it to a Data) and touched only under its lock.
        var pointer: UnsafeMutableRawPointer?
        var capacity: Int
        var count = 0
    }
    private let buffer: OrderedLock<Buffer>

    init(capacity: Int) {
        let allocated = ReadBuffers.shared.allocate(max(capacity, 1))
        buffer = OrderedLock("stream block bytes", Buffer(pointer: allocated?.pointer, capacity: allocated?.size ?? max(capacity, 1)))
    }

    deinit {
        let left = buffer.withLock { b in (b.pointer, b.capacity) }
        if let pointer = left.0 { ReadBuffers.shared.release(pointer, left.1) }
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count > 0 else { return }
        let outgrown = buffer.withLock { b -> (pointer: UnsafeMutableRawPointer, size: Int)? in
            guard let target = b.pointer else { return nil }
            var outgrown: (pointer: UnsafeMutableRawPointer, size: Int)?
            if b.count + bytes.count > b.capacity {
                // More than announced (a server ignoring the range): grow;
                // the old buffer goes back to the pool after the lock.
                let (bigger, grown) = ReadBuffers.shared.allocate(max(b.capacity * 2, b.count + bytes.count))!
                bigger.copyMemory(from: target, byteCount: b.count)
                outgrown = (target, b.capacity)
                b.pointer = bigger
                b.capacity = grown
            }
            // Sound: `b.pointer` has `b.capacity` bytes, checked above.
            (b.pointer! + b.count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
            b.count += bytes.count
            return outgrown
        }
        if let outgrown { ReadBuffers.shared.release(outgrown.pointer, outgrown.size) }
    }

    /// A copy of the first `count` bytes (fewer if fewer have come, or
    /// none once `take` has emptied the sink).
    func copyPrefix(_ count: Int) -> Data {
        buffer.withLock { b in
            guard let target = b.pointer else { return Data() }
            return Data(bytes: target, count: min(count, b.count))
        }
    }

    /// The bytes so far; the sink is empty afterwards.
    func take() -> Data {
        let taken = buffer.withLock { b -> Buffer? in
            guard b.pointer != nil, b.count > 0 else { return nil }
            defer {
                b.pointer = nil
                b.count = 0
            }
            return b
        }
        guard let taken, let pointer = taken.pointer else { return Data() }
        return ReadBuffers.shared.data(owning: pointer, count: taken.count, size: taken.capacity)
    }
}
