import ArgumentParser
import Foundation
import StorageKit
import TestSupport
import Testing
@testable import BucketFSCLI

/// What the command line refuses before anything connects, and how each
/// subcommand's help reads: the first word, gs:// URLs, --endpoint,
/// --version, the option groups of the copy commands.
@Suite(.ownThread) struct CommandWordTests {
    /// The usage error `check` throws for `arguments`, or nil.
    static func refusal(_ arguments: [String]) -> CLIError? {
        do {
            try FirstWord.check(arguments)
            return nil
        } catch {
            return error
        }
    }

    @Test("a first word that is neither a subcommand, an option nor a URL is a usage error naming the nearest subcommand")
    func firstWord() throws {
        let slip = try #require(Self.refusal(["lss", "gs://nb"]))
        #expect(slip.exitCode == 64 && slip.description.contains("did you mean ls?"), "\(slip)")
        #expect(Self.refusal(["mout", "gs://nb", "/mnt"])?.description.contains("did you mean mount?") == true)
        #expect(Self.refusal(["stauts"])?.description.contains("did you mean status?") == true)
        // Far from every command: the list of them instead.
        let far = try #require(Self.refusal(["photos", "/mnt"]))
        #expect(far.exitCode == 64 && far.description.contains("the commands: mount, unmount, ls, put, get, cp, status, fuse-fd-mount, csi, help"), "\(far)")
        #expect(!far.description.contains("print-option-table"))
        // gs:/nb is a slip of the URL, not a command.
        #expect(Self.refusal(["gs:/nb", "/mnt"])?.description.contains("did you mean gs://nb?") == true)
        // Accepted: subcommands, URLs (mount(8)'s form), options, nothing.
        for accepted in [["mount", "b", "/mnt"], ["gs://b/p", "/mnt"], ["https://storage.googleapis.com/b", "/mnt"],
                         ["--version"], ["--help"], [], ["ls", "gs://b"], ["print-option-table"], ["help"], ["help", "cp"]] {
            #expect(Self.refusal(accepted) == nil, "\(accepted)")
        }
    }

    @Test("help takes one existing command name; help nosuch is a usage error")
    func helpTopics() throws {
        let unknown = try #require(Self.refusal(["help", "nosuch"]))
        #expect(unknown.exitCode == 64 && unknown.description.contains("no command nosuch"), "\(unknown)")
        #expect(Self.refusal(["help", "unmout"])?.description.contains("did you mean unmount?") == true)
        #expect(Self.refusal(["help", "ls", "cp"])?.exitCode == 64)
    }

    @Test("edit distance: insertions, deletions, substitutions")
    func editDistance() {
        #expect(FirstWord.editDistance("lss", "ls") == 1)
        #expect(FirstWord.editDistance("ls", "ls") == 0)
        #expect(FirstWord.editDistance("", "cp") == 2)
        #expect(FirstWord.editDistance("kitten", "sitting") == 3)
        #expect(FirstWord.nearest(to: "ab") == nil, "two edits of a two-letter word is no slip")
    }

    @Test("--version is the root's, from the one version constant")
    func version() throws {
        let version = try #require(BucketFS.configuration.version.isEmpty ? nil : BucketFS.configuration.version)
        #expect(version.split(separator: ".").count == 3 && version.allSatisfy { $0.isNumber || $0 == "." }, "\(version)")
        do {
            _ = try BucketFS.parseAsRoot(["--version"])
            Issue.record("--version parsed as a mount")
        } catch {
            #expect(BucketFS.fullMessage(for: error) == version)
            #expect(BucketFS.exitCode(for: error) == .success)
        }
    }

    @Test("gs:// arguments: gs:/nb and bucket names that cannot be are usage errors, before any request")
    func bucketURLs() throws {
        let url = try BucketURL("gs://nb/a//b/")
        #expect(url.bucket == "nb" && url.path == "a/b" && url.description == "gs://nb/a/b")
        for (text, expected) in [("gs:/nb", "did you mean gs://nb?"), ("gs:nb/x", "did you mean gs://nb/x?"),
                                 ("gs:///nb", "did you mean gs://nb?"), ("gs://", "names no bucket"),
                                 ("gs://a:b/x", "a:b is not a bucket name")] {
            do {
                _ = try BucketURL(text)
                Issue.record("\(text) accepted")
            } catch {
                #expect(error.exitCode == 64 && error.description.contains(expected), "\(text): \(error)")
            }
        }
        // mount's target: the same rules, and a bare bucket as fstab may give it.
        #expect(throws: CLIError.self) { try MountTarget("gs:/nb") }
        #expect(try MountTarget("nb/p").description == "gs://nb/p/")
    }

