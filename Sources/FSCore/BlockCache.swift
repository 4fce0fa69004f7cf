import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Downloaded object bytes on local disk, in fixed-size blocks keyed by
/// (object name, generation, block index), so re-reads need no network and
/// a new generation can never be served old bytes: its key differs.
///
/// - Blocks live in slots of a few large chunk files
///   (`directory/chunks/NNNN`, see `ChunkFiles`), written in place with
///   `pwrite`: caching a block allocates no inode, and a slot reused for a
///   new block overwrites pages the page cache already has. A slot is a
///   header page (key, length, sequence, checksums: `BlockFile`) and room
///   for one block. The files are sparse, so a small block costs its
///   own pages (4 KiB header + its bytes rounded up to 4 KiB), not a
///   whole slot: small objects are bounded by `maxBlocks`, as below, not
///   by slot size.
/// - Least-recently-used blocks are evicted, and their slots punched
///   (`fallocate`) and reused, to stay under `capacity` disk bytes and
///   `maxBlocks` blocks: small objects make small blocks, and each costs
///   memory in the index whatever its size. The index is rebuilt at start
///   by reading every slot's header (oldest write first), so the cache
///   persists across mounts. One cache directory belongs to one process
///   at a time. A `blocks/` folder of the earlier one-file-per-block
///   layout is removed unread.
/// - A slot whose header or payload checksum does not match is a miss and
///   is freed, so a torn write or a damaged disk never serves wrong
///   bytes. A payload is verified once per process, by the first read of
///   it (which reads the whole block, one pass); later reads fetch only
///   the bytes asked for. Blocks this process wrote need no check.
/// - A read is served in place, from a mapping of the chunk file
///   (`ChunkMappings`): the checksum runs over the page cache's pages
///   and the returned Data points into them, so the reply is the only
///   copy. The Data keeps its slot pinned (`BlockCacheIndex`) until it is
///   gone, so no writer rewrites or punches the slot under it. Where the
///   files cannot be mapped, and for reads of a few bytes, the bytes are
///   copied out with `pread`, as before.
/// - `store(blocks:of:)` hands blocks to a background writer; until they
///   land they are served from memory, so a read right after a download
///   never misses. It never waits: its callers are the transport's one
///   thread and the path of a FUSE reply. Instead, once the writer is
///   `readsWaitAbove` bytes behind, reads wait in `waitForWriter()` before
///   they reply (`CacheWriteBacklog`), which holds the reader and its
///   read-ahead back; what does not fit under `maxPendingBytes` is not
///   cached, counted in `bucketfs_block_cache_dropped_total`.
public final class BlockCache: Sendable {
    public struct Key: Hashable, Sendable, CustomStringConvertible {
        public var objectName: String
        public var generation: Int64
        public var index: Int64

        public init(objectName: String, generation: Int64, index: Int64) {
            self.objectName = objectName
            self.generation = generation
            self.index = index
        }

        /// What a slot's header stores to prove whose block it holds.
        var stored: String { "\(generation)\n\(index)\n\(objectName)" }

        /// The key a header stored; nil if it is not one.
        init?(stored: String) {
            let parts = stored.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
            guard parts.count == 3, let generation = Int64(parts[0]), let index = Int64(parts[1]) else { return nil }
            self.init(objectName: String(parts[2]), generation: generation, index: index)
        }

        public var description: String { "\(objectName)#\(generation)[\(index)]" }
    }

    private struct Queue: Sendable {
        var blocks: [Key: Data] = [:]
        var backlog: CacheWriteBacklog
        /// The reads `backlog` holds, with the timer that ends each wait.
        var waits: [UInt64: (reader: CheckedContinuation<Void, Never>, timer: Task<Void, Never>?)] = [:]
        var nextWait: UInt64 = 0

        /// The waits `ids` names, removed (each is resumed exactly once: by
        /// whoever takes it).
        mutating func take(_ ids: [UInt64]) -> [(reader: CheckedContinuation<Void, Never>, timer: Task<Void, Never>?)] {
            ids.compactMap { waits.removeValue(forKey: $0) }
        }
    }

