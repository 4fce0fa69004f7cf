import Foundation
import Logging
import Synchronization

/// The read side of one open file: bytes of exactly one generation, from
/// read-ahead buffers, the block cache or ranged downloads, in that order.
///
/// Where prefetched data goes: into memory buffers (charged to the global
/// `ReadAheadBudget`), and from there to the block cache in the background.
/// A streaming reader is served from memory, at memory speed, without
/// waiting for a disk write; the cache copy makes the next open (or a
/// reader that seeks back) free of network requests. Writing every part to
/// disk first and reading it back would put two disk passes on the hot
/// path for the price of no memory, and the budget already bounds memory.
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

    /// A prefetched range, downloading or done.
    private struct Part: Sendable {
        let id: UInt64
        let range: Range<Int64>
        let task: Task<Result<Data, StoreError>, Never>
        /// Set once `task` has its result: a read then takes it at once,
        /// without the hand-over to another thread that a wait an interrupt
        /// can end costs.
        let downloaded: Downloaded
    }

    private final class Downloaded: Sendable {
        let flag = Atomic<Bool>(false)
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
    private let state: Mutex<State>

    init(objectName: String, info: ObjectInfo, store: any ObjectStore, cache: BlockCache?, budget: ReadAheadBudget,
         readAhead: ReadAhead.Configuration, logger: Logger) {
        self.objectName = objectName
        self.info = info
        self.store = store
        self.cache = cache
        self.budget = budget
        self.blockSize = readAhead.blockSize
        self.logger = logger
        self.state = Mutex(State(machine: ReadAhead(configuration: readAhead, objectSize: info.size)))
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
                let result: Result<Data, StoreError>
                if part.downloaded.flag.load(ordering: .acquiring) {
                    result = await part.task.value
                } else {
                    // The part is shared with later reads: an interrupted
                    // read stops waiting for it, the download goes on.
                    guard let waited = await part.task.valueUnlessCancelled() else { throw .cancelled }
                    result = waited
                }
                switch result {
                case .success(let data):
                    let from = Int(range.lowerBound - part.range.lowerBound)
                    pieces.append(data[(data.startIndex + from)..<(data.startIndex + from + range.count)])
                case .failure(.cancelled):
                    // Another read jumped elsewhere and dropped the buffer.
                    pieces.append(try await readDirect(range))
                case .failure(let error):
                    abandon(part)
                    throw error
                }
            }
        }
        return Self.joined(pieces, count: wanted.count)
    }

    /// One piece as it is; several copied into one buffer.
    private static func joined(_ pieces: [Data], count: Int) -> Data {
        if pieces.count == 1 { return pieces[0] }
        var result = Data(capacity: count)
        for piece in pieces { result.append(piece) }
        return result
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
                drop(&state) { _ in true }
            case .discard(let below):
                drop(&state) { $0.range.upperBound <= below }
            case .prefetch(let range):
                // After one refusal the rest of this refill is refused too,
                // so the frontier stays contiguous.
                if refused || isCached(range) { continue }
                guard budget.reserve(Int64(range.count)) else {
                    refused = true
                    state.machine.prefetchAbandoned(from: range.lowerBound)
                    logger.trace("read-ahead budget spent; reading directly", metadata: ["object": "\(objectName)"])
                    continue
                }
                countMisses(range)
                let downloaded = Downloaded()
                let task = Task {
                    let result = await self.download(range)
                    downloaded.flag.store(true, ordering: .releasing)
                    return result
                }
                let part = Part(id: state.nextPartID, range: range, task: task, downloaded: downloaded)
                state.nextPartID += 1
                let at = state.parts.firstIndex { $0.range.lowerBound > range.lowerBound } ?? state.parts.endIndex
                state.parts.insert(part, at: at)
            }
        }
    }

    private func drop(_ state: inout State, where condition: (Part) -> Bool) {
        state.parts.removeAll { part in
            guard condition(part) else { return false }
            part.task.cancel()
            budget.release(Int64(part.range.count))
            return true
        }
    }

    /// A failed part goes, so the next read tries again.
    private func abandon(_ failed: Part) {
        state.withLock { state in
            guard state.parts.contains(where: { $0.id == failed.id }) else { return }
            drop(&state) { $0.id == failed.id }
            state.machine.prefetchAbandoned(from: failed.range.lowerBound)
        }
    }

    private func isCached(_ range: Range<Int64>) -> Bool {
        guard let cache else { return false }
        return blocks(of: range).allSatisfy { cache.contains(key($0)) }
    }

    /// The indexes of the blocks `range` touches.
    private func blocks(of range: Range<Int64>) -> StrideThrough<Int64> {
        stride(from: range.lowerBound / blockSize, through: (range.upperBound - 1) / blockSize, by: 1)
    }

    /// The blocks of a prefetch that the cache lacks are block cache
    /// misses, as they are in `readDirect`: the read that asked for them
    /// is served from the part's buffer and never looks in the cache, so
    /// without this a cold streaming read would count neither a hit nor a
    /// miss.
    private func countMisses(_ range: Range<Int64>) {
        guard let cache else { return }
        let missing = blocks(of: range).count(where: { !cache.contains(key($0)) })
        if missing > 0 { FileSystemMetrics.blockCacheMisses.increment(by: Int64(missing)) }
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

    private func download(_ range: Range<Int64>) async -> Result<Data, StoreError> {
        do {
            let data = try await fetch(range)
            keep(data, at: range.lowerBound)
            return .success(data)
        } catch {
            return .failure(error)
        }
    }

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
        return Self.joined(pieces, count: range.count)
    }

    /// One ranged download of the pinned generation; all or an error.
    private func fetch(_ range: Range<Int64>) async throws(StoreError) -> Data {
        let sink = ByteSink(capacity: range.count)
        let count = try await store.read(objectName, generation: info.generation, range: range) { bytes in
            sink.append(bytes)
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
    private let pooled: Bool

    init(capacity: Int) {
        pooled = ReadBuffers.shared.serves(capacity)
        self.capacity = pooled ? ReadBuffers.shared.sizeClass(for: capacity) : max(capacity, 1)
        buffer = pooled ? ReadBuffers.shared.take(self.capacity) : malloc(self.capacity)
    }

    deinit {
        if let buffer { release(buffer, capacity) }
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
            release(target, capacity)
            target = bigger
            buffer = bigger
            capacity = grown
        }
        (target + count).copyMemory(from: bytes.baseAddress!, byteCount: bytes.count)
        count += bytes.count
    }

    /// The bytes so far; the sink is empty afterwards.
    func take() -> Data {
        lock.lock()
        defer { lock.unlock() }
        guard let target = buffer, count > 0 else { return Data() }
        buffer = nil
        let size = capacity
        let pooledBuffer = pooled && size == ReadBuffers.shared.sizeClass(for: size)
        let data: Data
        if pooledBuffer {
            // The Data owns the buffer and hands it back when its last
            // copy or slice goes.
            data = Data(bytesNoCopy: target, count: count, deallocator: .custom { pointer, _ in
                ReadBuffers.shared.recycle(pointer, size)
            })
        } else {
            data = Data(bytesNoCopy: target, count: count, deallocator: .free)
        }
        count = 0
        return data
    }

    private func release(_ pointer: UnsafeMutableRawPointer, _ size: Int) {
        if pooled && size == ReadBuffers.shared.sizeClass(for: size) {
            ReadBuffers.shared.recycle(pointer, size)
        } else {
            free(pointer)
        }
    }
}

