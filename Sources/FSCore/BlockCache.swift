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
/// - Files live in `directory/blocks/xx/<hash>` (256 fan-out folders). A
///   block is written to a temporary file and renamed into place, so a
///   concurrent reader sees a whole block or none.
/// - Least-recently-used blocks are deleted to stay under `capacity`
///   bytes and `maxBlocks` blocks: small objects make small blocks, and
///   each costs memory in the index whatever its size. The
///   index is rebuilt from the directory at start (oldest modification
///   first), so the cache persists across mounts. One cache directory
///   belongs to one process at a time.
/// - A file whose header, key, length or checksum does not match is a miss
///   and is deleted. The checksum is verified once per file per process
///   (whole-block read); later reads fetch only the bytes asked for.
/// - `store(_:_:)` hands a block to a background write; until it lands the
///   block is served from memory, so a read right after a download never
///   misses.
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

        /// What the file stores to prove whose block it is.
        var stored: String { "\(generation)\n\(index)\n\(objectName)" }
        var fileName: String { BlockFile.fileName(for: stored) }
        public var description: String { "\(objectName)#\(generation)[\(index)]" }
    }

    private struct Index: Sendable {
        var lru = LRUList<String>()
        var sizes: [String: Int64] = [:]
        var verified: Set<String> = []
        var pending: [String: (key: Key, data: Data)] = [:]
        var pendingBytes = 0
        var used: Int64 = 0
    }

    public let directory: String
    public let capacity: Int64
    /// The most blocks the index holds (a few hundred bytes of memory each):
    /// `defaultMaxBlocks`, or as many full blocks as fit in `capacity` if
    /// that is more, unless the caller sets it (tests).
    public let maxBlocks: Int
    public let blockSize: Int
    /// Memory queued background writes may hold; beyond it `store` drops
    /// blocks (only a missed optimisation) rather than let a disk slower
    /// than the network grow memory without bound.
    public let maxPendingBytes: Int
    private let logger: Logger
    // Leaf lock; file I/O happens outside it.
    private let index = OrderedLock("block cache index", Index())
    /// Where queued blocks are written, one after another, off the
    /// cooperative pool: a write blocks in open, write and rename, and the
    /// pool has one thread per core.
    private let writer: DispatchQueue

    /// `writer` is the serial queue background writes run on (tests pass
    /// one they suspend, to hold writes queued).
    public init(
        directory: String, capacity: Int64, blockSize: Int = 1 << 20, maxBlocks: Int? = nil, maxPendingBytes: Int = 32 << 20,
        writer: DispatchQueue = DispatchQueue(label: "bucketfs.block-cache.writes"),
        logger: Logger = Logger(label: "bucketfs.cache")
    ) throws {
        self.directory = directory
        self.capacity = capacity
        self.maxBlocks = max(1, maxBlocks ?? max(Self.defaultMaxBlocks, Int(capacity / Int64(max(1, blockSize)))))
        self.blockSize = blockSize
        self.maxPendingBytes = maxPendingBytes
        self.writer = writer
        self.logger = logger
        try FileManager.default.createDirectory(atPath: directory + "/blocks", withIntermediateDirectories: true)
        let bound = self.maxBlocks
        let victims = index.withLock { index in
            index = Self.scan(directory + "/blocks")
            return Self.evict(&index, capacity: capacity, maxBlocks: bound, keep: nil)
        }
        for name in victims { unlink(path(of: name)) }
    }

    /// The block count the index is bounded by when `capacity` holds fewer
    /// full blocks: 16 Ki blocks, room for sixteen times as many small
    /// blocks as the default 1 GiB holds full ones.
    public static let defaultMaxBlocks = 16_384

    /// Bytes the cached blocks occupy (headers included).
    public var usedBytes: Int64 { index.withLock { $0.used } }
    public var blockCount: Int { index.withLock { $0.sizes.count } }

    public func contains(_ key: Key) -> Bool {
        let name = key.fileName
        return index.withLock { $0.pending[name]?.key == key || $0.sizes[name] != nil }
    }

    /// Bytes `range` of block `key`, whose full length is `blockLength`;
    /// nil on a miss. Counts as a use for LRU.
    public func read(_ key: Key, range: Range<Int>, blockLength: Int) -> Data? {
        precondition(range.lowerBound >= 0 && range.upperBound <= blockLength)
        let name = key.fileName
        enum Look { case memory(Data), file(verified: Bool), miss }
        let look: Look = index.withLock { index in
            if let pending = index.pending[name], pending.key == key { return .memory(pending.data) }
            guard index.sizes[name] != nil else { return .miss }
            index.lru.touch(name)
            return .file(verified: index.verified.contains(name))
        }
        let found: Data?
        switch look {
        case .miss:
            found = nil
        case .memory(let data):
            found = data.count == blockLength ? data[(data.startIndex + range.lowerBound)..<(data.startIndex + range.upperBound)] : nil
        case .file(let verified):
            found = readFile(name, key: key, range: range, blockLength: blockLength, verified: verified)
            if found == nil {
                logger.debug("block cache: dropping unreadable or damaged block", metadata: ["block": "\(key)"])
                remove(name)
            }
        }
        (found == nil ? FileSystemMetrics.blockCacheMisses : FileSystemMetrics.blockCacheHits).increment()
        return found
    }

    /// Writes a block now (temp file + rename), evicting old blocks.
    public func write(_ key: Key, _ data: Data) {
        let name = key.fileName
        let header = BlockFile.encodeHeader(key: key.stored, payload: data)
        let size = Int64(header.count + data.count)
        guard size <= capacity else { return }
        let folder = directory + "/blocks/" + name.prefix(2)
        let temporary = "\(folder)/\(name).\(UInt64.random(in: 0...UInt64.max)).tmp"
        mkdir(folder, 0o700)
        guard BlockFile.write(path: temporary, header: header, payload: data),
            rename(temporary, path(of: name)) == 0
        else {
            logger.warning("block cache: cannot write block", metadata: ["block": "\(key)", "errno": "\(errno)"])
            unlink(temporary)
            return
        }
        let victims = index.withLock { index in
            if let old = index.sizes[name] { index.used -= old }
            index.sizes[name] = size
            index.used += size
            index.verified.insert(name)
            index.lru.touch(name)
            return Self.evict(&index, capacity: capacity, maxBlocks: maxBlocks, keep: name)
        }
        for victim in victims { unlink(path(of: victim)) }
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
    /// it really holds. A full queue drops the blocks: they are downloaded
    /// again when next read (a re-read streams just the missing ones,
    /// see `FileReader`), and memory stays bounded when the disk is slower
    /// than the network.
    public func store(blocks: [(key: Key, range: Range<Int>)], of buffer: Data) {
        let cost = buffer.count
        let queued = index.withLock { index -> [(key: Key, data: Data)] in
            guard index.pendingBytes + cost <= maxPendingBytes else { return [] }
            var queued: [(key: Key, data: Data)] = []
            for (key, range) in blocks where index.pending[key.fileName] == nil {
                let data = buffer[(buffer.startIndex + range.lowerBound)..<(buffer.startIndex + range.upperBound)]
                index.pending[key.fileName] = (key, data)
                queued.append((key, data))
            }
            if !queued.isEmpty { index.pendingBytes += cost }
            return queued
        }
        guard !queued.isEmpty else {
            logger.trace("block cache: write queue full or blocks queued; not caching", metadata: ["blocks": "\(blocks.count)"])
            return
        }
        writer.async { [self] in
            for (key, data) in queued {
                write(key, data)
                index.withLock { _ = $0.pending.removeValue(forKey: key.fileName) }
            }
            index.withLock { $0.pendingBytes -= cost }
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

    // MARK: - Files

    private func path(of name: String) -> String {
        "\(directory)/blocks/\(name.prefix(2))/\(name)"
    }

    private func readFile(_ name: String, key: Key, range: Range<Int>, blockLength: Int, verified: Bool) -> Data? {
        let fd = open(path(of: name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        guard let header = BlockFile.readHeader(fd, key: key.stored), header.payloadLength == Int64(blockLength) else { return nil }
        if verified {
            return BlockFile.readExactly(fd, count: range.count, at: header.payloadOffset + Int64(range.lowerBound))
        }
        guard let payload = BlockFile.readExactly(fd, count: blockLength, at: header.payloadOffset),
            BlockFile.checksum(payload) == header.checksum
        else { return nil }
        index.withLock { _ = $0.verified.insert(name) }
        // A slice, not a copy: a whole-block read returns the payload as is.
        return range.count == blockLength ? payload : payload[(payload.startIndex + range.lowerBound)..<(payload.startIndex + range.upperBound)]
    }

    private func remove(_ name: String) {
        let known = index.withLock { index -> Bool in
            guard let size = index.sizes.removeValue(forKey: name) else { return false }
            index.used -= size
            index.lru.remove(name)
            index.verified.remove(name)
            return true
        }
        if known { unlink(path(of: name)) }
    }

    /// Removes least-recent entries until under `capacity` bytes and
    /// `maxBlocks` blocks; returns their names for the caller to unlink
    /// outside the lock. A reader that has the file open keeps reading it
    /// (POSIX unlink semantics).
    private static func evict(_ index: inout Index, capacity: Int64, maxBlocks: Int, keep: String?) -> [String] {
        var victims: [String] = []
        while index.used > capacity || index.sizes.count > maxBlocks, let oldest = index.lru.leastRecent, oldest != keep {
            index.lru.remove(oldest)
            index.used -= index.sizes.removeValue(forKey: oldest) ?? 0
            index.verified.remove(oldest)
            victims.append(oldest)
        }
        return victims
    }

    private static func scan(_ root: String) -> Index {
        var found: [(name: String, size: Int64, modified: Date)] = []
        let manager = FileManager.default
        for folder in (try? manager.contentsOfDirectory(atPath: root)) ?? [] {
            let folderPath = root + "/" + folder
            for file in (try? manager.contentsOfDirectory(atPath: folderPath)) ?? [] {
                let filePath = folderPath + "/" + file
                if file.hasSuffix(".tmp") {
                    unlink(filePath)  // a write interrupted by a crash
                    continue
                }
                guard let attributes = try? manager.attributesOfItem(atPath: filePath),
                    let size = (attributes[.size] as? NSNumber)?.int64Value
                else { continue }
                found.append((file, size, attributes[.modificationDate] as? Date ?? .distantPast))
            }
        }
        var index = Index()
        for entry in found.sorted(by: { $0.modified < $1.modified }) {
            index.lru.touch(entry.name)
            index.sizes[entry.name] = entry.size
            index.used += entry.size
        }
        return index
    }
}
