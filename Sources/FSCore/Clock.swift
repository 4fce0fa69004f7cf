import Synchronization

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

/// A clock that moves only when told to; for tests.
public final class ManualClock: MonotonicClock {
    private let current: Mutex<Duration>

    public init(_ start: Duration = .zero) {
        current = Mutex(start)
    }

    public var now: Duration { current.withLock { $0 } }

    public func advance(by delta: Duration) {
        current.withLock { $0 += delta }
    }
}
