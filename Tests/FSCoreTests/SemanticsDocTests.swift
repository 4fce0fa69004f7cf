import Foundation
import Testing

/// docs/semantics.md is checked, as mountpoint-s3 checks its SEMANTICS.md:
/// every behaviour it states (each bullet and table row of its sections)
/// carries a stable id, `<a id="ID"></a>`, and the tests that check a
/// behaviour name its id as `semantics.md` + `#ID`, in a comment or in
/// the test's display name, anywhere under Tests/. These tests fail when a
/// statement has no id, when an id has no test, or when a test names an id
/// the page no longer has. Reads files only: no mount, no server.
@Suite struct SemanticsDocTests {
    /// Statements no test checks yet, each with the reason; printed by every
    /// run and explained in docs/testing.md. Keep it short: a statement
    /// belongs here only while a test for it is out of reach.
    static let untested: [String: String] = [:]

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    static let page = repository.appendingPathComponent("docs/semantics.md")
    static let thisFile = URL(fileURLWithPath: #filePath).standardizedFileURL.path

    struct Statement {
        let id: String?
        let line: Int
        let text: String
    }

    /// Every bullet and table body row of the page, with its id if it has one.
    static func statements() throws -> [Statement] {
        let text = try String(contentsOf: page, encoding: .utf8)
        var statements: [Statement] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let isBullet = line.hasPrefix("- ")
            let isRow = line.hasPrefix("| ") && !line.hasPrefix("| errno |") && !line.hasPrefix("| operation |")
            guard isBullet || isRow else { continue }
            let body = line.dropFirst(2)
            let id = body.firstMatch(of: /^<a id="([a-z0-9-]+)"><\/a>/).map { String($0.1) }
            statements.append(Statement(id: id, line: index + 1, text: String(line.prefix(80))))
        }
        return statements
    }

    /// The ids each test file names: `semantics.md` + `#ID`.
    static func references() throws -> [String: Set<String>] {
        let tests = repository.appendingPathComponent("Tests")
        guard let walker = FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil) else { return [:] }
        var named: [String: Set<String>] = [:]
        for case let url as URL in walker where url.pathExtension == "swift" && url.standardizedFileURL.path != thisFile {
            let source = try String(contentsOf: url, encoding: .utf8)
            for match in source.matches(of: /semantics\.md#([a-z0-9-]+)/) {
                named[String(match.1), default: []].insert(url.lastPathComponent)
            }
        }
        return named
    }

    @Test func everyStatementHasAUniqueId() throws {
        let statements = try Self.statements()
        #expect(statements.count > 40, "docs/semantics.md has \(statements.count) statements; was it parsed?")
        for statement in statements where statement.id == nil {
            Issue.record("docs/semantics.md:\(statement.line) states a behaviour without an id: \(statement.text)")
        }
        let ids = statements.compactMap(\.id)
        for id in Set(ids) where ids.filter({ $0 == id }).count > 1 {
            Issue.record("docs/semantics.md uses the id \(id) more than once")
        }
    }

    @Test func everyStatementIsNamedByATest() throws {
        let references = try Self.references()
        for statement in try Self.statements() {
            guard let id = statement.id, Self.untested[id] == nil else { continue }
            #expect(references[id] != nil, "docs/semantics.md:\(statement.line) (\(id)) is named by no test under Tests/")
        }
    }

    @Test func everyIdATestNamesIsOnThePage() throws {
        let ids = Set(try Self.statements().compactMap(\.id))
        for (id, files) in try Self.references().sorted(by: { $0.key < $1.key }) where !ids.contains(id) {
            Issue.record("\(files.sorted().joined(separator: ", ")) names semantics.md#\(id), which docs/semantics.md no longer has")
        }
    }

    @Test func theUntestedListIsShortAndTrue() throws {
        let ids = Set(try Self.statements().compactMap(\.id))
        let references = try Self.references()
        for (id, reason) in Self.untested.sorted(by: { $0.key < $1.key }) {
            print("docs/semantics.md#\(id) has no test: \(reason)")
            #expect(ids.contains(id), "the untested list names \(id), which the page no longer has")
            #expect(references[id] == nil, "\(id) is tested now (\(references[id]?.sorted() ?? [])); take it off the untested list")
        }
        #expect(Self.untested.count <= 3, "more than three untested statements: write their tests")
    }
}
