import Foundation
import StorageKit
#if canImport(Glibc)
import Glibc
#endif

// Object metadata as extended attributes: which names mean what, what a
// value may be, the service's limits. Pure (no store, no state), so each
// rule is unit-tested on its own; `FileSystem+ExtendedAttributes` does the
// I/O. docs/xattrs.md repeats this table for users.
//
//   xattr                     object                        listed  get      set / remove
//   user.KEY                  customMetadata[KEY]           yes     value    PATCH
//   user.goog-reserved-*      POSIX attributes (mode, ...)  no      ENODATA  EPERM
//   gcs.contentType, ... (5)  writable standard property    no      value    PATCH (remove: null)
//   gcs.size, ... (10)        read-only property            no      value    EPERM
//   gcs.OTHER                 -                             no      ENODATA  EOPNOTSUPP
//   security./trusted./system./any other namespace          no      EOPNOTSUPP, without a request
//
// Why a namespace of its own for the properties: every custom key is some
// `user.KEY`, so `user.contentType` would already mean the custom key
// "contentType" (a legal key other tools may have written). Under `gcs.`
// no custom key can collide, and no escape rule is needed. The kernel
// hands any namespace to a FUSE filesystem (checked on Linux 6.18:
// `setfattr -n gcs.x` and `getfattr -n gcs.x` reach the daemon; the mount
// tests use it). The `gcs.*` names are not listed, like CephFS's
// virtual `ceph.*` attributes: `cp --preserve=xattr` and `rsync -X` copy
// what listxattr names, and a local disk refuses `gcs.*` (and a second
// bucket refuses `gcs.size`), so listing them would make every copy out of
// the mount fail. They are read by name.

/// What one extended attribute name refers to.
public enum ExtendedAttributeName: Sendable, Equatable {
    /// `user.KEY`: the custom metadata key KEY (possibly empty: invalid).
    case custom(key: String)
    /// `user.goog-reserved-*`: custom keys that carry POSIX attributes
    /// (`goog-reserved-file-mtime`, `-posix-mode`, `-uid`, `-gid`, and any
    /// future one). They belong to stat/chmod/touch, not to xattrs.
    case reservedKey(String)
    /// `gcs.PROPERTY`: a standard property of the object.
    case property(ObjectProperty)
    /// `gcs.` followed by something that is no property.
    case unknownProperty(String)
    /// Any other namespace (security., trusted., system., ...).
    case unsupportedNamespace

    public static let customPrefix = "user."
    public static let propertyPrefix = "gcs."
    static let reservedKeyPrefix = "goog-reserved-"

    public init(_ name: String) {
        if name.hasPrefix(Self.customPrefix) {
            let key = String(name.dropFirst(Self.customPrefix.count))
            self = key.hasPrefix(Self.reservedKeyPrefix) ? .reservedKey(key) : .custom(key: key)
        } else if name.hasPrefix(Self.propertyPrefix) {
            let property = String(name.dropFirst(Self.propertyPrefix.count))
            self = ObjectProperty(rawValue: property).map(Self.property) ?? .unknownProperty(property)
        } else {
            self = .unsupportedNamespace
        }
    }

    /// Whether the filesystem answers `name` at all. Anything else (the
    /// SELinux and ACL probes `ls -l` makes for every file, `cp -a`'s
    /// security.* copies) is EOPNOTSUPP, and the bridge answers that on its
    /// own without asking the core.
    public static func isServed(_ name: String) -> Bool {
        name.hasPrefix(customPrefix) || name.hasPrefix(propertyPrefix)
    }

    /// Whether the value depends on the object (else the answer is known
    /// without looking: EOPNOTSUPP or ENODATA).
    var isObjectMetadata: Bool {
        switch self {
        case .custom, .property: return true
        case .reservedKey, .unknownProperty, .unsupportedNamespace: return false
        }
    }
}

/// A property of an object as `gcs.NAME` names it, named as in the seeds'
/// StorageMetadata (and the JSON API): a standard property, which a writer
/// sets, or one the service keeps.
public enum ObjectProperty: Sendable, Hashable, CaseIterable {
    /// Writable.
    case standard(StandardProperty)
    /// Read-only.
    case readOnly(ReadOnly)

