/// The block cache's in-memory index of its slots: which block each slot
/// holds, which slots are free, what they cost on disk, and the recency
/// order eviction follows. A value kept under the cache's lock; it does
/// no I/O, and its events return the slots the owner must write or
/// punch afterwards.
///
/// Invariants: a slot is in exactly one of `entries` (published), `free`,
/// or in flight (taken by a writer or being punched; in neither);
/// `used` is the sum of `extents`, the disk bytes each slot holds, of
/// which `reclaiming` are in slots being punched (counted as gone when
/// deciding what to evict, so concurrent writers do not evict twice for
/// the same room); every
/// slot that leaves `entries` gets a new `versions` value, so a reader
/// that read a slot without the lock can tell whether it was reused
/// meanwhile.
struct BlockCacheIndex: Sendable {
    struct Entry: Sendable {
        var slot: Int
        var length: Int
        var checksum: UInt64
        /// The payload was checked against `checksum` in this process (or
        /// written by it): later reads fetch just the bytes asked for.
        var verified: Bool
    }

    /// A slot taken for writing a block.
    struct Reservation: Sendable {
        var slot: Int
        var sequence: UInt64
        /// Disk bytes the slot held before (its old tail is punched when
        /// the new block is shorter).
        var previousExtent: Int64
        /// Evicted slots to punch, then `freed`.
        var victims: [Int]
    }

    let capacity: Int64
    let maxBlocks: Int
    private(set) var entries: [BlockCache.Key: Entry] = [:]
    private var lru = LRUList<BlockCache.Key>()
    private var free: [Int] = []
    private var extents: [Int64] = []
    private var versions: [UInt64] = []
    private(set) var used: Int64 = 0
    private var reclaiming: Int64 = 0
    /// The newest sequence number given to a write; slots found at start
    /// are ordered by theirs (oldest first), so recency survives restarts
    /// at the granularity of writes.
    private var sequence: UInt64 = 0

    init(capacity: Int64, maxBlocks: Int) {
        self.capacity = capacity
        self.maxBlocks = maxBlocks
    }

    var slotCount: Int { extents.count }

    /// Rebuilds the index from a scan: `slotCount` slots exist, `found`
    /// hold blocks (a key found twice keeps its newer slot). Returns the
    /// slots to punch: duplicates, and what exceeds the bounds.
    mutating func load(found: [(slot: Int, key: BlockCache.Key, header: BlockFile.Header)], slotCount: Int) -> [Int] {
        extents = Array(repeating: 0, count: slotCount)
        versions = Array(repeating: 0, count: slotCount)
        var holding = Set<Int>()
        var victims: [Int] = []
        for item in found.sorted(by: { $0.header.sequence < $1.header.sequence }) {
            if entries[item.key] != nil { victims.append(evict(item.key)) }
            extents[item.slot] = ChunkFiles.cost(ofLength: item.header.payloadLength)
            used += extents[item.slot]
            entries[item.key] = Entry(slot: item.slot, length: item.header.payloadLength, checksum: item.header.checksum, verified: false)
            lru.touch(item.key)
            holding.insert(item.slot)
            sequence = max(sequence, item.header.sequence)
        }
        while used - reclaiming > capacity || entries.count > maxBlocks, let oldest = lru.leastRecent {
            victims.append(evict(oldest))
        }
        // Lowest slots last: they are reused first, so the files fill
        // from the front.
        free = (0..<slotCount).filter { !holding.contains($0) }.reversed()
        return victims
    }

    /// The entry of `key`, counted as a use; nil on a miss.
    mutating func lookUp(_ key: BlockCache.Key) -> (entry: Entry, version: UInt64)? {
        guard let entry = entries[key] else { return nil }
        lru.touch(key)
        return (entry, versions[entry.slot])
    }

    /// Whether `slot` still holds what it held at `version`.
    func isUnchanged(_ slot: Int, since version: UInt64) -> Bool {
        versions[slot] == version
    }

    mutating func markVerified(_ key: BlockCache.Key, slot: Int) {
        if entries[key]?.slot == slot { entries[key]?.verified = true }
    }

    /// Takes a slot for a block of `cost` disk bytes: the slot `key` is in
    /// now, else the least recent block's when the bounds are reached (its
    /// pages are overwritten, the cheapest write), else a free slot, else
    /// a new one. Evicts more blocks until `cost` fits. Nil when nothing
    /// can be taken (every slot is in flight).
    mutating func reserve(_ key: BlockCache.Key, cost: Int64) -> Reservation? {
        var slot: Int?
        if entries[key] != nil {
            slot = detach(key)
        } else if used - reclaiming + cost > capacity || entries.count + 1 > maxBlocks, let oldest = lru.leastRecent {
            slot = detach(oldest)
        } else if let reused = free.popLast() {
            slot = reused
        } else if extents.count < maxBlocks {
            slot = extents.count
            extents.append(0)
            versions.append(0)
        } else if let oldest = lru.leastRecent {
            slot = detach(oldest)
        }
        guard let slot else { return nil }
        let previous = extents[slot]
        // Counted at its new size from now on; `writeFailed` undoes it.
        let grown = max(cost, previous)
        used += grown - previous
        extents[slot] = grown
        var victims: [Int] = []
        while used - reclaiming > capacity || entries.count + 1 > maxBlocks, let oldest = lru.leastRecent {
            victims.append(evict(oldest))
        }
        sequence += 1
        return Reservation(slot: slot, sequence: sequence, previousExtent: previous, victims: victims)
    }

    /// The write into `reservation`'s slot landed; its tail beyond `cost`
    /// was punched if `tailPunched`. Returns a slot the key held
    /// before (written meanwhile by another writer), to punch and free.
    mutating func published(_ key: BlockCache.Key, _ reservation: Reservation, cost: Int64, length: Int, checksum: UInt64, tailPunched: Bool) -> Int? {
        if tailPunched { shrink(reservation.slot, to: cost) }
        let replaced = entries[key] != nil ? evict(key) : nil
        entries[key] = Entry(slot: reservation.slot, length: length, checksum: checksum, verified: true)
        lru.touch(key)
        return replaced
    }

    /// The write failed: returns the slot, to punch and free.
    mutating func writeFailed(_ reservation: Reservation) -> Int {
        versions[reservation.slot] &+= 1
        reclaiming += extents[reservation.slot]
        return reservation.slot
    }

    /// Drops `key` (its slot was damaged); returns the slot to punch.
    mutating func remove(_ key: BlockCache.Key) -> Int? {
        entries[key] != nil ? evict(key) : nil
    }

    /// `slot` was punched (`emptied`) or could not be (its bytes stay
    /// counted until it is reused): free either way.
    mutating func freed(_ slot: Int, emptied: Bool) {
        reclaiming -= extents[slot]
        if emptied { shrink(slot, to: 0) }
        free.append(slot)
    }

    // MARK: - Internals

    /// Unpublishes `key`, leaving its slot in flight.
    private mutating func detach(_ key: BlockCache.Key) -> Int {
        let entry = entries.removeValue(forKey: key)!
        lru.remove(key)
        versions[entry.slot] &+= 1
        return entry.slot
    }

    /// Unpublishes `key` for its slot to be punched.
    private mutating func evict(_ key: BlockCache.Key) -> Int {
        let slot = detach(key)
        reclaiming += extents[slot]
        return slot
    }

    private mutating func shrink(_ slot: Int, to extent: Int64) {
        guard extents[slot] > extent else { return }
        used -= extents[slot] - extent
        extents[slot] = extent
    }
}
