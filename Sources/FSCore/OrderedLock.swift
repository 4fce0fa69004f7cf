import Foundation
import Synchronization

/// A `Mutex` in the lock order of FSCore and FuseBridge
/// (docs/architecture.md#lock-order; `package`, so the bridge's locks are
/// checked too),
/// which has two levels:
/// - a `leaf` takes no lock while it is held. The file system's one state
///   lock (`FileSystem.state`, which also holds every staged file's
///   write-back state and the directory times) is a leaf, as are the block
///   cache's index, the read-ahead budget and every small lock;
/// - an `outer` lock may take leaves, and only leaves, while it is held
///   (a `FileReader`'s state reserves read-ahead budget and asks the block
///   cache's index while it plans a prefetch).
/// So at most two locks are ever held, never two of the same level, and
/// none can deadlock with another.
///
/// Debug builds (the test suite, and the debug mounts of the mount tests)
/// check the order at every acquisition and stop at the first violation,
/// naming both locks; release builds take the mutex and nothing more.
package enum LockLevel: Sendable { case outer, leaf }

package final class OrderedLock<Value: Sendable>: Sendable {
    /// What the lock guards, for the debug check's message.
    let name: StaticString
    let level: LockLevel
    private let mutex: Mutex<Value>

    /// A leaf.
    package convenience init(_ name: StaticString, _ value: Value) {
        self.init(name, .leaf, value)
    }

    package init(_ name: StaticString, _ level: LockLevel, _ value: Value) {
        self.name = name
        self.level = level
        self.mutex = Mutex(value)
    }

    package func withLock<Result, E: Error>(_ body: (inout Value) throws(E) -> sending Result) throws(E) -> sending Result {
        #if DEBUG
        LockOrder.acquire(name, level)
        defer { LockOrder.release() }
        #endif
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in try body(&value) }
    }
}

/// The locks each thread holds, for the debug check. A lock is held only
/// inside a synchronous `withLock` body, so the thread cannot change while
/// it is held and a per-thread record is exact.
enum LockOrder {
    typealias Held = (name: String, level: LockLevel)

    /// Why taking a lock of `level` is refused while `held` are held (in
    /// the order taken), or nil: only a leaf under one outer lock nests.
    static func violation(taking name: String, _ level: LockLevel, holding held: [Held]) -> String? {
        guard let innermost = held.last else { return nil }
        if innermost.level == .outer, level == .leaf, held.count == 1 { return nil }
        return "lock order: \(name) taken while \(innermost.name) is held (docs/architecture.md#lock-order)"
    }

    private static let names = "bucketfs.heldLockNames"
    private static let outers = "bucketfs.heldLockOuter"

    static func acquire(_ name: StaticString, _ level: LockLevel) {
        let dictionary = Thread.current.threadDictionary
        let heldNames = dictionary[names] as? [String] ?? []
        let heldOuter = dictionary[outers] as? [Bool] ?? []
        let held = zip(heldNames, heldOuter).map { Held($0, $1 ? .outer : .leaf) }
        if let refusal = violation(taking: "\(name)", level, holding: held) { preconditionFailure(refusal) }
        dictionary[names] = heldNames + ["\(name)"]
        dictionary[outers] = heldOuter + [level == .outer]
    }

    static func release() {
        let dictionary = Thread.current.threadDictionary
        dictionary[names] = (dictionary[names] as? [String] ?? []).dropLast() as [String]
        dictionary[outers] = (dictionary[outers] as? [Bool] ?? []).dropLast() as [Bool]
    }
}
