import Foundation
import Logging
import Synchronization
import Transport

/// The read side of one open file: bytes of exactly one generation, from
/// read-ahead buffers, the block cache or ranged downloads, in that order.
///
/// A reader that reads in order is served from a *stream*: the read-ahead
/// machine's refills, each one GET of a growing window, whose body is cut
/// into block-sized buffers as it arrives. A read waits only for the
/// blocks it touches, not for the whole request; each completed block goes
/// to the block cache (a background write of the same buffer, no copy) and
/// serves the reader from memory. Writing every block to disk first and
/// reading it back would put two disk passes on the hot path for the price
/// of no memory, and the read-ahead budget already bounds memory. A random
/// reader gets ranged downloads of just the blocks it touches.
///
/// Never mixes generations: every download asks for the pinned generation,
/// and the block cache key contains it. A generation that is gone surfaces
/// as `.notFound`, which `FileSystem` reports as ESTALE.
final class FileReader: Sendable {
    let objectName: String
    /// The metadata pinned at open; `size` and `generation` never change.
    let info: ObjectInfo
    private let store: any ObjectStore
    private let cache: BlockCache?
    private let budget: ReadAheadBudget
    private let blockSize: Int64
    private let logger: Logger

    /// One block of a stream's body, pending or arrived.
    private struct Part: Sendable {
        let id: UInt64
        let range: Range<Int64>
        let block: StreamBlock
        /// The request that delivers it (shared by the stream's blocks).
        let stream: StreamRequest
    }

    private struct State: Sendable {
        var machine: ReadAhead
        /// Sorted by `range.lowerBound`, non-overlapping.
        var parts: [Part] = []
        var nextPartID: UInt64 = 0
    }

    private enum Segment {
        case buffered(Part, Range<Int64>)
        case direct(Range<Int64>)
    }

    // Lock order: `state` → { `budget`, the block cache index } (both
    // leaves). Never held across an await; part tasks are created, never
    // awaited, under it.
    private let state: OrderedLock<State>

    init(objectName: String, info: ObjectInfo, store: any ObjectStore, cache: BlockCache?, budget: ReadAheadBudget,
         readAhead: ReadAhead.Configuration, logger: Logger) {
        self.objectName = objectName
        self.info = info
        self.store = store
        self.cache = cache
        self.budget = budget
        self.blockSize = readAhead.blockSize
        self.logger = logger
        self.state = OrderedLock("file reader", .outer, State(machine: ReadAhead(
            configuration: readAhead, objectSize: info.size, storeRoundTrip: store.roundTrip.map(\.seconds))))
    }

    /// Up to `size` bytes at `offset`; empty at or past the end.
    ///
    /// The bytes are copied once in user space, from the network into a
    /// buffer (or from a cache file into one); a read that one buffer or
    /// one block serves returns a slice of it, which the bridge hands to
    /// the kernel as is. Only a read across buffers is joined (a copy).
    func read(offset: Int64, size: Int) async throws(StoreError) -> Data {
        guard offset >= 0, size > 0, offset < info.size else { return Data() }
        let wanted = offset..<(offset + min(Int64(size), info.size - offset))
        let segments = state.withLock { state in
            let actions = state.machine.read(offset: offset, size: size)
            perform(actions, &state)
            return Self.plan(wanted, parts: state.parts)
        }
        var pieces: [Data] = []
        pieces.reserveCapacity(segments.count)
        for segment in segments {
            switch segment {
            case .direct(let range):
                pieces.append(try await readDirect(range))
            case .buffered(let part, let range):
                // A read that ends inside the block (a file's first, small
                // reads) is served as soon as its bytes have come, by a copy;
                // a read to the block's end waits for the whole block.
                let prefix = Int(range.upperBound - part.range.lowerBound)
                switch await part.block.value(prefix: prefix < part.range.count ? prefix : nil) {
                case .success(let data):
                    let from = Int(range.lowerBound - part.range.lowerBound)
                    pieces.append(data[(data.startIndex + from)..<(data.startIndex + from + range.count)])
                case .failure(.cancelled):
                    // This read was interrupted (the kernel cancelled its
                    // Task): EINTR, while the stream goes on for others.
                    if Task.isCancelled { throw .cancelled }
                    // Another read jumped elsewhere and dropped the buffer.
                    pieces.append(try await readDirect(range))
                case .failure(let error):
                    abandon(part)
                    throw error
                }
            }
        }
        // A cache writer far behind holds the reader back, and with it the
        // read-ahead, rather than let the blocks go uncached.
        await cache?.waitForWriter()
        return try Self.joined(pieces, count: wanted.count)
    }

