/// Keys in recency order with O(1) touch, insert, remove and
/// least-recent lookup: a doubly linked list threaded through a dictionary.
struct LRUList<Key: Hashable & Sendable>: Sendable {
    private struct Links: Sendable {
        var newer: Key?
        var older: Key?
    }

    private var links: [Key: Links] = [:]
    private var newest: Key?
    private var oldest: Key?

    var count: Int { links.count }
    var leastRecent: Key? { oldest }

    func contains(_ key: Key) -> Bool { links[key] != nil }

    /// Makes `key` the most recent, inserting it if new.
    mutating func touch(_ key: Key) {
        if links[key] != nil {
            guard newest != key else { return }
            remove(key)
        }
        links[key] = Links(newer: nil, older: newest)
        if let newest { links[newest]?.newer = key }
        newest = key
        if oldest == nil { oldest = key }
    }

    mutating func remove(_ key: Key) {
        guard let node = links.removeValue(forKey: key) else { return }
        if let newer = node.newer { links[newer]?.older = node.older } else { newest = node.older }
        if let older = node.older { links[older]?.newer = node.newer } else { oldest = node.newer }
    }

    /// Keys from least to most recent (for tests and diagnostics).
    var keysFromOldest: [Key] {
        var result: [Key] = []
        var cursor = oldest
        while let key = cursor {
            result.append(key)
            cursor = links[key]?.newer
        }
        return result
    }
}
