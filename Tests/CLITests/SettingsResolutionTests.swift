import ArgumentParser
import Foundation
import TestSupport
import Testing
@testable import BucketFSCLI

/// The mount's settings from the command line, -o, BUCKETFS_* variables and
/// the config file, in that precedence (docs/operations.md), without a mount.
@Suite(.ownThread) struct SettingsResolutionTests {
    /// A scratch directory as HOME and XDG_CONFIG_HOME, so no real config file is found.
    final class Scratch {
        let path: String
        init() throws {
            path = NSTemporaryDirectory() + "clitests-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        var environment: [String: String] { ["HOME": path, "XDG_CONFIG_HOME": path + "/xdg"] }

        func write(_ name: String, _ text: String) throws -> String {
            let file = path + "/" + name
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            return file
        }
    }

    static func resolve(_ arguments: [String], environment: [String: String]) async throws -> (MountCommand, SettingsResolver) {
        let command = try MountCommand.parse(["gs://b", "/mnt"] + arguments)
        return (command, try await command.resolveSettings(environment: environment))
    }

    static func usageMessage(_ arguments: [String], environment: [String: String]) async -> String? {
        do {
            return await usageMessage(try MountCommand.parse(["gs://b", "/mnt"] + arguments), environment: environment)
        } catch {
            return "not a usage error: \(error)"
        }
    }

    /// What stops `command` before it mounts, from any of its sources, or
    /// nil when every setting resolves.
    static func usageMessage(_ command: MountCommand, environment: [String: String]) async -> String? {
        do {
            let settings = try await command.resolveSettings(environment: environment)
            _ = try command.process.resolve(settings)
            _ = try command.storageOptions.resolved(settings)
            _ = try command.filesystem.mountOptions(prefix: "", bucket: "b", settings, home: environment["HOME"])
            return nil
        } catch let error as CLIError {
            #expect(error.exitCode == 64)
            return error.description
        } catch {
            return "not a usage error: \(error)"
        }
    }

    @Test("the command line beats -o, which beats BUCKETFS_* variables, which beat the config file, which beats the default")
    func precedence() async throws {
        let scratch = try Scratch()
        let config = try scratch.write("config.json", """
            { "stat-ttl": 11, "negative-ttl": 3, "cache-size": 77, "read-ahead-budget": 7, "connect-timeout": 4,
              "upload-retry-time": 7.5, "read-only": true, "log-level": "debug", "fuse-options": ["default_permissions"] }
            """)
        var environment = scratch.environment
        environment["BUCKETFS_STAT_TTL"] = "22"
        environment["BUCKETFS_CACHE_SIZE"] = "88"
        environment["BUCKETFS_READ_AHEAD_BUDGET"] = "8"
        let (command, settings) = try await Self.resolve(
            ["--config", config, "-o", "cache_size=99,read-ahead-budget=9,allow_other", "--read-ahead-budget", "10"],
            environment: environment)
        let options = try command.filesystem.mountOptions(
            prefix: "", bucket: "b", settings, home: scratch.path)
        #expect(options.readAheadBudget == 10 << 20, "command line over -o")
        #expect(options.cacheSize == 99 << 20, "-o over the environment and the file")
        #expect(options.statTTL == 22, "environment over the file")
        #expect(options.negativeTTL == 3, "file over the default")
        #expect(options.uploadRetryWindow == 7.5)
        #expect(options.readOnly, "a flag from the file")
        #expect(options.recoveryRetryInterval == 10, "the default")
        #expect(options.cacheDirectory == scratch.path + "/.cache/bucketfs/b")
        let process = try command.process.resolve(settings)
        #expect(process.logLevel == .debug)
        #expect(process.transport.connectTimeout == .seconds(4))
        // allow_other in -o is bucketfs's --allow-other, which adds it to libfuse's.
        #expect(settings.fuseOptions == ["default_permissions"])
        #expect(try settings.optional(Settings.allowOther, nil) == true)
        let shown = settings.effective
        #expect(shown["stat-ttl"] == "22.0" && shown["cache-size"] == "99" && shown["read-only"] == "true", "\(shown)")
        #expect(shown["config"] == config)
    }

