import Testing
@testable import FSCore

/// The lock order of docs/architecture.md#lock-order: a leaf (the file
/// system's state lock among them) takes no lock while held; an outer lock
/// (a file reader's) takes only leaves. Debug builds check it at every
/// acquisition (the whole test suite and the debug mounts of the mount
/// tests run with the check on).
@Suite("lock order")
struct LockOrderTests {
    @Test func onlyALeafUnderOneOuterLockNests() {
        #expect(LockOrder.violation(taking: "file system state", .leaf, holding: []) == nil)
        #expect(LockOrder.violation(taking: "read-ahead budget", .leaf, holding: [("file reader", .outer)]) == nil)
        // Nothing is taken under a leaf, the file system's state included.
        #expect(LockOrder.violation(taking: "block cache index", .leaf, holding: [("file system state", .leaf)]) != nil)
        #expect(LockOrder.violation(taking: "file reader", .outer, holding: [("file system state", .leaf)]) != nil)
        #expect(LockOrder.violation(taking: "file system state", .leaf, holding: [("file system state", .leaf)]) != nil,
                "a mutex is not reentrant")
        // Outer locks never nest, and nothing nests under a leaf under one.
        #expect(LockOrder.violation(taking: "file reader", .outer, holding: [("file reader", .outer)]) != nil)
        #expect(LockOrder.violation(taking: "block cache index", .leaf, holding: [("file reader", .outer), ("read-ahead budget", .leaf)]) != nil)
    }

    #if DEBUG
    @Test func locksAreRecordedAndReleased() {
        let outer = OrderedLock("outer", .outer, 1)
        let leaf = OrderedLock("leaf", 2)
        #expect(outer.withLock { a in a + leaf.withLock { $0 } } == 3)
        // Both were released: each may be taken again on its own.
        #expect(leaf.withLock { $0 } + outer.withLock { $0 } == 3)
    }
    #endif
}
