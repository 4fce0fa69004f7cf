import Testing
import TestSupport
@testable import FSCore

private let MiB: Int64 = 1 << 20

@Suite("read coverage: how far a stream's reads reach without a gap")
struct ReadCoverageTests {
    /// Reads in the order given (1 MiB each, starting at the MiB named),
    /// the furthest read's end and a tolerance of 32 MiB: where `through`
    /// stands after each.
    @Test(arguments: [
        // In order: every read moves it on.
        ([0, 1, 2, 3], [1, 2, 3, 4]),
        // The kernel's window out of order: 5 arrives before 1…4.
        ([0, 5, 2, 1, 4, 3], [1, 1, 1, 3, 3, 6]),
        // A read behind `through` (a late duplicate) changes nothing.
        ([0, 1, 0, 2], [1, 2, 2, 3]),
        // Overlapping and adjacent ranges merge: 3 then 2 then 1 closes it.
        ([0, 3, 2, 1], [1, 1, 1, 4]),
    ])
    func throughFollowsTheGaplessReads(order: [Int64], expected: [Int64]) {
        var coverage = ReadCoverage(from: 0)
        var furthest: Int64 = 0
        var seen: [Int64] = []
        for start in order {
            let range = (start * MiB)..<((start + 1) * MiB)
            furthest = max(furthest, range.upperBound)
            coverage.read(range, furthest: furthest, tolerance: 32 * MiB)
            seen.append(coverage.through / MiB)
        }
        #expect(seen == expected)
    }

    @Test func aGapFurtherThanTheToleranceIsGivenUp() {
        var coverage = ReadCoverage(from: 0)
        coverage.read(0..<MiB, furthest: MiB, tolerance: 4 * MiB)
        // 1 MiB never comes; reads run on to 6 MiB.
        for start in Int64(2)...5 {
            coverage.read((start * MiB)..<((start + 1) * MiB), furthest: (start + 1) * MiB, tolerance: 4 * MiB)
        }
        #expect(coverage.through == 6 * MiB, "the gap at 1 MiB is more than 4 MiB behind 6 MiB: given up, then 2…6 join")
    }

    @Test func aStreamStartingMidFileCountsFromItsStart() {
        var coverage = ReadCoverage(from: 70 * MiB)
        coverage.read((71 * MiB)..<(72 * MiB), furthest: 72 * MiB, tolerance: 32 * MiB)
        #expect(coverage.through == 70 * MiB)
        coverage.read((70 * MiB)..<(71 * MiB), furthest: 72 * MiB, tolerance: 32 * MiB)
        #expect(coverage.through == 72 * MiB)
    }

    @Test func tooManyHolesGiveUpTheOldest() {
        var coverage = ReadCoverage(from: 0)
        // Reads of 4 KiB every 8 KiB: every one leaves a hole.
        let count = ReadCoverage.maxRanges + 2
        for index in 1...count {
            let start = Int64(index) * 8192
            coverage.read(start..<(start + 4096), furthest: start + 4096, tolerance: 1 << 40)
        }
        #expect(coverage.through > 0, "the oldest holes were given up on")
        #expect(coverage.through < Int64(count) * 8192)
    }
}
