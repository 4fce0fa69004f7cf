import Configuration
import Foundation
import Synchronization
import SystemPackage

/// Resolves the settings of `bucketfs mount` with swift-configuration's
/// typed reads. Precedence, highest first: the long option on the command
/// line, then `-o name=value`, then `BUCKETFS_<NAME>` variables, then the
/// config file, then the setting's default; each setting is read only from
/// the places its `origins` allow. A value that does not convert to the
/// setting's type is an error (exit 64) naming where it came from.
///
/// The config file is `--config FILE` (`-o config=FILE`), else
/// `$BUCKETFS_CONFIG`, else the first of `$XDG_CONFIG_HOME/bucketfs/config.json`
/// (`~/.config/…`) and `/etc/bucketfs/config.json` that exists. An unknown
/// key or a missing named file is an error, not silently ignored.
final class SettingsResolver: Sendable {
    /// One place values come from, in precedence order.
    struct Source: Sendable {
        let origin: SettingOrigins
        /// How errors name it: `-o`, `the environment`, `config file PATH`.
        let label: String
        let provider: any ConfigProvider
    }

    let sources: [Source]
    let configFile: String?
    /// libfuse's options from `-o`, then those of the environment or file.
    let fuseOptions: [String]
    /// The value each setting resolved to, as `bucketfs status` shows them.
    private let resolved = Mutex<[String: String]>([:])
    private let failures = Mutex<[String]>([])

    /// `mountOptions` are the arguments of every `-o`; `givenConfig` is `--config`.
    init(mountOptions: [String], givenConfig: String?, environment: [String: String]) async throws(CLIError) {
        let sorted = MountOptionParsing.sort(mountOptions, ownNames: Settings.mountOptionNames)
        guard sorted.unknown.isEmpty else {
            throw CLIError.usage("unknown mount option(s): \(sorted.unknown.joined(separator: ",")) (see bucketfs mount --help)")
        }
        // -o values are strings, as in the environment: the same provider
        // parses both, under the names it would look up.
        var optionVariables: [String: String] = [:]
        for (name, value) in sorted.own {
            guard let setting = Settings.named(name) else { continue }
            optionVariables[setting.environmentName] = value ?? "true"
        }
        let prefix = ConfigKey("bucketfs")
        var sources = [
            Source(
                origin: .mountOption, label: "-o",
                provider: EnvironmentVariablesProvider(environmentVariables: optionVariables).prefixKeys(with: prefix)),
            Source(
                origin: .environment, label: "the environment",
                provider: EnvironmentVariablesProvider(environmentVariables: environment).prefixKeys(with: prefix)),
        ]
        let namedConfig = givenConfig ?? Self.typedRead(Settings.config, sources: sources)
        let configFile = try Self.configFile(named: namedConfig, environment: environment)
        if let configFile {
            sources.append(Source(origin: .configFile, label: "config file \(configFile)", provider: try await Self.load(configFile)))
        }
        self.sources = sources
        self.configFile = configFile
        let lower = MountOptionParsing.sort(
            Self.fuseOptions(ConfigReader(providers: sources.dropFirst().map(\.provider))), ownNames: Settings.mountOptionNames)
        guard lower.own.isEmpty, lower.unknown.isEmpty else {
            let names = lower.own.map(\.0) + lower.unknown
            throw CLIError.usage("\(Settings.fuseOptionsKey) holds libfuse's options only, not \(names.joined(separator: ", ")) (give bucketfs's own as keys)")
        }
        self.fuseOptions = sorted.fuse + lower.fuse
    }

    /// The value of `setting`: `given` (from its long option) if any, else
    /// the first source that has it, else its default (computed in
    /// `context` when it depends on the mount); refused outside its range.
    func optional<Value>(_ setting: Setting<Value>, _ given: Value?, context: SettingContext = SettingContext()) throws(CLIError) -> Value? {
        var value = given
        if value == nil { value = try read(setting) ?? setting.defaultValue ?? setting.fallback?(context) ?? Value.unset }
        if let value, let range = setting.range, !range.contains(value) { throw CLIError.usage(range.refusal(setting.name)) }
        if setting.inStatus { resolved.withLock { $0[setting.name] = value?.settingDescription ?? "" } }
        return value
    }

    /// The settings as resolved so far, for `bucketfs status`.
    var effective: [String: String] { resolved.withLock { $0 } }

    private func read<Value>(_ setting: Setting<Value>) throws(CLIError) -> Value? {
        let allowed = sources.filter { setting.origins.contains($0.origin) }
        guard !allowed.isEmpty else { return nil }
        let reporter = FailureReporter()
        let reader = ConfigReader(providers: allowed.map(\.provider), accessReporter: reporter)
        let value = try Value.read(reader, setting.key)
        if let failure = reporter.first {
            let label = failure.providerIndex.map { allowed[$0].label } ?? "a source"
            let where_ = label == "the environment" ? setting.environmentName : label
            throw CLIError.usage("\(where_): the value of \(setting.name) is not \(Self.describe(failure.type))")
        }
        return value
    }

    /// For the config setting itself, read before the file is known.
    private static func typedRead(_ setting: Setting<String>, sources: [Source]) -> String? {
        let allowed = sources.filter { setting.origins.contains($0.origin) }
        return ConfigReader(providers: allowed.map(\.provider)).string(forKey: setting.key)
    }

