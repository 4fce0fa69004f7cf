import DequeModule

/// What is known about each path, and until when.
///
/// Filled by listings (every item carries full metadata, so readdirplus
/// and the lookups after `ls -l` cost no per-object request), by lookups'
/// probes and by stats. Entries are trusted for `ttl` (positive) or
/// `negativeTTL` (absent). A TTL of zero disables caching of that kind.
/// Bounded by `capacity` names, and expired entries are dropped as new
/// ones arrive; when full, expired entries go first, then the ones
/// closest to expiry. Finding those costs O(1) per eviction (a walk of
/// millions of names evicts all the time): each TTL class keeps its paths
/// in order of insertion, which within a class is the order of expiry.
struct StatCache: Sendable {
    enum Node: Sendable, Equatable {
        case file(ObjectInfo)
        /// `placeholder` is the `dir/` object when its metadata is known.
        case directory(placeholder: ObjectInfo?)
        case absent
    }

    private struct Entry: Sendable {
        var node: Node
        var expiry: Duration
        /// Which insertion made it (matches its `Record`).
        var stamp: UInt64
    }

    /// One insertion, in its class's queue. Stale once its path was
    /// inserted again or removed (the entry's stamp differs); stale records
    /// are skipped, and dropped when they outnumber the live ones.
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

    init(ttl: Duration, negativeTTL: Duration, capacity: Int) {
        self.ttl = ttl
        self.negativeTTL = negativeTTL
        self.capacity = max(1, capacity)
    }

    var count: Int { entries.count }

    /// Room for `more` entries at once (opendir inserts a whole listing):
    /// one allocation instead of a rehash at every doubling.
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

    /// Where an inserted node's metadata comes from.
    enum Source: Sendable {
        /// Read from the store (a listing, a stat, a probe), perhaps before
        /// a change this mount made since: a directory keeps placeholder
        /// metadata learnt earlier that is newer, or that a listing lacks.
        case read
        /// The store's answer to a change this mount made (mkdir, chmod,
        /// setxattr): what the object is now. It replaces what was known
        /// whatever versions it carries: a server may leave them out
        /// (fake-gcs-server's PATCH answer has no metageneration) or not
        /// count them, and an accepted change must show at once.
        case changedHere
    }

    mutating func insert(_ path: String, _ node: Node, now: Duration, source: Source = .read) {
        let lifetime = node == .absent ? negativeTTL : ttl
        guard lifetime > .zero else {
            entries[path] = nil
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
        entries[path] = Entry(node: node, expiry: record.expiry, stamp: record.stamp)
        if node == .absent { absentOrder.append(record) } else { presentOrder.append(record) }
        dropExpiredFronts(now: now)
        if entries.count > capacity { shrink() }
        if presentOrder.count + absentOrder.count > 2 * entries.count + 1024 { dropStaleRecords() }
    }

    mutating func invalidate(_ path: String) {
        entries[path] = nil
    }

    /// Forgets everything (an operator asked to drop the caches); returns
    /// the paths that were known to be absent, whose negative entries the
    /// kernel may hold too.
    mutating func removeAll() -> [String] {
        let absent = entries.compactMap { path, entry in entry.node == .absent ? path : nil }
        entries.removeAll()
        presentOrder.removeAll()
        absentOrder.removeAll()
        return absent
    }

    /// Forgets `path` and every path below it (a directory rename).
    mutating func invalidate(tree path: String) {
        let below = path + "/"
        entries = entries.filter { $0.key != path && !$0.key.hasPrefix(below) }
    }

    /// Evicts down to 90% of capacity, earliest expiry first (expired
    /// entries have the earliest), from whichever queue's live front
    /// expires first.
    private mutating func shrink() {
        let target = capacity * 9 / 10
        while entries.count > target {
            dropStaleFronts()
            let fromPresent: Bool
            switch (presentOrder.first, absentOrder.first) {
            case (let present?, let absent?): fromPresent = present.expiry <= absent.expiry
            case (_?, nil): fromPresent = true
            case (nil, _?): fromPresent = false
            case (nil, nil): return
            }
            let victim = fromPresent ? presentOrder.removeFirst() : absentOrder.removeFirst()
            entries[victim.path] = nil
        }
    }

    private func isLive(_ record: Record) -> Bool { entries[record.path]?.stamp == record.stamp }

    /// Drops the entries that expired by `now` from the front of each
    /// queue (in expiry order, so this stops at the first fresh one): an
    /// expired entry answers no lookup, and a mount that sees a stream of
    /// new names (creates and deletes) would otherwise keep every one of
    /// them until `capacity` fills. O(1) per entry dropped.
    private mutating func dropExpiredFronts(now: Duration) {
        while let first = presentOrder.first, first.expiry <= now || !isLive(first) {
            presentOrder.removeFirst()
            if isLive(first) { entries[first.path] = nil }
        }
        while let first = absentOrder.first, first.expiry <= now || !isLive(first) {
            absentOrder.removeFirst()
            if isLive(first) { entries[first.path] = nil }
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