    /// One piece as it is; several copied into one buffer. A piece may be
    /// bytes of the block cache in place (`ChunkMappings`), so the copy is
    /// a guarded one: a cache file cut short under the read is EIO (with
    /// what went wrong), not the end of the mount.
    private static func joined(_ pieces: [Data], count: Int) throws(StoreError) -> Data {
        if pieces.count == 1 { return pieces[0] }
        guard let (buffer, size) = ReadBuffers.shared.allocate(count) else { throw .other("no memory to join a read of \(count) bytes") }
        var filled = 0
        for piece in pieces {
            let copied = piece.withUnsafeBytes { ChunkMappings.copy($0, to: buffer + filled) }
            guard copied else {
                ReadBuffers.shared.release(buffer, size)
                throw .other("a block cache file could not be read (cut short or a disk error)")
            }
            filled += piece.count
        }
        // The Data owns the buffer from here.
        return ReadBuffers.shared.data(owning: buffer, count: filled, size: size)
    }

    /// Drops every buffer (the file was released).
    func close() {
        state.withLock { state in perform([.discardAll], &state) }
    }

    /// Bytes held by this file's buffers (tests).
    var bufferedBytes: Int64 {
        state.withLock { $0.parts.reduce(0) { $0 + Int64($1.range.count) } }
    }

    // MARK: - Read-ahead actions (under the lock)

    private func perform(_ actions: [ReadAhead.Action], _ state: inout State) {
        var refused = false
        for action in actions {
            switch action {
            case .discardAll:
                drop(&state, cancelling: true) { _ in true }
            case .discard(let below):
                // Reads still in flight may wait for these blocks (the
                // kernel's requests overtake each other): their stream goes
                // on delivering them.
                drop(&state, cancelling: false) { $0.range.upperBound <= below }
            case .prefetch(let range):
                // After one refusal the rest of this refill is refused too,
                // so the frontier stays contiguous.
                if refused { continue }
                for run in neededRuns(of: range, parts: state.parts) {
                    guard budget.reserve(Int64(run.count)) else {
                        refused = true
                        state.machine.prefetchAbandoned(from: run.lowerBound)
                        logger.trace("read-ahead budget spent; reading directly", metadata: ["object": "\(objectName)"])
                        break
                    }
                    // Misses, as in `readDirect`: the reads these blocks
                    // serve never look in the cache, so a cold streaming
                    // read would otherwise count neither a hit nor a miss.
                    if cache != nil {
                        FileSystemMetrics.blockCacheMisses.increment(by: (run.upperBound - 1) / blockSize - run.lowerBound / blockSize + 1)
                    }
                    startStream(run, &state)
                }
            }
        }
    }

    /// One GET of `range`, its body cut into block-sized parts.
    private func startStream(_ range: Range<Int64>, _ state: inout State) {
        var blocks: [StreamBlock] = []
        var start = range.lowerBound
        while start < range.upperBound {
            let stop = min(range.upperBound, (start / blockSize + 1) * blockSize)
            blocks.append(StreamBlock(range: start..<stop))
            start = stop
        }
        let sent = ContinuousClock.now
        let filler = StreamFiller(blocks: blocks) { [weak self] data, start in
            self?.keep(data, at: start)
        } firstBlock: { [weak self] bytes, firstByte, done in
            // The first whole block, not the whole request, shows the link:
            // the kernel's read-ahead runs a stream ahead by several
            // requests before the first of them could finish.
            self?.linkMeasured(bytes: bytes, firstByte: firstByte - sent, total: done - sent)
        }
        let request = StreamRequest()
        for block in blocks {
            let part = Part(id: state.nextPartID, range: block.range, block: block, stream: request)
            state.nextPartID += 1
            let at = state.parts.firstIndex { $0.range.lowerBound > block.range.lowerBound } ?? state.parts.endIndex
            state.parts.insert(part, at: at)
        }
        request.task = Task { [store, objectName, info, logger] in
            do throws(StoreError) {
                let count = try await store.read(objectName, generation: info.generation, range: range) { bytes in
                    filler.append(bytes)
                }
                filler.finish(received: count, of: "\(objectName)#\(info.generation) \(range)")
                // How the stream's requests overlapped, for a slow read.
                logger.trace("read-ahead request done", metadata: [
                    "object": "\(objectName)", "range": "\(range)", "seconds": "\((ContinuousClock.now - sent).seconds)",
                ])
            } catch {
                filler.fail(error)
            }
        }
    }