/// Download buffers of 1, 2, 4 and 8 MiB kept for reuse, at most
/// `idleLimit` bytes of them idle. The read-ahead budget bounds the ones
/// in use; this bounds the ones waiting, so memory stays flat.
final class ReadBuffers: Sendable {
    static let shared = ReadBuffers()
    static let smallest = 1 << 20
    static let largest = 8 << 20
    let idleLimit = 32 << 20

    private struct Idle: @unchecked Sendable {
        // @unchecked: raw pointers to buffers nobody else holds.
        var free: [Int: [UnsafeMutableRawPointer]] = [:]
        var bytes = 0
    }

    private let idle = Mutex(Idle())

    func serves(_ size: Int) -> Bool { size >= Self.smallest && size <= Self.largest }

    /// The power of two at or above `size`.
    func sizeClass(for size: Int) -> Int {
        var result = Self.smallest
        while result < size { result <<= 1 }
        return result
    }

    func take(_ size: Int) -> UnsafeMutableRawPointer {
        let reused = idle.withLock { idle -> UnsafeMutableRawPointer? in
            guard let pointer = idle.free[size]?.popLast() else { return nil }
            idle.bytes -= size
            return pointer
        }
        return reused ?? malloc(size)!
    }

    func recycle(_ pointer: UnsafeMutableRawPointer, _ size: Int) {
        let kept = idle.withLock { idle -> Bool in
            guard idle.bytes + size <= idleLimit else { return false }
            idle.free[size, default: []].append(pointer)
            idle.bytes += size
            return true
        }
        if !kept { free(pointer) }
    }
}
