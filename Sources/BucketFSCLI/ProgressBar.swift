import Foundation
import Synchronization

/// A one-line progress display on standard error for `cp`, `put` and
/// `get`: bytes done of the total, percentage, rate and time left, redrawn
/// in place (`\r`) at most ten times a second. Silent when disabled (by
/// default when standard error is not a terminal), so scripts and logs get
/// only the final result line.
final class ProgressBar: Sendable {
    private struct State {
        var done: Int64 = 0
        var lastDraw: ContinuousClock.Instant?
        var drawn = false
        var finished = false
    }

    let total: Int64
    let enabled: Bool
    private let started = ContinuousClock.now
    private let state = Mutex(State())

    /// `force`: true or false from --progress / --no-progress; nil asks
    /// whether standard error is a terminal.
    init(total: Int64, force: Bool?) {
        self.total = total
        self.enabled = force ?? (isatty(2) == 1)
    }

    /// Bytes done so far (may be called from any thread, often).
    func update(_ done: Int64) {
        guard enabled else { return }
        let now = ContinuousClock.now
        let line = state.withLock { s -> String? in
            guard !s.finished else { return nil }
            s.done = max(s.done, done)
            if let last = s.lastDraw, now - last < .milliseconds(100), s.done < total { return nil }
            s.lastDraw = now
            s.drawn = true
            return render(s.done, elapsed: now - started)
        }
        if let line { writeStandardError("\r" + line) }
    }

    /// Draws the final state and ends the line (nothing when disabled or
    /// never drawn and `done` is nil).
    func finish(_ done: Int64? = nil) {
        guard enabled else { return }
        let line = state.withLock { s -> String? in
            guard !s.finished else { return nil }
            s.finished = true
            if let done { s.done = max(s.done, done) } else if !s.drawn { return nil }
            return render(s.done, elapsed: ContinuousClock.now - started)
        }
        if let line { writeStandardError("\r" + line + "\n") }
    }

    func render(_ done: Int64, elapsed: Duration) -> String {
        let seconds = max(elapsed.seconds, 0.001)
        let rate = Double(done) / seconds
        let percent = total > 0 ? Int(Double(done) * 100 / Double(total)) : 100
        let eta = done >= total ? "0:00" : rate > 0 ? Self.clock(Double(total - done) / rate) : "--:--"
        let left = "\(StatusText.bytes(done)) / \(StatusText.bytes(total))"
        return left.padding(toLength: max(left.count, 22), withPad: " ", startingAt: 0)
            + "  \(String(percent).leftPadded(3))%  \(StatusText.bytes(Int64(rate)))/s  ETA \(eta)   "
    }

    static func clock(_ seconds: Double) -> String {
        let s = Int(seconds.rounded(.up))
        return s >= 3600 ? String(format: "%d:%02d:%02d", s / 3600, s / 60 % 60, s % 60) : String(format: "%d:%02d", s / 60, s % 60)
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: " ", count: width - count) + self }
}

/// Ctrl-C during a transfer: the first SIGINT runs `handler` (which stops
/// the transfer cleanly), a second one exits at once with 130.
///
/// `@unchecked Sendable`: the dispatch source is a thread-safe object, set
/// up in `init` and afterwards only cancelled.
final class InterruptWatch: @unchecked Sendable {
    private final class Count: Sendable {
        let value = Atomic<Int>(0)
    }

    private let source: any DispatchSourceSignal
    private let count = Count()

    init(_ handler: @escaping @Sendable () -> Void) {
        signal(SIGINT, SIG_IGN)
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        source.setEventHandler { [count] in
            if count.value.add(1, ordering: .relaxed).newValue == 1 {
                handler()
            } else {
                exit(130)
            }
        }
        source.resume()
    }

    /// Whether Ctrl-C came.
    var interrupted: Bool { count.value.load(ordering: .relaxed) > 0 }

    func cancel() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }
}
