import ArgumentParser
import FSCore

/// Where a setting's option is declared (the `@Option`/`@Flag` that holds
/// the command line's value) and so where its resolved value is kept; for
/// a filesystem setting also the `MountOptions` field it fills. Resolution
/// (`Settings.resolve`) and `MountOptions` (`FilesystemFlags.mountOptions`)
/// loop over the table through these.
enum SettingPlace<Value: SettingValue>: Sendable {
    case storageOption(Slot<StorageOptions, Value>)
    case filesystemFlag(Slot<FilesystemFlags, Value>, into: MountField<Value>?)
    case processFlag(Slot<ProcessFlags, Value>)

    static func storage(_ path: WritableKeyPath<StorageOptions, Value?> & Sendable) -> Self { .storageOption(Slot(path)) }
    static func filesystem(_ path: WritableKeyPath<FilesystemFlags, Value?> & Sendable, into field: MountField<Value>? = nil) -> Self {
        .filesystemFlag(Slot(path), into: field)
    }
    static func process(_ path: WritableKeyPath<ProcessFlags, Value?> & Sendable) -> Self { .processFlag(Slot(path)) }

    /// The slot when the option is declared in `Root`.
    func slot<Root>(in _: Root.Type) -> Slot<Root, Value>? {
        switch self {
        case .storageOption(let slot): slot as? Slot<Root, Value>
        case .filesystemFlag(let slot, _): slot as? Slot<Root, Value>
        case .processFlag(let slot): slot as? Slot<Root, Value>
        }
    }
}

extension SettingPlace where Value == Bool {
    static func storage(flag path: WritableKeyPath<StorageOptions, Bool> & Sendable) -> Self { .storageOption(Slot(flag: path)) }
    static func filesystem(flag path: WritableKeyPath<FilesystemFlags, Bool> & Sendable, into field: MountField<Bool>? = nil) -> Self {
        .filesystemFlag(Slot(flag: path), into: field)
    }
    static func process(flag path: WritableKeyPath<ProcessFlags, Bool> & Sendable) -> Self { .processFlag(Slot(flag: path)) }
}

/// A setting's property in an option group: nil when the command line
/// did not give it, the resolved value once `Settings.resolve` ran.
struct Slot<Root, Value: SettingValue>: Sendable {
    let get: @Sendable (Root) -> Value?
    let set: @Sendable (inout Root, Value?) -> Void

    init(_ path: WritableKeyPath<Root, Value?> & Sendable) {
        get = { $0[keyPath: path] }
        set = { $0[keyPath: path] = $1 }
    }
}

extension Slot where Value == Bool {
    /// A flag: given when on (a flag cannot be turned off from the command line).
    init(flag path: WritableKeyPath<Root, Bool> & Sendable) {
        get = { $0[keyPath: path] ? true : nil }
        set = { $0[keyPath: path] = $1 ?? false }
    }
}

/// How a filesystem setting's value becomes its field of `MountOptions`.
struct MountField<Value>: Sendable {
    /// Sets the field; false when the value does not convert.
    let set: @Sendable (inout MountOptions, Value) -> Bool
    /// What follows `--NAME VALUE` in the error for a value that does not convert.
    let refusal: String

    /// The field has the setting's type and unit.
    static func field(_ path: WritableKeyPath<MountOptions, Value> & Sendable) -> Self {
        MountField(set: { options, value in
            options[keyPath: path] = value
            return true
        }, refusal: "")
    }

    static func converted<Field>(
        _ path: WritableKeyPath<MountOptions, Field> & Sendable, _ convert: @escaping @Sendable (Value) -> Field
    ) -> Self {
        MountField(set: { options, value in
            options[keyPath: path] = convert(value)
            return true
        }, refusal: "")
    }

    /// `parse` returns nil for a value it refuses.
    static func parsed<Field>(
        _ path: WritableKeyPath<MountOptions, Field> & Sendable, refusal: String, _ parse: @escaping @Sendable (Value) -> Field?
    ) -> Self {
        MountField(set: { options, value in
            guard let field = parse(value) else { return false }
            options[keyPath: path] = field
            return true
        }, refusal: refusal)
    }
}

extension MountField where Value == Int {
    /// A setting in MiB, a field in bytes.
    static func mebibytes(_ path: WritableKeyPath<MountOptions, Int64> & Sendable) -> Self {
        converted(path) { Int64($0) << 20 }
    }
}

/// The values a setting allows, and the error for one outside them.
struct SettingRange<Value>: Sendable {
    let contains: @Sendable (Value) -> Bool
    /// The message, given the setting's name.
    let refusal: @Sendable (String) -> String
}

extension SettingRange where Value: Comparable & ExpressibleByIntegerLiteral & Sendable {
    /// 0 or more; `what` names the kind in the error (`TTLs cannot be negative`).
    static func nonNegative(_ what: String) -> Self {
        SettingRange(contains: { $0 >= 0 }, refusal: { _ in "\(what) cannot be negative" })
    }

    /// `--NAME must be LOW to HIGH[ UNIT]`.
    static func within(_ bounds: ClosedRange<Value>, unit: String = "") -> Self {
        SettingRange(contains: { bounds.contains($0) }, refusal: { name in
            "--\(name) must be \(bounds.lowerBound) to \(bounds.upperBound)\(unit.isEmpty ? "" : " " + unit)"
        })
    }
}

/// What a default computed at mount time depends on (`--cache-dir`'s is
/// under HOME and named after the bucket).
struct SettingContext: Sendable {
    var home: String?
    var bucket: String = ""
}

extension Option {
    /// `@Option(Settings.name) var name: T?`: the setting's long name and help.
    init<T: SettingValue>(_ setting: Setting<T>) where Value == T? {
        self.init(name: setting.long, help: setting.argumentHelp)
    }
}

extension Flag where Value == Bool {
    /// `@Flag(Settings.name) var name = false`.
    init(wrappedValue: Bool, _ setting: Setting<Bool>) {
        self.init(wrappedValue: wrappedValue, name: setting.long, help: setting.argumentHelp)
    }
}