    /// Tells the machine how fast the link brought a stream's first block
    /// (clock read by the caller, outside the lock).
    private func linkMeasured(bytes: Int64, firstByte: Duration, total: Duration) {
        state.withLock { state in
            state.machine.linkMeasured(bytes: bytes, firstByte: firstByte.seconds, total: total.seconds)
        }
    }

    /// Drops the parts `condition` picks (releasing their budget); with
    /// `cancelling`, also the requests none of the remaining parts wait for.
    private func drop(_ state: inout State, cancelling: Bool, where condition: (Part) -> Bool) {
        var dropped: [StreamRequest] = []
        state.parts.removeAll { part in
            guard condition(part) else { return false }
            budget.release(Int64(part.range.count))
            if !dropped.contains(where: { $0 === part.stream }) { dropped.append(part.stream) }
            return true
        }
        guard cancelling else { return }
        for request in dropped where !state.parts.contains(where: { $0.stream === request }) {
            request.cancel()
        }
    }

    /// A failed part goes with the rest of its stream (none of it will
    /// arrive), so the next read tries again.
    private func abandon(_ failed: Part) {
        state.withLock { state in
            guard state.parts.contains(where: { $0.id == failed.id }) else { return }
            drop(&state, cancelling: true) { $0.stream === failed.stream && $0.range.lowerBound >= failed.range.lowerBound }
            state.machine.prefetchAbandoned(from: failed.range.lowerBound)
        }
    }

    /// The runs of `range` whose blocks neither the cache nor a buffer
    /// holds, in order: what a prefetch of `range` must download.
    /// - The blocks the cache holds are read from it when the reader gets
    ///   there (`readDirect`), so a re-read of a file the cache holds all
    ///   but a few blocks of (evicted, say) downloads just those, ahead of
    ///   the reader, instead of every window that touches one of them.
    /// - Buffered blocks are on their way: after a failed part the stream
    ///   resumes at the failed block while later parts are still in
    ///   flight, and only the failed range is asked again.
    private func neededRuns(of range: Range<Int64>, parts: [Part]) -> [Range<Int64>] {
        var runs: [Range<Int64>] = []
        var runStart: Int64?
        // `parts` is sorted and so are the blocks: one pass over both.
        var nextPart = parts.firstIndex { $0.range.upperBound > range.lowerBound } ?? parts.endIndex
        for block in blocks(of: range) {
            let start = max(range.lowerBound, block * blockSize)
            while nextPart < parts.endIndex, parts[nextPart].range.upperBound <= start { nextPart += 1 }
            let buffered = nextPart < parts.endIndex && parts[nextPart].range.lowerBound <= start
            if buffered || cache?.contains(key(block)) == true {
                if let from = runStart { runs.append(from..<start) }
                runStart = nil
            } else if runStart == nil {
                runStart = start
            }
        }
        if let from = runStart { runs.append(from..<range.upperBound) }
        return runs
    }

    /// The indexes of the blocks `range` touches.
    private func blocks(of range: Range<Int64>) -> StrideThrough<Int64> {
        stride(from: range.lowerBound / blockSize, through: (range.upperBound - 1) / blockSize, by: 1)
    }

