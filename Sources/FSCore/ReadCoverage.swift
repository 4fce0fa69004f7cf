/// How far the reads of one stream have covered it without a gap.
///
/// The kernel's read-ahead sends a window of reads at once and FUSE
/// threads hand them over in any order, so the furthest read says nothing
/// of the ones still on their way: with 16 MiB windows, a read at 17 MiB
/// often arrives before those at 5 … 16 MiB. Buffers may be dropped only
/// below `through`, every byte of which has been asked for; dropping them
/// below the furthest read sent each late read to the store on its own, a
/// round trip that stalled the reader (at 50 ms per round trip, a dozen of
/// them in one cold 256 MiB read).
struct ReadCoverage: Sendable, Equatable {
    /// Every byte from the stream's start up to here has been read.
    private(set) var through: Int64
    /// Ranges read past `through`: sorted, disjoint, none touching another
    /// or `through`.
    private var ahead: [Range<Int64>] = []

    /// At most this many ranges wait past a gap; beyond it the oldest gap
    /// is given up on (reads of a few KiB leaving holes never filled).
    static let maxRanges = 256

    init(from start: Int64) {
        through = start
    }

    /// `range` was read. A gap further than `tolerance` behind `furthest`
    /// (the end of the furthest read) is given up on: a read that far back
    /// would count as a jump, not as part of the stream.
    mutating func read(_ range: Range<Int64>, furthest: Int64, tolerance: Int64) {
        if range.upperBound > through {
            insert(max(range.lowerBound, through)..<range.upperBound)
        }
        if ahead.count > Self.maxRanges, let oldest = ahead.first {
            giveUp(below: oldest.lowerBound)
        }
        giveUp(below: furthest - tolerance)
    }

    private mutating func insert(_ range: Range<Int64>) {
        var lower = range.lowerBound
        var upper = range.upperBound
        // Ranges already here are disjoint and never adjacent, so one pass
        // finds every range the new one touches.
        ahead.removeAll { other in
            guard other.lowerBound <= upper, other.upperBound >= lower else { return false }
            lower = min(lower, other.lowerBound)
            upper = max(upper, other.upperBound)
            return true
        }
        let at = ahead.firstIndex { $0.lowerBound > lower } ?? ahead.endIndex
        ahead.insert(lower..<upper, at: at)
        advance()
    }

    private mutating func giveUp(below floor: Int64) {
        guard floor > through else { return }
        through = floor
        ahead.removeAll { $0.upperBound <= floor }
        advance()
    }

    private mutating func advance() {
        while let first = ahead.first, first.lowerBound <= through {
            through = max(through, first.upperBound)
            ahead.removeFirst()
        }
    }
}