    public let directory: String
    public let capacity: Int64
    /// The most blocks the index holds (a few hundred bytes of memory each):
    /// `defaultMaxBlocks`, or as many full blocks as fit in `capacity` if
    /// that is more, unless the caller sets it (tests).
    public let maxBlocks: Int
    public let blockSize: Int
    /// Memory queued background writes may hold; beyond it `store` does
    /// not cache the blocks (counted) rather than let memory grow without
    /// bound. 160 MiB: `readsWaitAbove` plus the largest read-ahead window
    /// (64 MiB), what a held reader's downloads still bring.
    public let maxPendingBytes: Int
    /// The longest a read waits for the writer; a wait that long marks the
    /// writer stalled (`CacheWriteBacklog`).
    public let longestWait: Duration
    private let logger: Logger
    private let files: ChunkFiles
    // Leaf locks, never held together; file I/O happens outside them.
    private let index: OrderedLock<BlockCacheIndex>
    private let queue: OrderedLock<Queue>
    /// Where queued blocks are written, one after another, off the
    /// cooperative pool: a write blocks in pwrite, and the pool has one
    /// thread per core.
    private let writer: DispatchQueue

    /// `readsWaitAbove`: queued bytes above which reads wait for the
    /// writer. 96 MiB: with that as the only bound (blocks beyond it
    /// dropped, no read held), a cold 256 MiB read on two loopback cores
    /// cached all its blocks in one bench round of three, and 234 and 236
    /// in the others.
    /// `writer` is the serial queue background writes run on (tests pass
    /// one they suspend, to hold writes queued).
    public init(
        directory: String, capacity: Int64, blockSize: Int = 1 << 20, maxBlocks: Int? = nil,
        maxPendingBytes: Int = 160 << 20, readsWaitAbove: Int = 96 << 20, longestWait: Duration = .seconds(2),
        writer: DispatchQueue = DispatchQueue(label: "bucketfs.block-cache.writes"),
        logger: Logger = Logger(label: "bucketfs.cache")
    ) throws {
        self.directory = directory
        self.capacity = capacity
        self.maxBlocks = max(1, maxBlocks ?? max(Self.defaultMaxBlocks, Int(capacity / Int64(max(1, blockSize)))))
        self.blockSize = blockSize
        self.maxPendingBytes = maxPendingBytes
        self.longestWait = longestWait
        self.queue = OrderedLock("block cache write queue", Queue(
            backlog: CacheWriteBacklog(readsWaitAbove: readsWaitAbove, dropAbove: maxPendingBytes)))
        self.writer = writer
        self.logger = logger
        self.files = ChunkFiles(directory: directory + "/chunks", blockSize: blockSize)
        try files.prepare()
        let scan = files.scan()
        var loaded = BlockCacheIndex(capacity: capacity, maxBlocks: self.maxBlocks)
        let victims = loaded.load(
            found: scan.found.compactMap { item in Key(stored: item.header.key).map { (slot: item.slot, key: $0, header: item.header) } },
            slotCount: scan.slotCount)
        index = OrderedLock("block cache index", loaded)
        punchAndFree(victims)
        removeOldLayout()
    }

    /// The block count the index is bounded by when `capacity` holds fewer
    /// full blocks: 16 Ki blocks, room for sixteen times as many small
    /// blocks as the default 1 GiB holds full ones.
    public static let defaultMaxBlocks = 16_384

    /// Disk bytes the cached blocks occupy (headers included).
    public var usedBytes: Int64 { index.withLock { $0.used } }
    public var blockCount: Int { index.withLock { $0.entries.count } }

    /// Disk bytes a block of `length` bytes takes.
    public static func diskCost(ofLength length: Int) -> Int64 { ChunkFiles.cost(ofLength: length) }

    public func contains(_ key: Key) -> Bool {
        if queue.withLock({ $0.blocks[key] != nil }) { return true }
        return index.withLock { $0.entries[key] != nil }
    }

