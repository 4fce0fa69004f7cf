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
        let waiting = progress.withLock { p -> [Waiter] in
            guard p.result == nil else { return [] }
            p.result = result
            p.gaveUp = []
            p.filling = nil
            defer {
                p.waiting = [:]
                p.early = [:]
            }
            return Array(p.waiting.values) + p.early.values.map(\.waiter)
        }
        for waiter in waiting { waiter.resume(returning: result) }
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
/// The store calls `append` sequentially, from arbitrary threads.
final class StreamFiller: @unchecked Sendable {
    // @unchecked: `next` and `sink` are only touched with `lock` held.
    private let lock = NSLock()
    private let blocks: [StreamBlock]
    private let keep: @Sendable (Data, Int64) -> Void
    private var next = 0
    private var sink: ByteSink?
    private var filled = 0
    private let firstBlock: @Sendable (Int64, ContinuousClock.Instant, ContinuousClock.Instant) -> Void
    /// When the body's first bytes arrived.
    private var firstByte: ContinuousClock.Instant?

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
        // Read before the lock (a vDSO call); `append` runs sequentially.
        let now = ContinuousClock.now
        var measured: (Int64, ContinuousClock.Instant)?
        lock.lock()
        defer {
            lock.unlock()
            if let (size, start) = measured { firstBlock(size, start, now) }
        }
        if firstByte == nil { firstByte = now }
        var rest = bytes
        while !rest.isEmpty, next < blocks.count {
            let block = blocks[next]
            let sink = self.sink ?? ByteSink(capacity: block.range.count)
            self.sink = sink
            let take = min(rest.count, block.range.count - filled)
            sink.append(UnsafeRawBufferPointer(rebasing: rest[..<take]))
            filled += take
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            if filled == block.range.count {
                let data = sink.take()
                self.sink = nil
                filled = 0
                next += 1
                if next == 1, let firstByte { measured = (Int64(block.range.count), firstByte) }
                keep(data, block.range.lowerBound)
                block.finish(.success(data))
            } else {
                block.progressed(filled, in: sink)
            }
        }
    }

    /// The request ended with `received` bytes: blocks still missing fail.
    func finish(received: Int64, of what: String) {
        fail(.other("short read of \(what): \(received) bytes"))
    }

    func fail(_ error: StoreError) {
        lock.lock()
        let missing = blocks[min(next, blocks.count)...]
        next = blocks.count
        sink = nil
        lock.unlock()
        for block in missing { block.finish(.failure(error)) }
    }
}

/// Collects streamed bytes into one buffer of the expected size; the
/// store calls it sequentially, but from arbitrary threads, hence the lock.
/// Buffers of 1 MiB and more come from `ReadBuffers`, so a streaming
/// reader reuses memory whose pages are already mapped instead of
/// faulting in fresh pages for every part.
final class ByteSink: @unchecked Sendable {
    // @unchecked: `buffer`, `capacity` and `count` are only touched with
    // `lock` held; the buffer is owned here until `take` hands it to a Data.
    private let lock = NSLock()
    private var buffer: UnsafeMutableRawPointer?
    private var capacity: Int
    private var count = 0

    init(capacity: Int) {
        let allocated = ReadBuffers.shared.allocate(max(capacity, 1))
        buffer = allocated?.pointer
        self.capacity = allocated?.size ?? max(capacity, 1)
    }

    deinit {
        if let buffer { ReadBuffers.shared.release(buffer, capacity) }
    }

    func append(_ bytes: UnsafeRawBufferPointer) {
        lock.lock()
        defer { lock.unlock() }
        guard bytes.count > 0, var target = buffer else { return }
        if count + bytes.count > capacity {
            // More than announced (a server ignoring the range): grow.
            let grown = max(capacity * 2, count + bytes.count)
            let bigger = malloc(grown)!
            bigger.copyMemory(from: target, byteCount: count)
            ReadBuffers.shared.release(target, capacity)
            target = bigger
            buffer = bigger
            capacity = grown
        }
        (target + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    /// A copy of the first `count` bytes (fewer if fewer have come, or
    /// none once `take` has emptied the sink).
    func copyPrefix(_ count: Int) -> Data {
        lock.lock()
        defer { lock.unlock() }
        guard let target = buffer else { return Data() }
        return Data(bytes: target, count: min(count, self.count))
    }

    /// The bytes so far; the sink is empty afterwards.
    func take() -> Data {
        lock.lock()
        defer { lock.unlock() }
        guard let target = buffer, count > 0 else { return Data() }
        buffer = nil
        let data = ReadBuffers.shared.data(owning: target, count: count, size: capacity)
        count = 0
        return data
    }
}
