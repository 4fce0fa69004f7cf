import ArgumentParser
import Foundation
import Testing
import TestSupport
@testable import BucketFSCLI

/// The examples of README.md and docs/, run through the command line they
/// document: every `bucketfs` command (also after `$ `, `sudo`, or a
/// systemd unit's `Exec…=`), every `mount -t fuse.bucketfs` and every
/// /etc/fstab line of a fenced block is parsed as bucketfs parses it, and a
/// mount's settings are resolved from all their sources, as before a mount;
/// every config file (`json config=PATH`) resolves too, and commands that
/// name its PATH read it. Blocks marked `synopsis` are usage with
/// placeholders, `text` blocks are diagrams and listings, and `swift` and
/// `mermaid` blocks are no commands: those are skipped. The `emulator`
/// block of the README is run against the emulator by MountTests.
@Suite(.ownThread) struct DocumentationExampleTests {
    struct Example: CustomStringConvertible {
        let place: String
        let arguments: [String]
        var description: String { "\(place): bucketfs \(arguments.joined(separator: " "))" }
    }

    struct Examples {
        var configs: [(place: String, path: String, text: String)] = []
        var commands: [Example] = []
        var fstabLines: [Example] = []
        var mountTypeLines: [Example] = []
        var jsonLines: [(place: String, text: String)] = []
    }

    static func examples() throws -> Examples {
        var found = Examples()
        for fence in try MarkdownFence.documentation(repository: CommandLineTests.repository.path) {
            switch fence.language {
            case "swift", "mermaid", "text":
                continue
            case "json":
                if let path = fence.attribute("config") {
                    found.configs.append((fence.place, path, fence.body.joined(separator: "\n")))
                } else {
                    found.jsonLines += fence.body.filter { !$0.isEmpty }.map { (fence.place, $0) }
                }
                continue
            default:
                guard !fence.has("synopsis") else { continue }
            }
            let prompted = fence.body.contains { $0.hasPrefix("$ ") }
            for line in joinedContinuations(fence.body) {
                var text = line
                if prompted {
                    guard text.hasPrefix("$ ") else { continue }   // a command's output
                    text.removeFirst(2)
                }
                if fence.language == "ini" {
                    guard let equals = text.firstIndex(of: "="), text.hasPrefix("Exec") else { continue }
                    text = String(text[text.index(after: equals)...])
                }
                let words = shellWords(text)
                if let fstab = fstabLine(words) {
                    found.fstabLines.append(Example(place: fence.place, arguments: fstab))
                    continue
                }
                for var command in commands(words) {
                    if command.first == "sudo" { command.removeFirst() }
                    guard let program = command.first else { continue }
                    if program == "bucketfs" || program.hasSuffix("/bucketfs") {
                        found.commands.append(Example(place: fence.place, arguments: Array(command.dropFirst())))
                    } else if program == "mount", let type = command.firstIndex(of: "-t"), type + 1 < command.count,
                              command[type + 1] == "fuse.bucketfs" {
                        // mount.fuse3 runs `bucketfs SOURCE TARGET -o OPTIONS`.
                        var rest = command.dropFirst()
                        rest.removeSubrange(type...(type + 1))
                        found.mountTypeLines.append(Example(place: fence.place, arguments: Array(rest)))
                    }
                }
            }
        }
        return found
    }

    /// Lines ending in a backslash joined with the next.
    static func joinedContinuations(_ lines: [String]) -> [String] {
        var joined: [String] = []
        var pending = ""
        for line in lines {
            if line.hasSuffix("\\") {
                pending += line.dropLast() + " "
            } else {
                joined.append(pending + line)
                pending = ""
            }
        }
        if !pending.isEmpty { joined.append(pending) }
        return joined
    }

    /// A line split as the shell splits it, up to a comment: quotes and
    /// backslashes removed; `~` and `$VAR` left as written.
    static func shellWords(_ line: String) -> [String] {
        var words: [String] = []
        var word = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for character in line {
            if escaped {
                word.append(character)
                escaped = false
            } else if let open = quote {
                if character == open { quote = nil } else if character == "\\" && open == "\"" { escaped = true } else { word.append(character) }
            } else if character == "\\" {
                escaped = true
                inWord = true
            } else if character == "'" || character == "\"" {
                quote = character
                inWord = true
            } else if character == " " || character == "\t" {
                if inWord { words.append(word) }
                word = ""
                inWord = false
            } else if character == "#" && !inWord {
                break
            } else {
                word.append(character)
                inWord = true
            }
        }
        if inWord { words.append(word) }
        return words
    }

    /// The simple commands of a list (`a && b; c | d`).
    static func commands(_ words: [String]) -> [[String]] {
        words.split { ["&&", "||", ";", "|"].contains($0) }.map(Array.init)
    }

