import BucketFSCLI
import Foundation

/// What a volume is: a bucket, a prefix in it ("" or ending in "/") and
/// the bucketfs settings it is mounted with (config-file names; `endpoint`
/// and `anonymous` among them). It comes from a StorageClass's parameters
/// (CreateVolume), a static PersistentVolume's handle and attributes, or
/// an inline ephemeral volume's attributes, which all take the same keys.
public struct VolumeSpec: Sendable, Equatable {
    public var bucket: String
    public var prefix: String
    public var settings: [String: String]

    /// The keys that are not settings: where the volume is.
    public static let bucketKey = "bucket"
    public static let prefixKey = "prefix"
    /// Kubernetes' own keys (`csi.storage.k8s.io/pod.name`, `…/ephemeral`,
    /// `…/pv/name`): information, never settings.
    public static let kubernetesKeyPrefix = "csi.storage.k8s.io/"

    public init(bucket: String, prefix: String, settings: [String: String] = [:]) {
        self.bucket = bucket
        self.prefix = Self.normalized(prefix)
        self.settings = settings
    }

    /// The keys a StorageClass, a volume's attributes or an ephemeral
    /// volume may hold: `bucket`, `prefix` and the volume settings.
    public static var acceptedKeys: [String] { [bucketKey, prefixKey] + VolumeSettings.names }

    /// The spec in `attributes` (parameters or volume context); `bucket`
    /// from `fallbackID` (a static volume's handle, `BUCKET[/PREFIX]`)
    /// when the attributes name none. Checks names and values as the mount
    /// would; a refusal says which key.
    public static func parse(_ attributes: [String: String], fallbackID: String? = nil) async throws(VolumeSettings.Refusal) -> VolumeSpec {
        var settings = attributes.filter { !$0.key.hasPrefix(kubernetesKeyPrefix) }
        let bucket = settings.removeValue(forKey: bucketKey)
        let prefix = settings.removeValue(forKey: prefixKey) ?? ""
        var spec: VolumeSpec
        if let bucket {
            spec = VolumeSpec(bucket: bucket, prefix: prefix, settings: settings)
        } else if let fallbackID, let handle = VolumeID(fallbackID) {
            spec = VolumeSpec(bucket: handle.bucket, prefix: handle.prefix + normalized(prefix), settings: settings)
            spec.settings.merge(handle.settings) { given, _ in given }
        } else {
            throw VolumeSettings.Refusal(description: "no bucket: give the parameter or volume attribute \"bucket\"")
        }
        try check(bucket: spec.bucket, prefix: spec.prefix)
        try await VolumeSettings.check(spec.settings, bucket: spec.bucket, prefix: spec.prefix)
        return spec
    }

    /// A bucket name as Cloud Storage allows it (3-222 characters of
    /// lowercase letters, digits, `-`, `_` and `.`, starting and ending
    /// with a letter or digit) and a prefix with no empty or dot segment.
    static func check(bucket: String, prefix: String) throws(VolumeSettings.Refusal) {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-_.")
        guard (3...222).contains(bucket.count), bucket.allSatisfy(allowed.contains),
              bucket.first.map({ $0.isLetter || $0.isNumber }) == true, bucket.last.map({ $0.isLetter || $0.isNumber }) == true
        else { throw VolumeSettings.Refusal(description: "\"\(bucket)\" is not a bucket name") }
        let segments = prefix.split(separator: "/", omittingEmptySubsequences: false).dropLast()
        guard segments.allSatisfy({ !$0.isEmpty && $0 != "." && $0 != ".." }) else {
            throw VolumeSettings.Refusal(description: "\"\(prefix)\" is not a usable prefix (empty, . or .. segment)")
        }
    }

    /// "" or the prefix with one trailing "/" and no leading one.
    static func normalized(_ prefix: String) -> String {
        let trimmed = prefix.trimmingCharacters(in: CharacterSet(charactersIn: "/"))
        return trimmed.isEmpty ? "" : trimmed + "/"
    }

    /// `gs://BUCKET/PREFIX`, as `bucketfs mount` takes it.
    public var url: String { "gs://\(bucket)/\(prefix)" }

    /// The volume context a created volume carries to NodePublishVolume.
    public var context: [String: String] {
        var context = settings
        context[Self.bucketKey] = bucket
        context[Self.prefixKey] = prefix
        return context
    }
}

/// A volume's id: `BUCKET/PREFIX`, with `?endpoint=…&anonymous=true` when
/// the volume names them, since DeleteVolume gets nothing but the id (and
/// secrets) and must still reach the same bucket the same way. A static
/// volume's handle is read the same way (`BUCKET` or `BUCKET/PREFIX`).
public struct VolumeID: Sendable, Equatable, CustomStringConvertible {
    public var bucket: String
    public var prefix: String
    /// `endpoint` and `anonymous`, when given.
    public var settings: [String: String]

    static let carriedSettings = ["endpoint", "anonymous"]

    public init(_ spec: VolumeSpec) {
        bucket = spec.bucket
        prefix = spec.prefix
        settings = spec.settings.filter { Self.carriedSettings.contains($0.key) }
    }

    /// Nil for an id with no bucket part.
    public init?(_ text: String) {
        let withoutScheme = text.hasPrefix("gs://") ? String(text.dropFirst(5)) : text
        let parts = withoutScheme.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let path = String(parts[0])
        guard let slash = path.firstIndex(of: "/") else {
            guard (try? VolumeSpec.check(bucket: path, prefix: "")) != nil else { return nil }
            bucket = path
            prefix = ""
            settings = parts.count > 1 ? Self.query(String(parts[1])) : [:]
            return
        }
        bucket = String(path[..<slash])
        prefix = VolumeSpec.normalized(String(path[path.index(after: slash)...]))
        settings = parts.count > 1 ? Self.query(String(parts[1])) : [:]
        // Not a bucket name: not a volume (and no request is made for it).
        guard (try? VolumeSpec.check(bucket: bucket, prefix: prefix)) != nil else { return nil }
    }

    private static func query(_ text: String) -> [String: String] {
        var components = URLComponents()
        components.percentEncodedQuery = text
        var settings: [String: String] = [:]
        for item in components.queryItems ?? [] where carriedSettings.contains(item.name) {
            settings[item.name] = item.value ?? ""
        }
        return settings
    }

    public var description: String {
        let path = prefix.isEmpty ? bucket : bucket + "/" + String(prefix.dropLast())
        guard !settings.isEmpty else { return path }
        var components = URLComponents()
        components.queryItems = settings.keys.sorted().map { URLQueryItem(name: $0, value: settings[$0]) }
        return path + "?" + (components.percentEncodedQuery ?? "")
    }
}
