import Foundation
import Synchronization

/// The locks of the filesystem's lock order (docs/architecture.md#lock-order),
/// by rank: a lock may be taken only while every lock the thread holds has
/// a lower rank. Locks of equal rank never nest.
enum LockRank: Int, Sendable, Comparable {
    /// `FileSystem.state`.
    case fileSystem = 1
    /// A `StagedFile`'s state, and `DirectoryTimes` (both under the first).
    case stagedFile = 2
    case directoryTimes = 3
    /// An `UploadStream`'s state (under a staged file's).
    case uploadStream = 4

    static func < (a: LockRank, b: LockRank) -> Bool { a.rawValue < b.rawValue }
}

/// A `Mutex` with a rank in the lock order. Debug builds (the test suite)
/// check the order at every acquisition and stop at the first violation,
/// naming both locks; release builds take the mutex and nothing more.
final class RankedLock<Value: Sendable>: Sendable {
    let rank: LockRank
    private let mutex: Mutex<Value>

    init(_ rank: LockRank, _ value: Value) {
        self.rank = rank
        self.mutex = Mutex(value)
    }

    func withLock<Result: Sendable, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        #if DEBUG
        LockOrder.acquire(rank)
        defer { LockOrder.release(rank) }
        #endif
        return try mutex.withLock { (value: inout sending Value) throws(E) -> Result in try body(&value) }
    }
}

/// The ranks each thread holds, for the debug check. A lock is held only
/// inside a synchronous `withLock` body, so the thread cannot change while
/// it is held and a per-thread record is exact.
enum LockOrder {
    /// The rank `taking` may not be acquired while `held` are: the highest
    /// of them, if it is not below `taking`.
    static func violation(taking: LockRank, holding held: [LockRank]) -> LockRank? {
        guard let highest = held.max(), highest >= taking else { return nil }
        return highest
    }

    private static let key = "bucketfs.heldLockRanks"

    static func acquire(_ rank: LockRank) {
        let dictionary = Thread.current.threadDictionary
        let held = (dictionary[key] as? [Int] ?? []).compactMap(LockRank.init(rawValue:))
        if let holding = violation(taking: rank, holding: held) {
            preconditionFailure("lock order: \(rank) taken while \(holding) is held (docs/architecture.md#lock-order)")
        }
        dictionary[key] = held.map(\.rawValue) + [rank.rawValue]
    }

    static func release(_ rank: LockRank) {
        let dictionary = Thread.current.threadDictionary
        var held = dictionary[key] as? [Int] ?? []
        if let last = held.lastIndex(of: rank.rawValue) { held.remove(at: last) }
        dictionary[key] = held
    }
}