    /// Bytes `range` of block `key`, whose full length is `blockLength`;
    /// nil on a miss. Counts as a use for LRU. The bytes may be the cache
    /// file's own pages (a read in place): hand them to the kernel, or
    /// copy them with `ChunkMappings.copy`, which survives a file cut
    /// short under them; a plain load from them would not.
    public func read(_ key: Key, range: Range<Int>, blockLength: Int) -> Data? {
        precondition(range.lowerBound >= 0 && range.upperBound <= blockLength)
        let found = queued(key, range: range, blockLength: blockLength) ?? readSlot(key, range: range, blockLength: blockLength)
        (found == nil ? FileSystemMetrics.blockCacheMisses : FileSystemMetrics.blockCacheHits).increment()
        return found
    }

    private func queued(_ key: Key, range: Range<Int>, blockLength: Int) -> Data? {
        guard let data = queue.withLock({ $0.blocks[key] }), data.count == blockLength else { return nil }
        return data[(data.startIndex + range.lowerBound)..<(data.startIndex + range.upperBound)]
    }

    /// Reads of fewer bytes than this are copied (`pread`) rather than
    /// served in place: Data keeps a few bytes inline, copying them with
    /// an unguarded load (see `ChunkMappings`).
    static let smallestReadInPlace = 64

    private func readSlot(_ key: Key, range: Range<Int>, blockLength: Int) -> Data? {
        guard range.count >= Self.smallestReadInPlace else { return readSlotCopied(key, range: range, blockLength: blockLength) }
        enum Look { case hit(BlockCacheIndex.Entry), wrongLength(Int?), miss }
        let look: Look = index.withLock { index in
            guard let entry = index.lookUpPinned(key) else { return .miss }
            guard entry.length == blockLength else {
                _ = index.remove(key)  // nil: pinned, so held until the unpin
                return .wrongLength(index.unpin(entry.slot))
            }
            return .hit(entry)
        }
        guard case .hit(let entry) = look else {
            if case .wrongLength(let slot?) = look { punchAndFree([slot]) }
            return nil
        }
        guard let payload = files.payloadInPlace(slot: entry.slot, range: 0..<blockLength) else {
            unpin(entry.slot)
            return readSlotCopied(key, range: range, blockLength: blockLength)
        }
        if !entry.verified {
            // First read in this process: the whole payload, once, checked
            // in place (nil: a page of it could not be read).
            let intact = ChunkMappings.checksum(payload) == entry.checksum
            index.withLock { index in
                guard index.entries[key]?.slot == entry.slot else { return }
                if intact {
                    index.markVerified(key, slot: entry.slot)
                } else {
                    _ = index.remove(key)  // nil: pinned, so held until the unpin below
                }
            }
            if !intact {
                logger.debug("block cache: dropping unreadable or damaged block", metadata: ["block": "\(key)"])
                finishedInPlace(entry.slot, count: blockLength)
                return nil
            }
        }
        // The Data holds the slot pinned until its last copy is gone (the
        // reply was written), so no writer changes the bytes under it.
        let bytes = UnsafeMutableRawPointer(mutating: payload.baseAddress! + range.lowerBound)
        let touched = entry.verified ? range.count : blockLength
        return Data(bytesNoCopy: bytes, count: range.count, deallocator: .custom { [self] _, _ in finishedInPlace(entry.slot, count: touched) })
    }

    /// A reader is done with `count` bytes of `slot` in place.
    private func finishedInPlace(_ slot: Int, count: Int) {
        files.finishedInPlace(slot: slot, count: count)
        unpin(slot)
    }

    private func unpin(_ slot: Int) {
        if let evicted = index.withLock({ $0.unpin(slot) }) { punchAndFree([evicted]) }
    }

