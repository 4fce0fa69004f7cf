import ArgumentParser
import Foundation
import TestSupport
import Testing
@testable import BucketFSCLI

/// The command line's shape: the default subcommand, -o sorting, mount
/// targets, and the options' single declaration in `Settings`.
@Suite(.ownThread) struct CommandLineTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test("without a subcommand the arguments are mount's, as mount(8) and fstab pass them")
    func defaultSubcommand() throws {
        let typed = try #require(try BucketFS.parseAsRoot(["gs://b/p", "/mnt", "-o", "rw,stat_ttl=5"]) as? MountCommand)
        #expect(typed.bucket == "gs://b/p" && typed.mountpoint == "/mnt" && typed.filesystem.o == ["rw,stat_ttl=5"])
        let bare = try #require(try BucketFS.parseAsRoot(["b", "/mnt", "--stat-ttl", "5"]) as? MountCommand)
        #expect(bare.bucket == "b" && bare.filesystem.statTTL == 5)
        #expect(try BucketFS.parseAsRoot(["mount", "b", "/mnt"]) is MountCommand)
        #expect(try BucketFS.parseAsRoot(["status", "--json"]) is StatusCommand)
        #expect(try BucketFS.parseAsRoot(["ls", "gs://b"]) is ListCommand)
        // The parser's own root flags still reach the root.
        #expect(BucketFS.completionScript(for: .bash).contains("mount"))
        #expect(BucketFS.helpMessage().contains("SUBCOMMANDS"))
    }

    @Test("-o splits into bucketfs's options, libfuse's, mount(8)'s bookkeeping and the unknown")
    func mountOptionSorting() {
        let sorted = MountOptionParsing.sort(
            ["rw,_netdev,stat_ttl=30,allow_other", "key-file=/k.json,read_only,fsname=x,x-systemd.automount,bogus=1"],
            ownNames: Settings.mountOptionNames)
        #expect(sorted.own.map { "\($0.0)=\($0.1 ?? "-")" } == ["stat-ttl=30", "allow-other=-", "key-file=/k.json", "read-only=-"])
        #expect(sorted.fuse == ["fsname=x"])
        #expect(sorted.unknown == ["bogus=1"])
    }

    @Test("a mount target is gs://BUCKET[/PREFIX] or BUCKET[/PREFIX], parsed by StorageKit")
    func mountTargets() throws {
        let url = try MountTarget("gs://photos/2026//raw/")
        #expect(url.bucket == "photos" && url.prefix == "2026/raw/" && url.description == "gs://photos/2026/raw/")
        let bare = try MountTarget("photos")
        #expect(bare.bucket == "photos" && bare.prefix == "")
        let https = try MountTarget("https://storage.googleapis.com/photos/2026")
        #expect(https.bucket == "photos" && https.prefix == "2026/")
        #expect(throws: CLIError.self) { try MountTarget("gs://") }
        do {
            _ = try MountTarget("ftp://photos")
            Issue.record("ftp:// accepted")
        } catch {
            #expect(error.exitCode == 64 && error.description.hasPrefix("ftp://photos is not a storage URL"), "\(error)")
        }
    }

    @Test("docs/mounting.md's option table is the one Settings generates")
    func optionTableMatchesDocs() throws {
        let page = try String(contentsOf: Self.repository.appendingPathComponent("docs/mounting.md"), encoding: .utf8)
        let table = OptionTable.extract(from: page)
        #expect(table == OptionTable.markdown(), "regenerate it with: swift run bucketfs print-option-table")
    }

    @Test("mount --help lists exactly the visible settings (besides -o and -h, --help)")
    func helpMatchesSettings() {
        let help = MountCommand.helpMessage(columns: 10_000)
        let listed = Set(help.matches(of: /^ +--([a-z][a-z-]+)/.anchorsMatchLineEndings()).map { String($0.output.1) })
        let visible = Set(Settings.all.filter { !$0.hidden }.map(\.name))
        #expect(listed == visible, "only in help: \(listed.subtracting(visible)), missing: \(visible.subtracting(listed))")
    }

    /// Values the settings' types take, and options that `validate()`
    /// wants beside some (a Firebase password file goes with an email).
    static let samples = ["3", "json", "debug", "http://127.0.0.1:9"]
    static let partners = [[], ["--firebase-anonymous"], ["--impersonate-service-account", "sa@example.com"],
                           ["--firebase-email", "e@example.com", "--firebase-password-file", "/p"]]

    /// `setting`'s option with a value it takes, and the partner options
    /// the command line then needs; nil when none parses.
    static func arguments(for setting: any AnySetting) -> (own: [String], partner: [String])? {
        let owns = setting.isFlag ? [["--\(setting.name)"]] : samples.map { ["--\(setting.name)", $0] }
        for own in owns {
            for partner in partners where (try? MountCommand.parse(["gs://b", "/mnt"] + own + partner)) != nil {
                return (own, partner)
            }
        }
        return nil
    }

    @Test("each setting's place is the option of its name: given alone, it and no other setting is given")
    func placesMatchOptions() throws {
        for setting in Settings.all {
            let arguments = try #require(Self.arguments(for: setting), "--\(setting.name) does not parse")
            let command = try MountCommand.parse(["gs://b", "/mnt"] + arguments.own + arguments.partner)
            let given = Set(Settings.all.filter { $0.isGiven(in: command) }.map(\.name))
            let partners = Set(arguments.partner.filter { $0.hasPrefix("--") }.map { String($0.dropFirst(2)) }).subtracting([setting.name])
            #expect(given.subtracting(partners) == [setting.name], "--\(setting.name) gives \(given.sorted())")
        }
    }

    @Test("each filesystem setting with a MountOptions field fills that field and no other setting's")
    func mountOptionFields() async throws {
        func fields(_ arguments: [String]) async throws -> [String: String] {
            let command = try MountCommand.parse(["gs://b", "/mnt"] + arguments)
            let settings = try await command.resolveSettings(environment: ["HOME": "/nonexistent"])
            let options = try command.filesystem.mountOptions(prefix: "", bucket: "b", settings, home: "/nonexistent")
            return Dictionary(uniqueKeysWithValues: Mirror(reflecting: options).children.map { ($0.label ?? "?", "\($0.value)") })
        }
        let defaults = try await fields([])
        var filled: [String: String] = [:]
        // --config names a file, read before the other settings.
        for setting in Settings.all where setting.name != Settings.config.name {
            let arguments = try #require(Self.arguments(for: setting), "--\(setting.name) does not parse")
            let changed = try await fields(arguments.own + arguments.partner).filter { defaults[$0.key] != $0.value }.map(\.key)
            #expect(changed.isEmpty != setting.fillsMountOptions, "--\(setting.name) changes \(changed)")
            for field in changed {
                #expect(filled[field] == nil, "\(field) is filled by --\(setting.name) and --\(filled[field] ?? "")")
                filled[field] = setting.name
            }
        }
        #expect(filled["uploadRetryWindow"] == "upload-retry-time" && filled["statTTL"] == "stat-ttl", "\(filled)")
    }

    @Test("each setting's name is written once in the CLI's sources")
    func namesWrittenOnce() throws {
        let directory = Self.repository.appendingPathComponent("Sources/BucketFSCLI")
        let sources = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOf: directory.appendingPathComponent($0), encoding: .utf8) }
        for setting in Settings.all {
            // As a string literal; `"uid": …` is a log field, not the option.
            let literal = "\"\(setting.name)\""
            let count = sources.map { $0.components(separatedBy: literal).dropFirst().filter { !$0.hasPrefix(":") }.count }
                .reduce(0, +)
            #expect(count == 1, "\"\(setting.name)\" is written \(count) times")
        }
    }
}
