import Testing
@testable import FSCore

/// The lock order of docs/architecture.md#lock-order, checked by debug
/// builds at every acquisition of a ranked lock (the whole test suite and
/// the debug mounts of the mount tests run with the check on).
@Suite("lock order")
struct LockOrderTests {
    @Test func aLockIsTakenOnlyAboveEveryHeldRank() {
        #expect(LockOrder.violation(taking: .fileSystem, holding: []) == nil)
        #expect(LockOrder.violation(taking: .stagedFile, holding: [.fileSystem]) == nil)
        #expect(LockOrder.violation(taking: .uploadStream, holding: [.fileSystem, .stagedFile]) == nil)
        #expect(LockOrder.violation(taking: .directoryTimes, holding: [.fileSystem]) == nil)
        // The inversions the order forbids.
        #expect(LockOrder.violation(taking: .fileSystem, holding: [.stagedFile]) == .stagedFile)
        #expect(LockOrder.violation(taking: .stagedFile, holding: [.uploadStream]) == .uploadStream)
        #expect(LockOrder.violation(taking: .fileSystem, holding: [.fileSystem]) == .fileSystem, "no lock is taken twice")
        #expect(LockOrder.violation(taking: .stagedFile, holding: [.stagedFile]) == .stagedFile, "two staged files never nest")
    }

    #if DEBUG
    @Test func nestedLocksInOrderAreRecordedAndReleased() {
        let outer = RankedLock(.fileSystem, 0)
        let inner = RankedLock(.stagedFile, 0)
        let sum = outer.withLock { a in
            a += 1
            return inner.withLock { b in
                b += 2
                return a + b
            }
        }
        #expect(sum == 3)
        // Released: the inner lock may now be taken first, then nothing under it of lower rank.
        #expect(inner.withLock { $0 } == 2)
        #expect(outer.withLock { $0 } == 1)
    }
    #endif
}
