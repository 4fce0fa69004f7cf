/// The standard properties a writer can set on an object (Cloud Storage's
/// writable object resource fields besides the custom metadata and the
/// upload's checksums), named as the JSON API and Firebase's
/// `StorageMetadata` name them. Code that handles "every property" (the
/// JSON and listing mappings, `StorageMetadata`'s wire forms, the file
/// system's extended attributes) loops over `allCases` and reads and
/// writes through `StandardProperties`' subscript, so a new property is
/// added here and in `StandardProperties` only.
public enum StandardProperty: String, Sendable, CaseIterable {
    case contentType, cacheControl, contentDisposition, contentEncoding, contentLanguage
}

/// The standard properties in one value type: an object's, an upload's, a
/// recovery entry's (`ObjectProperties`), and, with `Value` itself
/// optional, a change's (`PropertyChanges`: `.some(nil)` deletes, nil
/// leaves as is). `StandardPropertiesTests` checks every list of the five
/// below against the type's stored properties.
public struct StandardProperties<Value: Sendable & Equatable>: Sendable, Equatable {
    public var contentType: Value?
    public var cacheControl: Value?
    public var contentDisposition: Value?
    public var contentEncoding: Value?
    public var contentLanguage: Value?

    @inlinable
    public init(
        contentType: Value? = nil, cacheControl: Value? = nil, contentDisposition: Value? = nil,
        contentEncoding: Value? = nil, contentLanguage: Value? = nil
    ) {
        self.contentType = contentType
        self.cacheControl = cacheControl
        self.contentDisposition = contentDisposition
        self.contentEncoding = contentEncoding
        self.contentLanguage = contentLanguage
    }

    /// One property, by name.
    @inlinable
    public subscript(property: StandardProperty) -> Value? {
        get {
            switch property {
            case .contentType: return contentType
            case .cacheControl: return cacheControl
            case .contentDisposition: return contentDisposition
            case .contentEncoding: return contentEncoding
            case .contentLanguage: return contentLanguage
            }
        }
        set {
            switch property {
            case .contentType: contentType = newValue
            case .cacheControl: cacheControl = newValue
            case .contentDisposition: contentDisposition = newValue
            case .contentEncoding: contentEncoding = newValue
            case .contentLanguage: contentLanguage = newValue
            }
        }
    }

    // Field by field, not over `allCases` or key paths: `apply` and `merge`
    // run for every write, view and upload of a staged file, and key paths
    // of a generic type, instantiated at run time on every use, were a
    // sixth of the mount's CPU writing small files. @inlinable so that the
    // file system's calls are specialised across the module boundary.

    /// Sets each property `changes` names (nil there: left as it is).
    @inlinable
    public mutating func apply(_ changes: StandardProperties<Value?>) {
        if let value = changes.contentType { contentType = value }
        if let value = changes.cacheControl { cacheControl = value }
        if let value = changes.contentDisposition { contentDisposition = value }
        if let value = changes.contentEncoding { contentEncoding = value }
        if let value = changes.contentLanguage { contentLanguage = value }
    }

    /// Takes each property `other` sets (changes after changes: the later wins).
    @inlinable
    public mutating func merge(_ other: Self) {
        if let value = other.contentType { contentType = value }
        if let value = other.cacheControl { cacheControl = value }
        if let value = other.contentDisposition { contentDisposition = value }
        if let value = other.contentEncoding { contentEncoding = value }
        if let value = other.contentLanguage { contentLanguage = value }
    }

    /// Whether no property is set.
    @inlinable
    public var isEmpty: Bool {
        contentType == nil && cacheControl == nil && contentDisposition == nil && contentEncoding == nil
            && contentLanguage == nil
    }
}

/// Encoded as five optional fields named like Cloud Storage's, so the
/// properties sit flat beside other fields (a recovery sidecar).
extension StandardProperties: Codable where Value: Codable {}

/// An object's properties, as read or to be written.
public typealias ObjectProperties = StandardProperties<String>
/// Changes to an object's properties (`.some(nil)` deletes one).
public typealias PropertyChanges = StandardProperties<String?>
