import Foundation
import Testing
@testable import FSCore

/// The transition table is the machine's own (`WriteBack.transitions`):
/// exploring the machine finds exactly its rows, and docs/architecture.md's
/// diagram and table say the same, so the picture a reader trusts cannot
/// drift from the code.
@Suite("write-back transition table")
struct WriteBackTransitionTests {
    static let page = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("docs/architecture.md")

    /// Eight events deep reaches every phase by every route the table has
    /// (the longest, failed → unlinked → relink, takes six).
    @Test func theMachineMakesExactlyTheChangesOfItsTable() {
        let found = WriteBackExplorer.edges(depth: 8)
        let table = Set(WriteBack.transitions.map { WriteBackExplorer.Edge(from: $0.from, event: $0.event, to: $0.to) })
        #expect(found.subtracting(table).isEmpty, "changes of phase the table lacks: \(found.subtracting(table))")
        #expect(table.subtracting(found).isEmpty, "rows the machine never takes: \(table.subtracting(found))")
    }

    @Test func theDocumentsTableIsTheMachines() throws {
        let text = try String(contentsOf: Self.page, encoding: .utf8)
        let rows = text.split(separator: "\n").compactMap { line -> [String]? in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count == 6, WriteBack.Phase(rawValue: cells[1]) != nil else { return nil }
            return Array(cells[1...4])
        }
        let machine = WriteBack.transitions.map { [$0.from.rawValue, $0.event.rawValue, $0.to.rawValue, $0.note] }
        #expect(rows == machine)
    }

    @Test func theDocumentsDiagramIsTheMachinesTable() throws {
        let text = try String(contentsOf: Self.page, encoding: .utf8)
        var diagram: [String: Set<String>] = [:]
        for match in text.matches(of: /\n    (\w+) --> (\w+): ([\w, ]+)/) {
            let events = match.3.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            diagram["\(match.1) --> \(match.2)", default: []].formUnion(events)
        }
        var table: [String: Set<String>] = [:]
        for row in WriteBack.transitions { table["\(row.from) --> \(row.to)", default: []].insert(row.event.rawValue) }
        #expect(!diagram.isEmpty)
        #expect(diagram == table)
    }
}

/// Every change of phase the `WriteBack` machine can make, found by
/// feeding it every event the executor can deliver, breadth first from a
/// file made by an open (of an object, or empty) or a create.
enum WriteBackExplorer {
    struct Edge: Hashable, CustomStringConvertible {
        let from: WriteBack.Phase
        let event: WriteBack.EventName?
        let to: WriteBack.Phase
        var description: String { "\(from) --\(event.map(\.rawValue) ?? "unnamed event")--> \(to)" }
    }

    /// The events the executor can deliver to `m` next (an upload's end
    /// only while one is in flight, a release only with a handle, retire
    /// only after the last release, created only first), each with its
    /// table name (nil: one the table does not name, which must leave the
    /// phase as it is).
    static func events(_ m: WriteBack) -> [(WriteBack.EventName?, WriteBack.Event)] {
        let end = m.sequentialEnd ?? 0
        var events: [(WriteBack.EventName?, WriteBack.Event)] = [
            (nil, .attach(new: true)), (nil, .attach(new: false)), (nil, .adopt(handles: 1)),
            (.wrote, .wrote(0..<1)), (.wrote, .wrote(end..<(end + 1))),
            (.truncated, .truncated(from: 1, to: 0)), (.truncated, .truncated(from: 1, to: 1)),
            (.rideAlong, .rideAlong), (.uploadRequested, .uploadRequested),
            (.unlink, .unlink), (.relink, .relink), (nil, .renamed),
            (nil, .streamStarted(granularity: 1)), (nil, .streamStarted(granularity: nil)),
            (nil, .streamSent(ok: true)), (nil, .streamSent(ok: false)), (nil, .takeStream),
        ]
        if m.version == 0 { events.append((.created, .created)) }
        if let version = m.uploading {
            events += [(.uploadStored, .uploadStored(version, hasContent: true)), (nil, .uploadFailed(version)), (.uploadEnded, .uploadEnded)]
        }
        events.append(m.handles > 0 ? (nil, .released) : (.retire, .retire))
        return events
    }

    static func edges(depth: Int) -> Set<Edge> {
        var edges: Set<Edge> = []
        var seen: Set<WriteBack> = []
        var frontier = [WriteBack(streamChunk: 1, emptyAtStart: true), WriteBack(streamChunk: 1, emptyAtStart: false)]
        for _ in 0..<depth {
            var next: [WriteBack] = []
            for machine in frontier where seen.insert(machine).inserted {
                for (name, event) in events(machine) {
                    var after = machine
                    _ = after.handle(event)
                    if after.phase != machine.phase { edges.insert(Edge(from: machine.phase, event: name, to: after.phase)) }
                    next.append(after)
                }
            }
            frontier = next
        }
        return edges
    }
}