    public enum ReadOnly: String, Sendable, CaseIterable {
        case bucket, fullPath, name, size, generation, metageneration, timeCreated, updated, md5Hash, crc32c
    }

    public static var allCases: [ObjectProperty] {
        StandardProperty.allCases.map(Self.standard) + ReadOnly.allCases.map(Self.readOnly)
    }

    public init?(rawValue: String) {
        if let property = StandardProperty(rawValue: rawValue) {
            self = .standard(property)
        } else if let property = ReadOnly(rawValue: rawValue) {
            self = .readOnly(property)
        } else {
            return nil
        }
    }

    /// The name after `gcs.`.
    public var rawValue: String {
        switch self {
        case .standard(let property): return property.rawValue
        case .readOnly(let property): return property.rawValue
        }
    }

    public var isWritable: Bool {
        if case .standard = self { return true }
        return false
    }

    /// The value as text, or nil if the object has none. Numbers are
    /// decimal; times RFC 3339 in UTC with milliseconds, as the JSON API
    /// writes them; hashes base64, as the service gives them; `name` is the
    /// last segment of `fullPath` (as in the seeds), without a placeholder's
    /// trailing "/".
    func value(of info: ObjectInfo) -> String? {
        switch self {
        case .standard(let property): return info.properties[property]
        case .readOnly(.bucket): return info.bucket
        case .readOnly(.fullPath): return info.name
        case .readOnly(.name): return info.name.split(separator: "/").last.map(String.init) ?? info.name
        case .readOnly(.size): return String(info.size)
        case .readOnly(.generation): return String(info.generation)
        case .readOnly(.metageneration): return String(info.metageneration)
        case .readOnly(.timeCreated): return info.timeCreated.map(Self.rfc3339)
        case .readOnly(.updated): return Self.rfc3339(info.updated)
        case .readOnly(.md5Hash): return info.md5Hash
        case .readOnly(.crc32c): return info.crc32c
        }
    }

    /// A patch setting (or, with nil, deleting) this writable property.
    func patch(_ value: String?) -> MetadataPatch {
        guard case .standard(let property) = self else { preconditionFailure("\(rawValue) is read-only") }
        var patch = MetadataPatch()
        patch.properties[property] = .some(value)
        return patch
    }

    static func rfc3339(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true, timeZone: TimeZone(identifier: "UTC")!))
    }
}

/// Values, limits and flags.
enum ExtendedAttributeRules {
    /// Limits of Cloud Storage custom metadata, checked here before any
    /// request so that they surface as E2BIG and never as a server error.
    static let maximumKeyBytes = 1024
    static let maximumValueBytes = 4096
    /// Keys plus values of all custom metadata of one object, reserved
    /// keys included (the service counts them too).
    static let maximumCustomMetadataBytes = 8192

    /// setxattr(2)'s flags; the values are Linux's ABI (<sys/xattr.h>),
    /// spelled out because FSCore does not import libfuse's headers.
    static let createFlag: Int32 = 1  // XATTR_CREATE
    static let replaceFlag: Int32 = 2  // XATTR_REPLACE

    /// The `user.KEY` names of `info`'s custom metadata, reserved keys
    /// left out, sorted (a stable order for `getfattr -d`).
    static func listedNames(_ info: ObjectInfo?) -> [String] {
        guard let info else { return [] }
        return info.customMetadata.keys
            .filter { !$0.hasPrefix(ExtendedAttributeName.reservedKeyPrefix) }
            .sorted()
            .map { ExtendedAttributeName.customPrefix + $0 }
    }

    /// The value of `name` on `info` (nil: no object carries this
    /// directory's attributes). ENODATA when there is none; EOPNOTSUPP for
    /// a namespace that is not served.
    static func value(_ name: ExtendedAttributeName, of info: ObjectInfo?) throws(FSError) -> Data {
        let text: String?
        switch name {
        case .unsupportedNamespace: throw FSError(.notSupported, "only user.* and gcs.* attributes exist here")
        case .reservedKey(let key): throw FSError(.noAttribute, "\(key) is a POSIX attribute, not an extended attribute")
        case .unknownProperty(let property): throw FSError(.noAttribute, "no property gcs.\(property)")
        case .custom(let key): text = info?.customMetadata[key]
        case .property(let property): text = info.flatMap(property.value)
        }
        guard let text else { throw FSError(.noAttribute, "no such attribute") }
        return Data(text.utf8)
    }