    /// `wanted` cut into pieces served by buffers and pieces to fetch.
    private static func plan(_ wanted: Range<Int64>, parts: [Part]) -> [Segment] {
        var segments: [Segment] = []
        var position = wanted.lowerBound
        for part in parts where part.range.upperBound > position {
            guard part.range.lowerBound < wanted.upperBound else { break }
            if part.range.lowerBound > position {
                segments.append(.direct(position..<part.range.lowerBound))
                position = part.range.lowerBound
            }
            let stop = min(wanted.upperBound, part.range.upperBound)
            segments.append(.buffered(part, position..<stop))
            position = stop
            if position == wanted.upperBound { break }
        }
        if position < wanted.upperBound { segments.append(.direct(position..<wanted.upperBound)) }
        return segments
    }

    // MARK: - I/O (no lock held)

    /// `range` without read-ahead: whole blocks from the cache, runs of
    /// missing blocks downloaded in one request and cached. With no cache,
    /// exactly `range` is downloaded.
    private func readDirect(_ range: Range<Int64>) async throws(StoreError) -> Data {
        guard let cache else { return try await fetch(range) }
        var pieces: [Data] = []
        var block = range.lowerBound / blockSize
        let lastBlock = (range.upperBound - 1) / blockSize
        while block <= lastBlock {
            let blockStart = block * blockSize
            let blockLength = Int(min(blockSize, info.size - blockStart))
            let within = Int(max(range.lowerBound, blockStart) - blockStart)..<Int(min(range.upperBound, blockStart + Int64(blockLength)) - blockStart)
            if let bytes = cache.read(key(block), range: within, blockLength: blockLength) {
                pieces.append(bytes)
                block += 1
                continue
            }
            var runEnd = block
            while runEnd < lastBlock, !cache.contains(key(runEnd + 1)) { runEnd += 1 }
            let fetched = blockStart..<min(info.size, (runEnd + 1) * blockSize)
            let data = try await fetch(fetched)
            keep(data, at: fetched.lowerBound)
            let from = Int(max(range.lowerBound, fetched.lowerBound) - fetched.lowerBound)
            let to = Int(min(range.upperBound, fetched.upperBound) - fetched.lowerBound)
            pieces.append(data[(data.startIndex + from)..<(data.startIndex + to)])
            block = runEnd + 1
        }
        return try Self.joined(pieces, count: range.count)
    }

    /// One ranged download of the pinned generation; all or an error.
    private func fetch(_ range: Range<Int64>) async throws(StoreError) -> Data {
        let sink = ByteSink(capacity: range.count)
        let sent = ContinuousClock.now
        // Nanoseconds from `sent` to the first bytes (-1: none yet): the
        // clock is read once, not on every append.
        let firstByte = Atomic<Int64>(-1)
        let count = try await store.read(objectName, generation: info.generation, range: range) { bytes in
            if firstByte.load(ordering: .relaxed) < 0 {
                firstByte.store((ContinuousClock.now - sent).nanoseconds, ordering: .relaxed)
            }
            sink.append(bytes)
        }
        let total = ContinuousClock.now - sent
        // A direct read shows the link too: the first reads of a file
        // often come before the reader counts as sequential, and a slow
        // link learnt from them makes its first refill parts already.
        let untilFirstByte = firstByte.load(ordering: .relaxed)
        if untilFirstByte >= 0 {
            linkMeasured(bytes: Int64(range.count), firstByte: .nanoseconds(untilFirstByte), total: total)
        }
        let data = sink.take()
        guard count == range.count, data.count == range.count else {
            throw .other("short read of \(objectName)#\(info.generation) \(range): \(data.count) bytes")
        }
        return data
    }

    /// Hands the whole blocks of `data` (starting at block-aligned
    /// `start`) to the block cache.
    private func keep(_ data: Data, at start: Int64) {
        guard let cache, start % blockSize == 0 else { return }
        var blocks: [(key: BlockCache.Key, range: Range<Int>)] = []
        var offset = 0
        while offset < data.count {
            let block = (start + Int64(offset)) / blockSize
            let length = Int(min(blockSize, info.size - block * blockSize))
            guard offset + length <= data.count else { break }
            blocks.append((key(block), offset..<(offset + length)))
            offset += length
        }
        if !blocks.isEmpty { cache.store(blocks: blocks, of: data) }
    }

    private func key(_ block: Int64) -> BlockCache.Key {
        BlockCache.Key(objectName: objectName, generation: info.generation, index: block)
    }
}
