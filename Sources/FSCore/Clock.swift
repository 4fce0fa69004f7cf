/// Monotonic time for TTLs, injectable so tests decide when entries expire.
/// Only differences between two `now` values mean anything.
public protocol MonotonicClock: Sendable {
    var now: Duration { get }
}

/// Real time: `ContinuousClock` (keeps counting while the machine sleeps,
/// so a TTL cannot outlive a suspend).
public struct SystemClock: MonotonicClock {
    private let origin = ContinuousClock.now

    public init() {}

    public var now: Duration { ContinuousClock.now - origin }
}
