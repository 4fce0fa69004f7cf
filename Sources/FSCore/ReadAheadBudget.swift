import Synchronization

/// The memory all read-ahead buffers of all open files may use together.
/// A prefetch reserves its size before it starts and releases it when its
/// buffer is dropped; when the budget is spent, readers fall back to direct
/// ranged reads of just what they asked for. All-or-nothing reservations,
/// so a part never runs half-funded.
public final class ReadAheadBudget: Sendable {
    public let limit: Int64
    // Leaf lock: nothing else is taken while it is held.
    private let used = OrderedLock<Int64>("read-ahead budget", 0)

    public init(limit: Int64) {
        self.limit = max(0, limit)
    }

    /// Takes `bytes` if they fit.
    public func reserve(_ bytes: Int64) -> Bool {
        used.withLock { used in
            guard bytes >= 0, used + bytes <= limit else { return false }
            used += bytes
            return true
        }
    }

    public func release(_ bytes: Int64) {
        used.withLock { used in
            precondition(bytes >= 0 && bytes <= used, "releasing \(bytes) of \(used) reserved bytes")
            used -= bytes
        }
    }

    public var inUse: Int64 { used.withLock { $0 } }
}