    /// `readSlot` by copying the bytes out of the chunk file (`pread`):
    /// small reads, and where the files cannot be mapped.
    private func readSlotCopied(_ key: Key, range: Range<Int>, blockLength: Int) -> Data? {
        enum Look { case hit(BlockCacheIndex.Entry, UInt64), wrongLength(Int?), miss }
        let look: Look = index.withLock { index in
            guard let (entry, version) = index.lookUp(key) else { return .miss }
            guard entry.length == blockLength else { return .wrongLength(index.remove(key)) }
            return .hit(entry, version)
        }
        guard case .hit(let entry, let version) = look else {
            if case .wrongLength(let slot?) = look { punchAndFree([slot]) }
            return nil
        }
        if entry.verified {
            let data = files.read(slot: entry.slot, range: range)
            // A writer may have reused the slot while it was read.
            return index.withLock { $0.isUnchanged(entry.slot, since: version) } ? data : nil
        }
        // First read in this process: the whole payload, once, checked.
        let payload = files.read(slot: entry.slot, range: 0..<blockLength)
        let intact = payload.map { BlockFile.checksum($0) == entry.checksum } ?? false
        enum Outcome { case good, damaged(Int?), reused }
        let outcome: Outcome = index.withLock { index in
            guard index.isUnchanged(entry.slot, since: version) else { return .reused }
            guard intact else { return .damaged(index.remove(key)) }
            index.markVerified(key, slot: entry.slot)
            return .good
        }
        switch outcome {
        case .good:
            guard let payload else { return nil }  // not intact then
            // A slice, not a copy: a whole-block read returns the payload as is.
            return range.count == blockLength ? payload : payload[(payload.startIndex + range.lowerBound)..<(payload.startIndex + range.upperBound)]
        case .damaged(let slot):
            logger.debug("block cache: dropping unreadable or damaged block", metadata: ["block": "\(key)"])
            if let slot { punchAndFree([slot]) }
            return nil
        case .reused:
            return nil
        }
    }

    /// Writes a block now (payload, then header, into a slot), evicting
    /// old blocks.
    public func write(_ key: Key, _ data: Data) {
        let cost = ChunkFiles.cost(ofLength: data.count)
        guard data.count <= blockSize, cost <= capacity else { return }
        guard let reservation = index.withLock({ $0.reserve(key, cost: cost) }) else { return }
        punchAndFree(reservation.victims)
        let checksum = BlockFile.checksum(data)
        guard let header = BlockFile.encodeHeader(key: key.stored, sequence: reservation.sequence, payloadLength: data.count, payloadChecksum: checksum),
            files.write(slot: reservation.slot, header: header, payload: data)
        else {
            logger.warning("block cache: cannot write block", metadata: ["block": "\(key)", "errno": "\(errno)"])
            punchAndFree([index.withLock { $0.writeFailed(reservation) }])
            return
        }
        // A shorter block than the slot held before: its old tail goes.
        let tailPunched = reservation.previousExtent > cost && files.punch(slot: reservation.slot, from: cost)
        let replaced = index.withLock {
            $0.published(key, reservation, cost: cost, length: data.count, checksum: checksum, tailPunched: tailPunched)
        }
        if let replaced { punchAndFree([replaced]) }
    }

    /// Queues a block for writing in the background; it is readable from
    /// memory at once.
    public func store(_ key: Key, _ data: Data) {
        store(blocks: [(key, 0..<data.count)], of: data)
    }

    /// Queues the blocks at `ranges` of one downloaded buffer for writing in
    /// the background, all readable from memory at once. The queue is
    /// charged the whole buffer (the blocks are slices of it and keep all
    /// of it alive until written), so `maxPendingBytes` bounds the memory
    /// it really holds. Never waits: a full queue does not cache the blocks
    /// (they are downloaded again when next read: a re-read streams just
    /// the missing ones, see `FileReader`) and counts them in
    /// `bucketfs_block_cache_dropped_total`.
    public func store(blocks: [(key: Key, range: Range<Int>)], of buffer: Data) {
        let cost = buffer.count
        let queued = queue.withLock { queue -> [(key: Key, data: Data)]? in
            let fresh = blocks.filter { queue.blocks[$0.key] == nil }
            guard !fresh.isEmpty else { return [] }
            guard queue.backlog.offered(cost) else { return nil }
            return fresh.map { key, range in
                let data = buffer[(buffer.startIndex + range.lowerBound)..<(buffer.startIndex + range.upperBound)]
                queue.blocks[key] = data
                return (key, data)
            }
        }
        guard let queued else {
            FileSystemMetrics.blockCacheDropped.increment(by: blocks.count)
            logger.debug("block cache: write queue full; not caching", metadata: ["blocks": "\(blocks.count)", "queued bytes": "\(maxPendingBytes)"])
            return
        }
        guard !queued.isEmpty else { return }
        writer.async { [self] in
            for (key, data) in queued {
                write(key, data)
                queue.withLock { _ = $0.blocks.removeValue(forKey: key) }
            }
            resume(queue.withLock { queue in queue.take(queue.backlog.written(cost)) })
        }
    }