    /// An /etc/fstab line of type fuse.bucketfs as mount.fuse3 passes it:
    /// `SOURCE TARGET -o OPTIONS`.
    static func fstabLine(_ words: [String]) -> [String]? {
        guard words.count == 6, words[2] == "fuse.bucketfs", Int(words[4]) != nil, Int(words[5]) != nil else { return nil }
        return [words[0], words[1], "-o", words[3]]
    }

    /// The scratch directory's environment, with each documented config
    /// file written there; returns the map from documented path to copy.
    static func writeConfigs(_ examples: Examples, into scratch: SettingsResolutionTests.Scratch) throws -> [String: String] {
        var copies: [String: String] = [:]
        for (index, config) in examples.configs.enumerated() {
            copies[config.path] = try scratch.write("config-\(index).json", config.text)
        }
        return copies
    }

    static func substitute(_ arguments: [String], _ copies: [String: String]) -> [String] {
        arguments.map { argument in
            copies.reduce(argument) { $0.replacingOccurrences(of: $1.key, with: $1.value) }
        }
    }

    @Test("the pages hold the examples this suite runs")
    func examplesAreFound() throws {
        let examples = try Self.examples()
        #expect(examples.configs.count >= 1, "no config file (json config=PATH)")
        #expect(examples.fstabLines.count >= 2, "\(examples.fstabLines)")
        #expect(examples.mountTypeLines.count >= 1, "\(examples.mountTypeLines)")
        #expect(examples.commands.count >= 15, "\(examples.commands)")
        #expect(examples.commands.contains { $0.arguments.contains("--endpoint") && $0.arguments.contains("--anonymous") })
        // Each config's path is read by some documented command or fstab line.
        let everything = (examples.commands + examples.fstabLines + examples.mountTypeLines).flatMap(\.arguments).joined(separator: " ")
        for config in examples.configs {
            #expect(everything.contains(config.path), "\(config.place): no example reads \(config.path)")
        }
    }

    @Test("every documented config file resolves as a mount's config")
    func configsResolve() async throws {
        let examples = try Self.examples()
        let scratch = try SettingsResolutionTests.Scratch()
        let copies = try Self.writeConfigs(examples, into: scratch)
        for config in examples.configs {
            let command = try MountCommand.parse(["gs://b", "/mnt", "--config", try #require(copies[config.path])])
            let problem = await SettingsResolutionTests.usageMessage(command, environment: scratch.environment)
            #expect(problem == nil, "\(config.place): \(problem ?? "")")
        }
    }

    @Test("every documented bucketfs command, mount -t fuse.bucketfs and fstab line parses, and a mount's settings resolve")
    func commandsParse() async throws {
        let examples = try Self.examples()
        let scratch = try SettingsResolutionTests.Scratch()
        let copies = try Self.writeConfigs(examples, into: scratch)
        for example in examples.commands + examples.mountTypeLines + examples.fstabLines {
            let arguments = Self.substitute(example.arguments, copies)
            let parsed: ParsableCommand
            do {
                parsed = try BucketFS.parseAsRoot(arguments)
            } catch {
                Issue.record("\(example): \(BucketFS.message(for: error))")
                continue
            }
            if let mount = parsed as? MountCommand {
                let problem = await SettingsResolutionTests.usageMessage(mount, environment: scratch.environment)
                #expect(problem == nil, "\(example): \(problem ?? "")")
            }
        }
    }

    @Test("the JSON examples that are not config files are JSON objects, one a line")
    func jsonLinesParse() throws {
        for (place, text) in try Self.examples().jsonLines {
            let object = try? JSONSerialization.jsonObject(with: Data(text.utf8))
            #expect(object is [String: Any], "\(place): not a JSON object: \(text)")
        }
    }

    @Test("the example reader splits words, lists and fstab lines as the shell and mount(8) do")
    func readerSplitsLikeTheShell() {
        #expect(Self.shellWords(#"bucketfs mount 'a b' "c \"d\"" e\ f ~/x  # a comment"#)
            == ["bucketfs", "mount", "a b", #"c "d""#, "e f", "~/x"])
        #expect(Self.shellWords("cp a#b c") == ["cp", "a#b", "c"])
        #expect(Self.commands(["mkdir", "x", "&&", "bucketfs", "ls", ";", "ls"]) == [["mkdir", "x"], ["bucketfs", "ls"], ["ls"]])
        #expect(Self.joinedContinuations(["a \\", "  b", "c"]) == ["a    b", "c"])
        #expect(Self.fstabLine(Self.shellWords("gs://b  /mnt/b  fuse.bucketfs  _netdev,stat_ttl=30  0 0"))
            == ["gs://b", "/mnt/b", "-o", "_netdev,stat_ttl=30"])
        #expect(Self.fstabLine(Self.shellWords("/dev/sda1 / ext4 defaults 0 1")) == nil)
    }
}