    @Test("the config file is --config, else -o config=, else $BUCKETFS_CONFIG, else XDG_CONFIG_HOME's")
    func configFileChoice() async throws {
        let scratch = try Scratch()
        try FileManager.default.createDirectory(atPath: scratch.path + "/xdg/bucketfs", withIntermediateDirectories: true)
        _ = try scratch.write("xdg/bucketfs/config.json", #"{ "stat-ttl": 1 }"#)
        let variable = try scratch.write("variable.json", #"{ "stat-ttl": 2 }"#)
        let option = try scratch.write("option.json", #"{ "stat-ttl": 3 }"#)
        let flag = try scratch.write("flag.json", #"{ "stat-ttl": 4 }"#)
        var environment = scratch.environment
        func statTTL(_ arguments: [String]) async throws -> Double {
            let (command, settings) = try await Self.resolve(arguments, environment: environment)
            return try command.filesystem.mountOptions(prefix: "", bucket: "b", settings, home: scratch.path).statTTL
        }
        #expect(try await statTTL([]) == 1)
        environment["BUCKETFS_CONFIG"] = variable
        #expect(try await statTTL([]) == 2)
        #expect(try await statTTL(["-o", "config=\(option)"]) == 3)
        #expect(try await statTTL(["-o", "config=\(option)", "--config", flag]) == 4)
    }

    @Test("a bad value names where it came from; a bad file or key is refused with exit 64")
    func errors() async throws {
        let scratch = try Scratch()
        var environment = scratch.environment
        let fromEnvironment = await Self.usageMessage([], environment: environment.merging(["BUCKETFS_STAT_TTL": "soon"]) { $1 })
        #expect(fromEnvironment == "BUCKETFS_STAT_TTL: the value of stat-ttl is not a number")
        #expect(await Self.usageMessage(["-o", "cache_size=big"], environment: environment) == "-o: the value of cache-size is not a whole number")
        let typo = try scratch.write("typo.json", #"{ "stat-tll": 5, "cache-size": 1 }"#)
        #expect(await Self.usageMessage(["--config", typo], environment: environment)
            == "config file \(typo): unknown option(s) stat-tll (see bucketfs mount --help)")
        let level = try scratch.write("level.json", #"{ "log-level": "loud" }"#)
        #expect(await Self.usageMessage(["--config", level], environment: environment)?.hasPrefix("config file \(level): the value of log-level") == true)
        let notJSON = try scratch.write("bad.json", "stat-ttl = 5")
        #expect(await Self.usageMessage(["--config", notJSON], environment: environment)?.contains("is not JSON at line 1, column 1") == true)
        #expect(await Self.usageMessage(["--config", scratch.path + "/nope.json"], environment: environment)
            == "config file \(scratch.path)/nope.json does not exist or cannot be read")
        #expect(await Self.usageMessage(["-o", "stat_tll=5"], environment: environment)
            == "unknown mount option(s): stat_tll=5 (see bucketfs mount --help)")
        #expect(await Self.usageMessage(["--file-mode", "0999"], environment: environment) == "--file-mode 0999 is not an octal mode")
        #expect(await Self.usageMessage(["-o", "upload_chunk_size=0"], environment: environment) == "--upload-chunk-size must be 1 to 1024 MiB")
        #expect(await Self.usageMessage(["-o", "parallel_upload_parts=1025"], environment: environment) == "--parallel-upload-parts must be 1 to 1024")
        #expect(await Self.usageMessage(["-o", "stat_ttl=-1"], environment: environment) == "TTLs cannot be negative")
        #expect(await Self.usageMessage(["-o", "kernel-read-ahead=-1"], environment: environment) == "sizes cannot be negative")
        #expect(await Self.usageMessage(["-o", "upload_retry_time=-1"], environment: environment) == "retry times cannot be negative")
        #expect(await Self.usageMessage(["--parallel-upload-threshold", "lots"], environment: environment)
            == "--parallel-upload-threshold lots is not a size (e.g. 64MiB, 512KiB, 1GiB) or off")
        environment["BUCKETFS_ANONYMOUS"] = "true"
        #expect(await Self.usageMessage(["--key-file", "/k.json"], environment: environment)
            == "choose one of --key-file, --token-file, --anonymous and a Firebase sign-in", "credential checks see every source")
    }

    @Test("settings only come from the places they are declared for")
    func origins() async throws {
        let scratch = try Scratch()
        let config = try scratch.write("config.json", #"{ "foreground": true }"#)
        #expect(await Self.usageMessage(["--config", config], environment: scratch.environment)
            == "config file \(config): unknown option(s) foreground (see bucketfs mount --help)")
        let (command, settings) = try await Self.resolve([], environment: scratch.environment.merging(["BUCKETFS_FOREGROUND": "1"]) { $1 })
        #expect(try command.process.resolve(settings).foreground == false, "BUCKETFS_FOREGROUND is not read")
        let (viaO, fromO) = try await Self.resolve(["-o", "foreground"], environment: scratch.environment)
        #expect(try viaO.process.resolve(fromO).foreground)
        #expect(await Self.usageMessage(["-o", "ready_fd=3"], environment: scratch.environment)
            == "unknown mount option(s): ready_fd=3 (see bucketfs mount --help)")
    }
}
