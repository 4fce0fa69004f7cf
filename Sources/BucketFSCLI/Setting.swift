import ArgumentParser
import Configuration
import Logging

/// One setting of `bucketfs mount`, declared once: its name (the long
/// option `--NAME`, `-o NAME=VALUE` with `-` or `_`, the config file key
/// and `BUCKETFS_NAME` with `_`), its type, default, help and the places
/// it may come from. The `@Option`s refer to it, `SettingsResolver` reads
/// it, and the docs' option table is generated from `Settings.all`.
struct Setting<Value: SettingValue>: AnySetting {
    let name: String
    let help: String
    /// What `--help` and the docs show after the name (`MiB`, `S`, …).
    let valueName: String
    let defaultValue: Value?
    /// The default in words when it is computed (`the mounting user`).
    let defaultText: String?
    let origins: SettingOrigins
    let hidden: Bool
    /// Shown by `bucketfs status`: not the credential settings, and not
    /// the hidden ones (tuning knobs for tests, absent from --help and the
    /// docs, so a user could not look them up).
    let inStatus: Bool

    init(
        _ name: String, _ valueName: String = "", default defaultValue: Value? = nil, defaultText: String? = nil,
        from origins: SettingOrigins = .everywhere, hidden: Bool = false, inStatus: Bool = true, help: String
    ) {
        self.name = name
        self.valueName = valueName
        self.defaultValue = defaultValue
        self.defaultText = defaultText
        self.origins = origins
        self.hidden = hidden
        self.inStatus = inStatus && !hidden
        self.help = help
    }

    var isFlag: Bool { Value.self == Bool.self }
    var defaultDescription: String? { defaultText ?? defaultValue.map { $0.settingDescription } }
}

/// The parts of a setting that do not depend on its type.
protocol AnySetting: Sendable {
    var name: String { get }
    var help: String { get }
    var valueName: String { get }
    var origins: SettingOrigins { get }
    var hidden: Bool { get }
    var inStatus: Bool { get }
    var isFlag: Bool { get }
    var defaultDescription: String? { get }
}

extension AnySetting {
    var key: ConfigKey { ConfigKey(name) }
    var long: NameSpecification { .customLong(name) }
    /// `BUCKETFS_STAT_TTL` for `stat-ttl`: the name swift-configuration's
    /// environment provider looks up under the `bucketfs` prefix.
    var environmentName: String { "BUCKETFS_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }
    /// The help line with the default, which `--help` cannot show itself:
    /// the options are optional so that a value given on the command line
    /// can be told from one that is not.
    var argumentHelp: ArgumentHelp {
        let text = defaultDescription.map { "\(help) (default: \($0))" } ?? help
        return hidden ? .hidden : ArgumentHelp(text, valueName: valueName.isEmpty ? nil : valueName)
    }
}

/// Where a setting may come from besides its long option.
struct SettingOrigins: OptionSet, Sendable {
    let rawValue: Int
    static let mountOption = SettingOrigins(rawValue: 1)
    static let environment = SettingOrigins(rawValue: 2)
    static let configFile = SettingOrigins(rawValue: 4)
    static let everywhere: SettingOrigins = [.mountOption, .environment, .configFile]
    static let commandLineOnly: SettingOrigins = []
}

/// A type a setting can have: read from swift-configuration by its typed
/// reads, and shown in the docs and in `bucketfs status`.
protocol SettingValue: ExpressibleByArgument, Sendable {
    /// nil when no source has the key; a value that does not convert is
    /// reported through the reader's access reporter.
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws(CLIError) -> Self?
    var settingDescription: String { get }
}

extension SettingValue where Self: CustomStringConvertible {
    var settingDescription: String { description }
}

extension Bool: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) -> Bool? { reader.bool(forKey: key) }
}

extension Int: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) -> Int? { reader.int(forKey: key) }
}

extension Double: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) -> Double? { reader.double(forKey: key) }
}

extension String: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) -> String? { reader.string(forKey: key) }
}

extension UInt32: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws(CLIError) -> UInt32? {
        guard let number = reader.int(forKey: key) else { return nil }
        guard let value = UInt32(exactly: number) else { throw CLIError.usage("\(key): \(number) is not a user or group id") }
        return value
    }
}

extension Int32: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws(CLIError) -> Int32? {
        guard let number = reader.int(forKey: key) else { return nil }
        guard let value = Int32(exactly: number) else { throw CLIError.usage("\(key): \(number) is out of range") }
        return value
    }
}

extension Logger.Level: SettingValue {
    static func read(_ reader: ConfigReader, _ key: ConfigKey) -> Logger.Level? { reader.string(forKey: key, as: Logger.Level.self) }
    var settingDescription: String { rawValue }
}

enum LogFormat: String, ExpressibleByArgument, SettingValue {
    case text, json

    static func read(_ reader: ConfigReader, _ key: ConfigKey) -> LogFormat? { reader.string(forKey: key, as: LogFormat.self) }
    var settingDescription: String { rawValue }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
