import DequeModule

extension MetadataCache {
    /// What is known about each path, and until when: the one table of
    /// object metadata, which the kept listings name into.
    ///
    /// Filled by listings (every item carries full metadata, so readdirplus
    /// and the lookups after `ls -l` cost no per-object request), by
    /// lookups' probes, by stats and by this mount's changes. Entries are
    /// trusted for `ttl` (positive) or `negativeTTL` (absent). A TTL of
    /// zero disables caching of that kind.
    ///
    /// An entry a kept listing names is pinned (`pin`): it stays, fresh or
    /// not, while that listing is kept, so the listing can always give its
    /// entries' metadata. The others have the room the pinned ones leave of
    /// `capacity` (at least a tenth of it, so a stat made while listings
    /// fill their budget is kept), so all together stay within 1.1 ×
    /// `capacity`: a walk of a million names holds its listings' entries
    /// and few others. Unpinned entries are dropped once expired as new
    /// ones arrive; when full, expired entries go first, then the ones
    /// closest to expiry. Finding those costs O(1) per eviction (a walk of
    /// millions of names evicts all the time): each TTL class keeps its
    /// paths in order of insertion, which within a class is the order of
    /// expiry.
    struct Entries: Sendable {
        private struct Entry: Sendable {
            var node: Node
            var expiry: Duration
            /// Which insertion made it (matches its `Record`).
            var stamp: UInt64
            /// How many kept listings name it.
            var pins: Int
        }

        /// One insertion, in its class's queue. Stale once its path was
        /// inserted again or removed (the entry's stamp differs); stale
        /// records are skipped, and dropped when they outnumber the live
        /// ones. A pinned entry's record is dropped from the queue; it is
        /// queued again when its last pin goes.
        private struct Record: Sendable {
            let path: String
            let stamp: UInt64
            let expiry: Duration
        }

        let ttl: Duration
        let negativeTTL: Duration
        let capacity: Int
        private var entries: [String: Entry] = [:]
        /// Present and absent entries have a TTL each: one queue per TTL.
        private var presentOrder = Deque<Record>()
        private var absentOrder = Deque<Record>()
        private var lastStamp: UInt64 = 0
        /// Entries with a pin (the listing cache's entry budget bounds
        /// them; they shrink the room of the others).
        private(set) var pinnedCount = 0

        /// How many unpinned entries may stay: what the pinned leave of
        /// `capacity`, but at least a tenth of it.
        private var unpinnedCapacity: Int { max(capacity - pinnedCount, capacity / 10, 1) }

        init(ttl: Duration, negativeTTL: Duration, capacity: Int) {
            self.ttl = ttl
            self.negativeTTL = negativeTTL
            self.capacity = max(1, capacity)
        }

        var count: Int { entries.count }

        /// Room for `more` entries at once (a listing inserts all its
        /// entries): one allocation instead of a rehash at every doubling.
        mutating func reserveCapacity(forMore more: Int) {
            entries.reserveCapacity(min(capacity, entries.count + more))
        }

        /// Records in the eviction queues, stale ones included (bounded by
        /// about twice `count`).
        var queuedRecords: Int { presentOrder.count + absentOrder.count }

        /// The node for `path` if still fresh at `now`.
        func lookup(_ path: String, now: Duration) -> Node? {
            guard let entry = entries[path], now < entry.expiry else { return nil }
            return entry.node
        }

        /// The node for `path`, fresh or not (a kept listing's entries, as
        /// old as the listing).
        func stored(_ path: String) -> Node? { entries[path]?.node }

        func isPinned(_ path: String) -> Bool { (entries[path]?.pins ?? 0) > 0 }

        mutating func insert(_ path: String, _ node: Node, now: Duration, source: Source = .read) {
            let lifetime = node == .absent ? negativeTTL : ttl
            guard lifetime > .zero else {
                remove(path)
                return
            }
            var node = node
            // A listing may not know a directory's placeholder (v0), or know
            // an older version of it (read before a chmod here); keep newer
            // metadata learnt earlier while it is fresh.
            if source == .read, case .directory(let listed) = node, case .directory(let known?)? = lookup(path, now: now),
                listed.map({ ($0.generation, $0.metageneration) < (known.generation, known.metageneration) }) ?? true
            {
                node = .directory(placeholder: known)
            }
            lastStamp += 1
            let record = Record(path: path, stamp: lastStamp, expiry: now + lifetime)
            let pins = entries[path]?.pins ?? 0
            entries[path] = Entry(node: node, expiry: record.expiry, stamp: record.stamp, pins: pins)
            if pins == 0 { enqueue(record, absent: node == .absent) }
            dropExpiredFronts(now: now)
            if entries.count - pinnedCount > unpinnedCapacity { shrink() }
            if presentOrder.count + absentOrder.count > 2 * entries.count + 1024 { dropStaleRecords() }
        }

