/// What is known about each path, and until when.
///
/// Filled by listings (every item carries full metadata, so readdirplus
/// and the lookups after `ls -l` cost no per-object request), by lookups'
/// probes and by stats. Entries are trusted for `ttl` (positive) or
/// `negativeTTL` (absent). A TTL of zero disables caching of that kind.
/// Bounded by `capacity` names: expired entries go first, then the ones
/// closest to expiry.
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
    }

    let ttl: Duration
    let negativeTTL: Duration
    let capacity: Int
    private var entries: [String: Entry] = [:]

    init(ttl: Duration, negativeTTL: Duration, capacity: Int) {
        self.ttl = ttl
        self.negativeTTL = negativeTTL
        self.capacity = max(1, capacity)
    }

    var count: Int { entries.count }

    /// The node for `path` if still fresh at `now`.
    func lookup(_ path: String, now: Duration) -> Node? {
        guard let entry = entries[path], now < entry.expiry else { return nil }
        return entry.node
    }

    mutating func insert(_ path: String, _ node: Node, now: Duration) {
        let lifetime = node == .absent ? negativeTTL : ttl
        guard lifetime > .zero else {
            entries[path] = nil
            return
        }
        var node = node
        // A listing knows a directory exists but not its placeholder's
        // metadata; keep metadata learnt earlier while it is fresh.
        if case .directory(nil) = node, case .directory(let known?)? = lookup(path, now: now) {
            node = .directory(placeholder: known)
        }
        entries[path] = Entry(node: node, expiry: now + lifetime)
        if entries.count > capacity { shrink(now: now) }
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
        return absent
    }

    /// Forgets `path` and every path below it (a directory rename).
    mutating func invalidate(tree path: String) {
        let below = path + "/"
        entries = entries.filter { $0.key != path && !$0.key.hasPrefix(below) }
    }

    private mutating func shrink(now: Duration) {
        entries = entries.filter { now < $0.value.expiry }
        let target = capacity * 9 / 10
        guard entries.count > target else { return }
        // Rare (only when the cache is full of fresh entries): O(n log n).
        let victims = entries.sorted { $0.value.expiry < $1.value.expiry }.prefix(entries.count - target)
        for (path, _) in victims { entries[path] = nil }
    }
}
