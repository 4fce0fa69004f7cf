import Configuration
import Foundation
import SystemPackage

/// Mount options from a config file and the environment, read with
/// swift-configuration, for every option the command line leaves out.
///
/// Precedence, highest first: the command line (flags and `-o`), then
/// `BUCKETFS_<OPTION>` environment variables (`BUCKETFS_STAT_TTL=30`), then
/// the config file, then the built-in defaults. The config file is JSON
/// whose keys are the long option names:
///
///     { "stat-ttl": 30, "cache-size": 2048, "read-only": true,
///       "endpoint": "http://127.0.0.1:9023", "fuse-options": ["allow_other"] }
///
/// It is `--config FILE` (`-o config=FILE` in /etc/fstab), else
/// `$BUCKETFS_CONFIG`, else the first of `$XDG_CONFIG_HOME/bucketfs/config.json`
/// (`~/.config/…`) and `/etc/bucketfs/config.json` that exists. An unknown
/// key or a missing named file is an error (exit 64), not silently ignored.
///
/// The values join the arguments as `--name value` before ArgumentParser
/// sees them, so they are validated, and shown in errors, like flags.
enum MountConfiguration {
    /// The key for libfuse's own options (allow_other, default_permissions…):
    /// a string (comma separated) or an array of strings.
    static let fuseOptionsKey = "fuse-options"
    static let environmentPrefix = "BUCKETFS"

    /// The options a config file or the environment may set: every long
    /// option of `mount` but the ones that only make sense per invocation.
    static var configurableValues: Set<String> {
        ArgumentRewriting.valueOptions.subtracting(["config", "ready-fd"])
    }
    static var configurableFlags: Set<String> { ArgumentRewriting.flagOptions.subtracting(["foreground"]) }

    /// `arguments` without the program name, as rewritten by
    /// `ArgumentRewriting`; returns them with the file's and environment's
    /// values added. Other subcommands pass through.
    static func apply(to arguments: [String], environment: [String: String]) async throws -> [String] {
        guard arguments.first == "mount" else { return arguments }
        let given = givenOptions(arguments)
        var providers: [any ConfigProvider] = [
            EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: ConfigKey(environmentPrefix.lowercased()))
        ]
        if let path = try configFile(arguments: arguments, environment: environment) {
            try validateKeys(path)
            do {
                providers.append(try await FileProvider<JSONSnapshot>(filePath: FilePath(path)))
            } catch {
                throw CLIError.usage("config file \(path): \(error)")
            }
        }
        let reader = ConfigReader(providers: providers)
        var added: [String] = []
        for name in configurableValues.sorted() where !given.contains(name) {
            let key = ConfigKey(name)
            if let value = reader.string(forKey: key) ?? reader.int(forKey: key).map(String.init)
                ?? reader.double(forKey: key).map({ String($0) }) {
                added += ["--\(name)", value]
            }
        }
        for name in configurableFlags.sorted() where !given.contains(name) && reader.bool(forKey: ConfigKey(name)) == true {
            added.append("--\(name)")
        }
        let fuseKey = ConfigKey(fuseOptionsKey)
        if let options = reader.stringArray(forKey: fuseKey) ?? reader.string(forKey: fuseKey).map({ [$0] }), !options.isEmpty {
            added += ["-o", options.joined(separator: ",")]
        }
        guard !added.isEmpty else { return arguments }
        // -o values from the file may hold bucketfs's own options too.
        return Array(ArgumentRewriting.rewrite(["bucketfs"] + arguments + added).dropFirst())
    }

    /// Long option names on the command line (`--name` or `--name=value`).
    static func givenOptions(_ arguments: [String]) -> Set<String> {
        Set(arguments.compactMap { argument in
            guard argument.hasPrefix("--"), argument.count > 2 else { return nil }
            return String(argument.dropFirst(2).prefix { $0 != "=" })
        })
    }

    /// The config file to read, or nil when none is named and no default exists.
    static func configFile(arguments: [String], environment: [String: String]) throws -> String? {
        var named: String?
        for (index, argument) in arguments.enumerated() {
            if argument == "--config", index + 1 < arguments.count { named = arguments[index + 1] }
            if argument.hasPrefix("--config=") { named = String(argument.dropFirst("--config=".count)) }
        }
        if let named = named ?? environment["\(environmentPrefix)_CONFIG"] {
            guard FileManager.default.isReadableFile(atPath: named) else {
                throw CLIError.usage("config file \(named) does not exist or cannot be read")
            }
            return named
        }
        return defaultPaths(environment: environment).first { FileManager.default.fileExists(atPath: $0) }
    }

    static func defaultPaths(environment: [String: String]) -> [String] {
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["HOME"].map { $0 + "/.config" }
        return (configHome.map { [$0 + "/bucketfs/config.json"] } ?? []) + ["/etc/bucketfs/config.json"]
    }

    /// A misspelt key would otherwise be ignored without a word.
    private static func validateKeys(_ path: String) throws {
        guard let data = FileManager.default.contents(atPath: path),
              let object = try? JSONSerialization.jsonObject(with: data) else {
            throw CLIError.usage("config file \(path) is not valid JSON")
        }
        guard let keys = (object as? [String: Any])?.keys else {
            throw CLIError.usage("config file \(path) must hold one JSON object of option names")
        }
        let known = configurableValues.union(configurableFlags).union([fuseOptionsKey])
        let unknown = keys.filter { !known.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw CLIError.usage("config file \(path): unknown option(s) \(unknown.joined(separator: ", ")) (see bucketfs mount --help)")
        }
    }
}
