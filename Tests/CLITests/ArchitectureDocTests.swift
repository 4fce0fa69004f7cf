import Foundation
import Testing
import TestSupport

/// docs/architecture.md names every module of Package.swift, so the page
/// cannot drift from the package: each target's directory opens a line of
/// the Layout block, and each module a program or a test imports (every
/// library, and the executables under Sources/) is a word of the
/// dependency diagram, the page's first block.
@Suite struct ArchitectureDocTests {
    enum Kind: String { case target, executableTarget, systemLibrary, testTarget }

    struct Target: CustomStringConvertible {
        let name: String
        let kind: Kind
        let directory: String
        var description: String { "\(kind.rawValue) \(name) (\(directory))" }
    }

    static let page = "docs/architecture.md"

    /// The targets Package.swift declares, each with its `path:` or the
    /// directory SwiftPM gives it by default.
    static func targets() throws -> [Target] {
        let manifest = try String(
            contentsOf: CommandLineTests.repository.appendingPathComponent("Package.swift"), encoding: .utf8)
        let declaration = try Regex(
            #"\.(target|executableTarget|systemLibrary|testTarget)\(\s*name:\s*"([^"]+)""#,
            as: (Substring, Substring, Substring).self)
        let path = try Regex(#"path:\s*"([^"]+)""#, as: (Substring, Substring).self)
        let found = manifest.matches(of: declaration)
        return try found.indices.map { index in
            let match = found[index]
            // A `path:` belongs to this target if it comes before the next one.
            let end = index + 1 < found.count ? found[index + 1].range.lowerBound : manifest.endIndex
            let kind = try #require(Kind(rawValue: String(match.output.1)))
            let name = String(match.output.2)
            let directory = manifest[match.range.upperBound..<end].firstMatch(of: path).map { String($0.output.1) }
                ?? (kind == .testTarget ? "Tests/" : "Sources/") + name
            return Target(name: name, kind: kind, directory: directory)
        }
    }

    /// The page's fenced blocks: the diagram (the first) and the one that
    /// follows the `## Layout` heading.
    static func blocks() throws -> (diagram: [String], layout: [String]) {
        let repository = CommandLineTests.repository.path
        let fences = try MarkdownFence.read(page: page, repository: repository)
        let lines = try String(contentsOfFile: repository + "/" + page, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let heading = try #require(lines.firstIndex(of: "## Layout"), "\(page) has no Layout section") + 1
        let diagram = try #require(fences.first, "\(page) has no diagram")
        let layout = try #require(fences.first { $0.line > heading }, "\(page) has no block under Layout")
        return (diagram.body, layout.body)
    }

    @Test("Package.swift's targets are read, with their directories")
    func manifestIsRead() throws {
        let targets = try Self.targets()
        let byName = Dictionary(targets.map { ($0.name, $0) }) { first, _ in first }
        #expect(byName.count == targets.count, "a target declared twice: \(targets)")
        #expect(byName["Transport"]?.directory == "Sources/Transport")
        #expect(byName["MountTests"]?.directory == "Tests/MountTests")
        #expect(byName["TestSupport"]?.directory == "Tests/TestSupport")
        #expect(byName["CCurl"]?.kind == .systemLibrary && byName["bucketfs"]?.kind == .executableTarget)
        for target in targets {
            var isDirectory: ObjCBool = false
            let path = CommandLineTests.repository.appendingPathComponent(target.directory).path
            #expect(FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue, "\(target)")
        }
    }

    @Test("every target of Package.swift has its line under Layout, and every Sources/ line is a target")
    func layoutListsEveryTarget() throws {
        let targets = try Self.targets()
        let listed = try Self.blocks().layout.compactMap { line -> String? in
            guard let first = line.split(separator: " ").first, !line.hasPrefix(" ") else { return nil }
            return first.hasSuffix("/") ? String(first.dropLast()) : String(first)
        }
        for target in targets {
            #expect(listed.contains(target.directory), "\(Self.page)'s Layout lacks \(target)")
        }
        let directories = Set(targets.map(\.directory))
        for entry in listed where entry.hasPrefix("Sources/") {
            #expect(directories.contains(entry), "\(Self.page)'s Layout names \(entry), which Package.swift does not declare")
        }
    }

    @Test("every library, and every executable under Sources/, is in the dependency diagram")
    func diagramNamesEveryModule() throws {
        let words = Set(try Self.blocks().diagram.joined(separator: "\n")
            .split { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }.map(String.init))
        let modules = try Self.targets().filter {
            $0.kind == .target || $0.kind == .systemLibrary || ($0.kind == .executableTarget && $0.directory.hasPrefix("Sources/"))
        }
        #expect(modules.count >= 12)
        for module in modules {
            #expect(words.contains(module.name), "\(Self.page)'s diagram lacks \(module)")
        }
    }
}
