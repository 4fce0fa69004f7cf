import ArgumentParser
import Configuration
import FSCore
import Logging

/// One setting of `bucketfs mount`, declared once: its name (the long
/// option `--NAME`, `-o NAME=VALUE` with `-` or `_`, the config file key,
/// `BUCKETFS_NAME` with `_` and a CSI volume's key), its type, default,
/// range, help, the places it may come from, and its place: the option
/// that holds it and the `MountOptions` field it fills. The `@Option`s are
/// declared with it, `SettingsResolver` reads it, validation, `status`,
/// the CSI driver and the docs' option table loop over `Settings.all`.
struct Setting<Value: SettingValue>: AnySetting {
    let name: String
    let help: String
    /// What `--help` and the docs show after the name (`MiB`, `S`, …).
    let valueName: String
    let defaultValue: Value?
    /// The default in words when it is computed (`the mounting user`).
    let defaultText: String?
    /// The default when it depends on the mount (the user, the bucket).
    let fallback: (@Sendable (SettingContext) -> Value)?
    let range: SettingRange<Value>?
    let place: SettingPlace<Value>
    let origins: SettingOrigins
    let hidden: Bool
    /// Shown by `bucketfs status`: not the credential settings, and not
    /// the hidden ones (tuning knobs for tests, absent from --help and the
    /// docs, so a user could not look them up).
    let inStatus: Bool

    init(
        _ place: SettingPlace<Value>, _ name: String, _ valueName: String = "", default defaultValue: Value? = nil,
        defaultText: String? = nil, fallback: (@Sendable (SettingContext) -> Value)? = nil, range: SettingRange<Value>? = nil,
        from origins: SettingOrigins = .everywhere, hidden: Bool = false, inStatus: Bool = true, help: String
    ) {
        self.place = place
        self.name = name
        self.valueName = valueName
        self.defaultValue = defaultValue
        self.defaultText = defaultText
        self.fallback = fallback
        self.range = range
        self.origins = origins
        self.hidden = hidden
        self.inStatus = inStatus && !hidden
        self.help = help
    }

    var isFlag: Bool { Value.self == Bool.self }
    var defaultDescription: String? { defaultText ?? defaultValue.map { $0.settingDescription } }

    func resolve<Root>(_ root: inout Root, _ resolver: SettingsResolver, _ context: SettingContext) throws(CLIError) {
        guard let slot = place.slot(in: Root.self) else { return }
        let value = try resolver.optional(self, slot.get(root), context: context)
        slot.set(&root, value)
    }

    func apply(_ flags: FilesystemFlags, to options: inout MountOptions) throws(CLIError) {
        guard case .filesystemFlag(let slot, let field?) = place, let value = slot.get(flags) ?? Value.unset else { return }
        guard field.set(&options, value) else { throw CLIError.usage("--\(name) \(value.settingDescription) \(field.refusal)") }
    }

    var fillsMountOptions: Bool {
        if case .filesystemFlag(_, _?) = place { true } else { false }
    }

    func isGiven(in command: MountCommand) -> Bool {
        switch place {
        case .storageOption(let slot): slot.get(command.storageOptions) != nil
        case .filesystemFlag(let slot, _): slot.get(command.filesystem) != nil
        case .processFlag(let slot): slot.get(command.process) != nil
        }
    }
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
    /// When the option is declared in `Root` (an option group): resolves
    /// its value there (`SettingsResolver.optional`), checked against the range.
    func resolve<Root>(_ root: inout Root, _ resolver: SettingsResolver, _ context: SettingContext) throws(CLIError)
    /// For a filesystem setting with a `MountOptions` field: sets it from resolved `flags`.
    func apply(_ flags: FilesystemFlags, to options: inout MountOptions) throws(CLIError)
    var fillsMountOptions: Bool { get }
    /// Whether the command line gave it: its place holds a value after parsing.
    func isGiven(in command: MountCommand) -> Bool
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
    /// A CSI volume's StorageClass parameters, attributes or mount flags.
    static let volume = SettingOrigins(rawValue: 8)
    static let everywhere: SettingOrigins = [.mountOption, .environment, .configFile, .volume]
    /// Not a volume: a path on the node, or how the driver runs the mount.
    static let node: SettingOrigins = [.mountOption, .environment, .configFile]
    static let commandLineOnly: SettingOrigins = []
}

/// A type a setting can have: read from swift-configuration by its typed
/// reads, and shown in the docs and in `bucketfs status`.
protocol SettingValue: ExpressibleByArgument, Sendable {
    /// nil when no source has the key; a value that does not convert is
    /// reported through the reader's access reporter.
    static func read(_ reader: ConfigReader, _ key: ConfigKey) throws(CLIError) -> Self?
    var settingDescription: String { get }
    /// The value when nothing gives one and there is no default.
    static var unset: Self? { get }
}

extension SettingValue {
    static var unset: Self? { nil }
}

extension SettingValue where Self: CustomStringConvertible {
    var settingDescription: String { description }
}

extension Bool: SettingValue {
    /// A flag nobody turned on is off.
    static var unset: Bool? { false }
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