    /// Returns once the background writer is less than `readsWaitAbove`
    /// bytes behind, or at once if it is not that far behind; a read calls
    /// it before it replies (`CacheWriteBacklog` says why). Ends early when
    /// the caller's task is cancelled, and after `longestWait` at most.
    public func waitForWriter() async {
        let id: UInt64? = queue.withLock { queue in
            guard queue.backlog.holdsReads else { return nil }
            defer { queue.nextWait += 1 }
            return queue.nextWait
        }
        guard let id else { return }
        let started = ContinuousClock.now
        var held = false
        await withTaskCancellationHandler {
            await withCheckedContinuation { (reader: CheckedContinuation<Void, Never>) in
                held = queue.withLock { queue -> Bool in
                    guard queue.backlog.readArrived(id) else { return false }
                    queue.waits[id] = (reader, nil)
                    return true
                }
                guard held else { return reader.resume() }
                let timer = Task { [self, longestWait] in
                    guard (try? await Task.sleep(for: longestWait)) != nil else { return }
                    resume(queue.withLock { queue in queue.take(queue.backlog.timedOut(id)) })
                }
                let ended = queue.withLock { queue -> Bool in
                    guard queue.waits[id] != nil else { return true }
                    queue.waits[id]?.timer = timer
                    return false
                }
                if ended { timer.cancel() }
                // Cancelled before the wait was recorded: the handler
                // below found nothing to end.
                if Task.isCancelled { endCancelledWait(id) }
            }
        } onCancel: {
            endCancelledWait(id)
        }
        if held {
            FileSystemMetrics.blockCacheWriteWaits.increment()
            FileSystemMetrics.blockCacheWriteWaitSeconds.increment(by: (ContinuousClock.now - started).seconds)
        }
    }

    private func endCancelledWait(_ id: UInt64) {
        resume(queue.withLock { queue in queue.backlog.cancelled(id) ? queue.take([id]) : [] })
    }

    /// Resumes the reads `waits` names (outside the lock), stopping their
    /// timers.
    private func resume(_ waits: [(reader: CheckedContinuation<Void, Never>, timer: Task<Void, Never>?)]) {
        for wait in waits {
            wait.timer?.cancel()
            wait.reader.resume()
        }
    }

    /// Waits until every queued block has been written (tests, shutdown).
    public func waitForPendingWrites() async {
        // The writer is serial: once this runs, every earlier write (and
        // the release of its memory) is done.
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            writer.async { done.resume() }
        }
    }

    /// The chunk file and offset of the slot holding `key` (tests,
    /// diagnostics); the payload starts `BlockFile.headerSize` after it.
    func location(of key: Key) -> (path: String, offset: Int64)? {
        index.withLock { $0.entries[key]?.slot }.map { files.location(ofSlot: $0) }
    }

    // MARK: - Slots

    /// Punches `slots` (evicted, replaced or damaged) and frees them.
    private func punchAndFree(_ slots: [Int]) {
        for slot in slots {
            let emptied = files.punch(slot: slot)
            index.withLock { $0.freed(slot, emptied: emptied) }
        }
    }

    /// The one-file-per-block folder an earlier version left: never read,
    /// removed in the background (it may hold thousands of files).
    private func removeOldLayout() {
        let old = directory + "/blocks"
        guard FileManager.default.fileExists(atPath: old) else { return }
        writer.async { [logger] in
            do {
                try FileManager.default.removeItem(atPath: old)
            } catch {
                logger.warning("block cache: cannot remove the old block folder", metadata: ["folder": "\(old)", "cause": "\(error)"])
            }
        }
    }
}

