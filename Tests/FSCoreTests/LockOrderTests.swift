import Foundation
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

/// The lock order the debug check enforces is the one docs/architecture.md
/// states: every lock FSCore makes is in the doc's table, at the level the
/// code gives it, and FSCore and FuseBridge take no lock that the check
/// cannot see.
@Suite("lock order documented")
struct LockOrderDocumentTests {
    static var repository: URL { SemanticsDocTests.repository }

    /// Each `OrderedLock` FSCore and FuseBridge create: its name and level, from the source.
    static func locksInCode() throws -> [String: LockLevel] {
        var locks: [String: LockLevel] = [:]
        for (file, text) in try sources() where !file.hasSuffix("OrderedLock.swift") {
            for line in text.split(separator: "\n") {
                guard let opening = line.range(of: #"OrderedLock(<.+?>)?\(""#, options: .regularExpression) else { continue }
                let rest = line[opening.upperBound...]
                let name = String(rest.prefix { $0 != "\"" })
                let level: LockLevel = rest.dropFirst(name.count + 1).hasPrefix(", .outer") ? .outer : .leaf
                locks[name] = level
            }
        }
        return locks
    }

    /// The rows of the doc's lock table: name and level.
    static func locksInDoc() throws -> [String: LockLevel] {
        let doc = try String(contentsOf: repository.appendingPathComponent("docs/architecture.md"), encoding: .utf8)
        let section = doc.components(separatedBy: "## Lock order").dropFirst().first?.components(separatedBy: "\n## ").first ?? ""
        var locks: [String: LockLevel] = [:]
        for line in section.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 2 else { continue }
            locks[cells[0].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[1] == "outer" ? .outer : .leaf
        }
        return locks
    }

    static func sources() throws -> [(String, String)] {
        let files = ["Sources/FSCore", "Sources/FuseBridge"].flatMap { folder in
            FileManager.default.enumerator(at: repository.appendingPathComponent(folder), includingPropertiesForKeys: nil)?
                .compactMap { $0 as? URL } ?? []
        }
        return try files.filter { $0.pathExtension == "swift" }.map { ($0.path, try String(contentsOf: $0, encoding: .utf8)) }
    }

    @Test func everyLockIsInTheDocAtItsLevel() throws {
        let code = try Self.locksInCode()
        let doc = try Self.locksInDoc()
        #expect(code.count >= 10, "the scan found the locks: \(code.keys.sorted())")
        for (name, level) in code.sorted(by: { $0.key < $1.key }) {
            #expect(doc[name] == level, "lock \"\(name)\" (\(level)) in docs/architecture.md#lock-order: \(doc[name].map { "\($0)" } ?? "missing")")
        }
        for name in doc.keys where code[name] == nil {
            Issue.record("docs/architecture.md#lock-order lists \"\(name)\", which neither FSCore nor FuseBridge has")
        }
    }

    @Test func noLockTheCheckCannotSee() throws {
        let unseen = ["NSLock", "NSRecursiveLock", "NSCondition(", "Mutex(", "Mutex<", "pthread_mutex", "os_unfair_lock", "DispatchSemaphore"]
        // The one exception, in the doc's table: the FUSE session's
        // lifecycle condition, which waits for the loop to end.
        let allowed = ["FuseSession.swift": "NSCondition("]
        for (file, text) in try Self.sources() where !file.hasSuffix("OrderedLock.swift") {
            let name = URL(fileURLWithPath: file).lastPathComponent
            for kind in unseen where text.contains(kind) && allowed[name] != kind {
                Issue.record("\(file) uses \(kind), which the lock-order check cannot see: use an OrderedLock")
            }
        }
    }
}