        /// A kept listing names `path` (whose entry it inserted first).
        mutating func pin(_ path: String) {
            // Changed in place: one lookup, no copy of the entry.
            guard let index = entries.index(forKey: path) else { return }
            entries.values[index].pins += 1
            if entries.values[index].pins == 1 { pinnedCount += 1 }
        }

        /// A kept listing no longer names `path`: once no listing does, it
        /// is evicted and expires like any other entry.
        mutating func unpin(_ path: String) {
            // Changed in place, as `pin`: one lookup, no copy of the entry.
            guard let index = entries.index(forKey: path), entries.values[index].pins > 0 else { return }
            entries.values[index].pins -= 1
            guard entries.values[index].pins == 0 else { return }
            pinnedCount -= 1
            lastStamp += 1
            entries.values[index].stamp = lastStamp
            let entry = entries.values[index]
            requeue(Record(path: path, stamp: entry.stamp, expiry: entry.expiry), absent: entry.node == .absent)
        }

        mutating func remove(_ path: String) {
            guard let old = entries.removeValue(forKey: path) else { return }
            if old.pins > 0 { pinnedCount -= 1 }
        }

        /// Forgets everything; returns the paths that were known to be
        /// absent, whose negative entries the kernel may hold too.
        mutating func removeAll() -> [String] {
            let absent = entries.compactMap { path, entry in entry.node == .absent ? path : nil }
            entries.removeAll()
            presentOrder.removeAll()
            absentOrder.removeAll()
            pinnedCount = 0
            return absent
        }

        /// Forgets `path` and every path below it (a directory rename).
        mutating func remove(tree path: String) {
            let below = path + "/"
            entries = entries.filter { key, entry in
                let gone = key == path || key.hasPrefix(below)
                if gone && entry.pins > 0 { pinnedCount -= 1 }
                return !gone
            }
        }

        private mutating func enqueue(_ record: Record, absent: Bool) {
            if absent { absentOrder.append(record) } else { presentOrder.append(record) }
        }

        /// Queues the record of an entry no longer pinned: in front when it
        /// expires first (a listing's entries are usually older than the
        /// queue), so expiry and eviction find it in order.
        private mutating func requeue(_ record: Record, absent: Bool) {
            func place(_ queue: inout Deque<Record>) {
                if let first = queue.first, first.expiry < record.expiry { queue.append(record) } else { queue.prepend(record) }
            }
            if absent { place(&absentOrder) } else { place(&presentOrder) }
        }

        /// Evicts unpinned entries down to 90% of their room, earliest
        /// expiry first (expired entries have the earliest), from whichever
        /// queue's live front expires first.
        private mutating func shrink() {
            let target = unpinnedCapacity * 9 / 10
            while entries.count - pinnedCount > target {
                dropStaleFronts()
                let fromPresent: Bool
                switch (presentOrder.first, absentOrder.first) {
                case (let present?, let absent?): fromPresent = present.expiry <= absent.expiry
                case (_?, nil): fromPresent = true
                case (nil, _?): fromPresent = false
                case (nil, nil): return
                }
                let victim = fromPresent ? presentOrder.removeFirst() : absentOrder.removeFirst()
                if !isPinned(victim.path) { entries[victim.path] = nil }
            }
        }

        private func isLive(_ record: Record) -> Bool { entries[record.path]?.stamp == record.stamp }

        /// Drops the entries that expired by `now` from the front of each
        /// queue (in expiry order, so this stops at the first fresh one): an
        /// expired entry answers no lookup, and a mount that sees a stream
        /// of new names (creates and deletes) would otherwise keep every one
        /// of them until `capacity` fills. O(1) per entry dropped. A pinned
        /// one stays for its listing (queued again when unpinned).
        private mutating func dropExpiredFronts(now: Duration) {
            while let first = presentOrder.first, first.expiry <= now || !isLive(first) {
                presentOrder.removeFirst()
                if isLive(first), !isPinned(first.path) { entries[first.path] = nil }
            }
            while let first = absentOrder.first, first.expiry <= now || !isLive(first) {
                absentOrder.removeFirst()
                if isLive(first), !isPinned(first.path) { entries[first.path] = nil }
            }
        }

        private mutating func dropStaleFronts() {
            while let first = presentOrder.first, !isLive(first) { presentOrder.removeFirst() }
            while let first = absentOrder.first, !isLive(first) { absentOrder.removeFirst() }
        }

        private mutating func dropStaleRecords() {
            presentOrder = Deque(presentOrder.filter(isLive))
            absentOrder = Deque(absentOrder.filter(isLive))
        }
    }
}
