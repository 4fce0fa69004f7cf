import FSCore
import Synchronization

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
