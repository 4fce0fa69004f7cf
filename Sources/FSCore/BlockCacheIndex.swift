/// The block cache's in-memory index of its slots: which block each slot
/// holds, which slots are free, what they cost on disk, and the recency
/// order eviction follows. A value kept under the cache's lock; it does
/// no I/O, and its events return the slots the owner must write or
/// punch afterwards.
///
/// Invariants: a slot is in exactly one of `entries` (published), `free`,
/// `held` (unpublished while readers still had it pinned), or in flight
/// (taken by a writer or being punched; in none of them); a pinned slot
/// is in `entries` or `held`, never written or punched: readers use its
/// bytes in place (`ChunkMappings`);
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
    /// Readers using each slot's bytes in place, by slot.
    private var pins: [Int: Int] = [:]
    /// Slots that left `entries` while pinned: their last reader's
    /// `unpin` hands them on to be punched and freed.
    private var held: Set<Int> = []
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
            if entries[item.key] != nil, let slot = evict(item.key) { victims.append(slot) }
            extents[item.slot] = ChunkFiles.cost(ofLength: item.header.payloadLength)
            used += extents[item.slot]
            entries[item.key] = Entry(slot: item.slot, length: item.header.payloadLength, checksum: item.header.checksum, verified: false)
            lru.touch(item.key)
            holding.insert(item.slot)
            sequence = max(sequence, item.header.sequence)
        }
        while used - reclaiming > capacity || entries.count > maxBlocks, let oldest = lru.leastRecent {
            if let slot = evict(oldest) { victims.append(slot) }
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

    /// The entry of `key`, counted as a use, with its slot pinned: nothing
    /// rewrites or punches the slot until `unpin`. Nil on a miss.
    mutating func lookUpPinned(_ key: BlockCache.Key) -> Entry? {
        guard let entry = entries[key] else { return nil }
        lru.touch(key)
        pins[entry.slot, default: 0] += 1
        return entry
    }

    /// A reader is done with `slot`'s bytes. Returns the slot, to punch and
    /// free, when it left `entries` while pinned and this was its last
    /// reader.
    mutating func unpin(_ slot: Int) -> Int? {
        guard let count = pins[slot] else { preconditionFailure("slot \(slot) unpinned more often than pinned") }
        guard count == 1 else {
            pins[slot] = count - 1
            return nil
        }
        pins[slot] = nil
        return held.remove(slot)
    }

    func isPinned(_ slot: Int) -> Bool { pins[slot] != nil }

    /// Takes a slot for a block of `cost` disk bytes: the slot `key` is in
    /// now, else the least recent block's when the bounds are reached (its
    /// pages are overwritten, the cheapest write), else a free slot, else
    /// a new one. Evicts more blocks until `cost` fits. Nil when nothing
    /// can be taken (every slot is in flight or pinned). A pinned slot is
    /// never taken: its block is evicted instead, its slot held.
    mutating func reserve(_ key: BlockCache.Key, cost: Int64) -> Reservation? {
        var slot: Int?
        if let entry = entries[key], !isPinned(entry.slot) {
            slot = detach(key)
        } else if used - reclaiming + cost > capacity || entries.count + 1 > maxBlocks, let oldest = takeLeastRecent() {
            slot = oldest
        } else if let reused = free.popLast() {
            slot = reused
        } else if extents.count < maxBlocks {
            slot = extents.count
            extents.append(0)
            versions.append(0)
        } else {
            slot = takeLeastRecent()
        }
        guard let slot else { return nil }
        let previous = extents[slot]
        // Counted at its new size from now on; `writeFailed` undoes it.
        let grown = max(cost, previous)
        used += grown - previous
        extents[slot] = grown
        var victims: [Int] = []
        while used - reclaiming > capacity || entries.count + 1 > maxBlocks, let oldest = lru.leastRecent {
            if let victim = evict(oldest) { victims.append(victim) }
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

    /// Drops `key` (its slot was damaged); returns the slot to punch, nil
    /// if there is none or readers hold it (`unpin` returns it then).
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

    /// Unpublishes `key` for its slot to be punched: returns the slot, or
    /// nil when it is pinned (held until its last reader is done).
    private mutating func evict(_ key: BlockCache.Key) -> Int? {
        let slot = detach(key)
        reclaiming += extents[slot]
        guard !isPinned(slot) else {
            held.insert(slot)
            return nil
        }
        return slot
    }

    /// The least recent block's slot, unpublished for a writer; blocks
    /// before it whose slots are pinned are evicted on the way. Nil when
    /// no block is left.
    private mutating func takeLeastRecent() -> Int? {
        while let oldest = lru.leastRecent {
            guard let entry = entries[oldest], isPinned(entry.slot) else { return detach(oldest) }
            _ = evict(oldest)
        }
        return nil
    }

    private mutating func shrink(_ slot: Int, to extent: Int64) {
        guard extents[slot] > extent else { return }
        used -= extents[slot] - extent
        extents[slot] = extent
    }
}
