import ArgumentParser
import Foundation
import FSCore
import StorageKit

/// The mount settings a volume of the CSI driver may carry (StorageClass
/// parameters, a static volume's attributes, mount flags): `Settings`,
/// the one settings table, less those that name files on the node or
/// steer the process, which the driver sets itself (declared without
/// the `.volume` origin). The driver checks a
/// volume with the same resolution `bucketfs mount` runs, so a value
/// refused here is one the mount would refuse.
public enum VolumeSettings {
    /// Names (config-file spelling) a volume may set, in the table's
    /// order: the settings that may come from a volume (`.volume`), not
    /// hidden.
    public static var names: [String] {
        Settings.all.filter { $0.origins.contains(.volume) && !$0.hidden }.map(\.name)
    }

    /// Names that are settings but are not a volume's to set: credentials
    /// files (a volume names its credentials through a Secret, never a
    /// path on the node), where the cache and log go, the process's own
    /// switches.
    public static var refusedNames: [String] { Settings.all.filter { !$0.origins.contains(.volume) }.map(\.name) }

    /// A refusal, worded for the Kubernetes user who wrote the volume.
    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// Checks `settings` (name to value, a flag as "true"/"false") as
    /// `bucketfs mount gs://BUCKET/PREFIX` would resolve them, without
    /// touching the node or the network.
    public static func check(_ settings: [String: String], bucket: String, prefix: String) async throws(Refusal) {
        let refused = Set(refusedNames)
        let allowed = Set(names)
        for name in settings.keys.sorted() {
            if refused.contains(name) {
                throw Refusal(description: "\(name) cannot be set on a volume: the driver sets it (credentials come from a Secret)")
            }
            guard allowed.contains(name) else {
                throw Refusal(description: "\(name) is not a bucketfs setting (see docs/mounting.md for the list)")
            }
        }
        let url = "gs://\(bucket)/\(prefix)"
        do {
            let command = try MountCommand.parse(mountArguments(settings) + [url, "/nonexistent"])
            _ = try await command.resolve(environment: [:])
        } catch let error as CLIError {
            throw Refusal(description: error.description)
        } catch {
            throw Refusal(description: MountCommand.message(for: error))
        }
    }

    /// `settings` as `bucketfs mount` arguments: one `-o name=value` each,
    /// so that a value with a comma stays whole.
    public static func mountArguments(_ settings: [String: String]) -> [String] {
        settings.keys.sorted().flatMap { ["-o", "\($0)=\(settings[$0] ?? "")"] }
    }
}

/// A connection to a bucket for the driver's controller, made the way
/// `bucketfs mount` makes one from the same settings.
public enum BucketConnection {
    /// `keyFile` or `tokenFile` (paths the driver wrote a Secret to), else
    /// `anonymous`, else the Application Default Credentials.
    public static func objectStore(
        bucket: String, endpoint: String?, anonymous: Bool, keyFile: String?, tokenFile: String?
    ) throws(VolumeSettings.Refusal) -> StorageKitObjectStore {
        var arguments: [String] = []
        if let endpoint { arguments += ["--" + Settings.endpoint.name, endpoint] }
        if let keyFile { arguments += ["--" + Settings.keyFile.name, keyFile] }
        if let tokenFile { arguments += ["--" + Settings.tokenFile.name, tokenFile] }
        if anonymous && keyFile == nil && tokenFile == nil { arguments.append("--" + Settings.anonymous.name) }
        do {
            // Parsed, not built: ArgumentParser's wrappers hold values only after a parse.
            let options = try StorageOptions.parse(arguments)
            let configuration = try options.configuration()
            return StorageKitObjectStore(storage: Storage(bucket: bucket, configuration: configuration))
        } catch let error as CLIError {
            throw VolumeSettings.Refusal(description: error.description)
        } catch {
            throw VolumeSettings.Refusal(description: MountCommand.message(for: error))
        }
    }
}

extension MountCommand {
    /// A parser's or validator's error in the words `--help` would use.
    static func message(for error: any Error) -> String {
        if let error = error as? ValidationError { return error.message }
        return MountCommand.fullMessage(for: error).components(separatedBy: "\n").first ?? "\(error)"
    }
}