    private static func describe(_ type: ConfigType) -> String {
        switch type {
        case .int: "a whole number"
        case .double: "a number"
        case .bool: "true or false"
        case .string: "one of the allowed words (see bucketfs mount --help)"
        default: "of type \(type.rawValue)"
        }
    }

    private static func fuseOptions(_ reader: ConfigReader) -> [String] {
        let key = ConfigKey(Settings.fuseOptionsKey)
        // A list in JSON; one comma-separated string in the environment or the file.
        let options = reader.stringArray(forKey: key) ?? reader.string(forKey: key).map { [$0] } ?? []
        return options.flatMap { $0.split(separator: ",").map(String.init) }.filter { !$0.isEmpty }
    }

    /// The config file to read, or nil when none is named and no default exists.
    static func configFile(named: String?, environment: [String: String]) throws(CLIError) -> String? {
        if let named {
            guard FileManager.default.isReadableFile(atPath: named) else {
                throw CLIError.usage("config file \(named) does not exist or cannot be read")
            }
            return named
        }
        return defaultConfigPaths(environment: environment).first { FileManager.default.fileExists(atPath: $0) }
    }

    static func defaultConfigPaths(environment: [String: String]) -> [String] {
        let configHome = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? environment["HOME"].map { $0 + "/.config" }
        return (configHome.map { [$0 + "/bucketfs/config.json"] } ?? []) + ["/etc/bucketfs/config.json"]
    }

    /// The file's provider, after checking that it names only known keys
    /// (a misspelt key would otherwise be ignored without a word). The
    /// JSON parser calls the secrets hook once per key: that is where the
    /// keys are collected, so the file is parsed once.
    static func load(_ path: String) async throws(CLIError) -> any ConfigProvider {
        let keys = Mutex<[String]>([])
        let options = JSONSnapshot.ParsingOptions(secretsSpecifier: .dynamic { key, _ in
            keys.withLock { $0.append(key) }
            return false
        })
        try checkJSON(path)
        let provider: FileProvider<JSONSnapshot>
        do {
            provider = try await FileProvider<JSONSnapshot>(parsingOptions: options, filePath: FilePath(path))
        } catch {
            throw CLIError.usage("config file \(path) is not valid JSON, or not one JSON object of option names: \(error)")
        }
        let unknown = keys.withLock { $0 }.filter { !Settings.configFileKeys.contains($0) }.sorted()
        guard unknown.isEmpty else {
            throw CLIError.usage("config file \(path): unknown option(s) \(unknown.joined(separator: ", ")) (see bucketfs mount --help)")
        }
        return provider
    }
}

extension SettingsResolver {
    /// That the file holds one JSON object, said in words that name the
    /// file and where the text goes wrong (the parsers' own errors are
    /// Foundation dumps: `NSCocoaErrorDomain Code=3840 …`).
    static func checkJSON(_ path: String) throws(CLIError) {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw CLIError.usage("config file \(path) cannot be read")
        }
        let parsed: Any
        do {
            parsed = try JSONSerialization.jsonObject(with: data)
        } catch {
            // Foundation says "Invalid value around character 22.": the
            // offset becomes a line and column, the rest the reason.
            let said = (error as NSError).userInfo["NSDebugDescription"] as? String ?? ""
            let offset = said.firstMatch(of: /around character (\d+)/).flatMap { Int($0.output.1) }
            let at = offset.map { " at \(position(in: data, offset: min($0, data.count)))" } ?? ""
            let reason = said.split(separator: " around ").first.map { $0.trimmingCharacters(in: CharacterSet(charactersIn: ". ")) } ?? ""
            throw CLIError.usage(
                "config file \(path) is not JSON\(at)\(reason.isEmpty ? "" : ": \(reason.lowercased())"); it must be one JSON object of option names")
        }
        guard parsed is [String: Any] else {
            throw CLIError.usage("config file \(path) must be one JSON object of option names, like {\"stat-ttl\": 30}")
        }
    }

    /// "line L, column C" (both from 1) of byte `offset` of `data`.
    static func position(in data: Data, offset: Int) -> String {
        let before = data.prefix(offset)
        let line = before.count { $0 == UInt8(ascii: "\n") } + 1
        let lineStart = before.lastIndex(of: UInt8(ascii: "\n")).map { $0 + 1 } ?? before.startIndex
        let column = String(decoding: before[lineStart...], as: UTF8.self).count + 1
        return "line \(line), column \(column)"
    }
}

/// Remembers the first read whose value was there but did not convert
/// (the non-throwing typed reads report it only here).
private final class FailureReporter: AccessReporter, Sendable {
    struct Failure {
        /// Which of the reader's providers held the value.
        let providerIndex: Int?
        let type: ConfigType
    }

    private let failure = Mutex<Failure?>(nil)
    var first: Failure? { failure.withLock { $0 } }

    func report(_ event: AccessEvent) {
        let results = event.providerResults
        let failedProvider = results.firstIndex { if case .failure = $0.result { true } else { false } }
        let holder = results.firstIndex { if case .success(let lookup) = $0.result { lookup.value != nil } else { false } }
        guard failedProvider != nil || event.conversionError != nil else { return }
        failure.withLock { $0 = $0 ?? Failure(providerIndex: failedProvider ?? holder, type: event.metadata.valueType) }
    }
}