    /// Whether `name` has a value on `info`.
    static func exists(_ name: ExtendedAttributeName, on info: ObjectInfo?) -> Bool {
        (try? value(name, of: info)) != nil
    }

    /// The patch that sets `name` to `value` (nil: removes it), after every
    /// check that needs no knowledge of the object: which names may change,
    /// the text rule and the per-key and per-value limits.
    static func patch(_ name: ExtendedAttributeName, _ value: Data?) throws(FSError) -> MetadataPatch {
        let text = try value.map { data throws(FSError) in try Self.text(data) }
        switch name {
        case .unsupportedNamespace:
            throw FSError(.notSupported, "only user.* and gcs.* attributes can be stored")
        case .unknownProperty(let property):
            throw FSError(.notSupported, "gcs.\(property) is no property of an object")
        case .reservedKey(let key):
            throw FSError(.notPermitted, "\(key) holds a POSIX attribute; chmod, chown or touch change it")
        case .property(let property):
            guard property.isWritable else { throw FSError(.notPermitted, "gcs.\(property.rawValue) is read-only") }
            return property.patch(text)
        case .custom(let key):
            guard !key.isEmpty else { throw FSError(.invalid, "empty custom metadata key") }
            guard key.utf8.count <= maximumKeyBytes else {
                throw FSError(.attributeTooLarge, "custom metadata keys are at most \(maximumKeyBytes) bytes")
            }
            if let text, text.utf8.count > maximumValueBytes {
                throw FSError(.attributeTooLarge, "custom metadata values are at most \(maximumValueBytes) bytes")
            }
            var patch = MetadataPatch()
            patch.customMetadata[key] = .some(text)
            return patch
        }
    }

    /// Values are text: valid UTF-8 without NUL (metadata travels as JSON
    /// strings and, through the XML API other tools use, as HTTP headers).
    /// Anything else is refused rather than encoded, so what another
    /// client reads is exactly what was written.
    static func text(_ value: Data) throws(FSError) -> String {
        guard let text = String(validating: value, as: UTF8.self) else {
            throw FSError(.invalid, "extended attribute values must be UTF-8 text")
        }
        guard !value.contains(0) else { throw FSError(.invalid, "extended attribute values cannot contain NUL") }
        return text
    }

    /// XATTR_CREATE on an existing attribute is EEXIST; XATTR_REPLACE on a
    /// missing one ENODATA (both as setxattr(2) defines them).
    static func checkFlags(_ flags: Int32, exists: Bool) throws(FSError) {
        if flags & createFlag != 0, exists { throw FSError(.exists, "XATTR_CREATE: the attribute exists") }
        if flags & replaceFlag != 0, !exists { throw FSError(.noAttribute, "XATTR_REPLACE: no such attribute") }
    }

    /// Bytes of keys and values of a custom metadata map.
    static func customMetadataBytes(_ metadata: [String: String]) -> Int {
        metadata.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    /// `metadata` after `patch`.
    static func applying(_ patch: MetadataPatch, to metadata: [String: String]) -> [String: String] {
        var result = metadata
        for (key, value) in patch.customMetadata { result[key] = value }
        return result
    }

    /// E2BIG if `patch` would take the object's custom metadata over the
    /// service's total. A change that does not grow it always passes, so
    /// an object another tool filled beyond the limit can still shrink.
    static func checkTotal(_ patch: MetadataPatch, on metadata: [String: String]) throws(FSError) {
        let before = customMetadataBytes(metadata)
        let after = customMetadataBytes(applying(patch, to: metadata))
        if after > maximumCustomMetadataBytes, after > before {
            throw FSError(.attributeTooLarge, "custom metadata would be \(after) bytes; at most \(maximumCustomMetadataBytes) per object")
        }
    }
}