    @Test("put and get need an object; cp to a bucket's root or a folder keeps the file's name")
    func objectURLs() throws {
        do {
            _ = try BucketURL.object("gs://nb", uploading: true)
            Issue.record("put to the bucket's root accepted")
        } catch {
            #expect(error.exitCode == 64 && error.description.contains("names the bucket's root, not an object"), "\(error)")
            #expect(error.description.contains("bucketfs cp FILE gs://nb/"), "\(error)")
        }
        #expect(throws: CLIError.self) { try BucketURL.object("gs://nb/dir/") }
        #expect(throws: (any Error).self) { try BucketFS.parseAsRoot(["put", "small.txt", "gs://nb"]) }
        #expect(throws: (any Error).self) { try BucketFS.parseAsRoot(["get", "gs://nb", "x"]) }

        func uploadTarget(_ arguments: [String]) throws -> String? {
            let copy = try #require(try BucketFS.parseAsRoot(["cp"] + arguments) as? CopyCommand)
            guard case .upload(_, let url) = try copy.plan() else { return nil }
            return url.description
        }
        #expect(try uploadTarget(["dir/small.txt", "gs://nb"]) == "gs://nb/small.txt")
        #expect(try uploadTarget(["small.txt", "gs://nb/in/"]) == "gs://nb/in/small.txt")
        #expect(try uploadTarget(["small.txt", "gs://nb/other.txt"]) == "gs://nb/other.txt")
        #expect(throws: (any Error).self) { try BucketFS.parseAsRoot(["cp", "a", "b"]) }
        #expect(throws: (any Error).self) { try BucketFS.parseAsRoot(["cp", "small.txt", "gs:/nb"]) }
    }

    @Test("a download into a directory takes the object's name with one slash between")
    func downloadTarget() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-cli-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let object = try BucketURL("gs://nb/deep/x.bin")
        #expect(LocalTarget.file(directory + "/", naming: object) == directory + "/x.bin")
        #expect(LocalTarget.file(directory + "//", naming: object) == directory + "/x.bin")
        #expect(LocalTarget.file(directory, naming: object) == directory + "/x.bin")
        #expect(LocalTarget.file(directory + "/y.bin", naming: object) == directory + "/y.bin")
        #expect(LocalTarget.file("/", naming: object) == "/x.bin")
    }

    @Test("--endpoint must be http(s)://HOST[:PORT] or HOST:PORT, checked while parsing")
    func endpoints() throws {
        for good in ["http://127.0.0.1:9023", "https://storage.europe-west3.rep.googleapis.com", "localhost:9023", "http://proxy/"] {
            #expect(StorageOptions.endpointURL(good) != nil, "\(good)")
        }
        for bad in ["notaurl", "ftp://host", "http://", "127.0.0.1"] {
            #expect(StorageOptions.endpointURL(bad) == nil, "\(bad)")
        }
        for command in [["ls", "gs://nb"], ["cp", "a", "gs://nb/a"], ["mount", "gs://nb", "/mnt"]] {
            do {
                _ = try BucketFS.parseAsRoot(command + ["--endpoint", "notaurl"])
                Issue.record("\(command) accepted --endpoint notaurl")
            } catch {
                #expect(BucketFS.exitCode(for: error).rawValue == 64)
                #expect(BucketFS.message(for: error).contains("--endpoint notaurl is not a URL"), "\(BucketFS.message(for: error))")
            }
        }
    }

    /// `--name <placeholder>` of each option with a value in `help`.
    static func placeholders(_ help: String) -> [String: String] {
        var found: [String: String] = [:]
        for match in help.matches(of: /--([a-z][a-z-]+) <([^>]+)>/) { found[String(match.output.1)] = String(match.output.2) }
        return found
    }

    static let commands: [any ParsableCommand.Type] = [
        MountCommand.self, UnmountCommand.self, ListCommand.self, PutCommand.self, GetCommand.self, CopyCommand.self,
        StatusCommand.self,
    ]

    @Test("get --help lists no upload option; cp and put do")
    func optionGroups() {
        let get = GetCommand.helpMessage(columns: 10_000)
        #expect(!get.contains("--chunk-size") && !get.contains("--resume"), "\(get)")
        #expect(get.contains("--stall-timeout") && get.contains("--progress"))
        for help in [CopyCommand.helpMessage(columns: 10_000), PutCommand.helpMessage(columns: 10_000)] {
            #expect(help.contains("--chunk-size <MiB>") && help.contains("--resume"), "\(help)")
        }
    }

    @Test("an option's placeholder is a unit or a shape, the same in every subcommand; no help states its default twice")
    func placeholdersAndDefaults() {
        var seen: [String: (placeholder: String, command: String)] = [:]
        for command in Self.commands {
            let help = command.helpMessage(columns: 10_000)
            let name = command.configuration.commandName ?? ""
            for (option, placeholder) in Self.placeholders(help) {
                #expect(placeholder != option, "\(name) --\(option) shows its own name as its placeholder")
                if let earlier = seen[option] {
                    #expect(earlier.placeholder == placeholder, "--\(option): <\(earlier.placeholder)> in \(earlier.command), <\(placeholder)> in \(name)")
                }
                seen[option] = (placeholder, name)
            }
            for line in help.split(separator: "\n") where line.contains("--") {
                // The word, not application_default_credentials.json.
                let words = line.split { !$0.isLetter && $0 != "_" }
                #expect(words.count { $0 == "default" } <= 1, "\(name): \(line)")
            }
        }
        #expect(seen["chunk-size"]?.placeholder == "MiB" && seen["upload-chunk-size"]?.placeholder == "MiB")
        #expect(seen["stall-timeout"]?.placeholder == "S")
    }
}
