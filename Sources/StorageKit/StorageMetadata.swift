import Foundation
import Synchronization

/// An object's metadata, with the Firebase SDK's properties and semantics.
///
/// It is a class, as in Firebase, so that the documented usage works:
///
///     let newMetadata = StorageMetadata()
///     newMetadata.cacheControl = "public,max-age=300"
///     newMetadata.contentType = nil          // deletes the property
///     newMetadata.removeCustomMetadata(forKey: "location")
///     try await ref.updateMetadata(newMetadata)
///
/// **Only assigned properties change.** Every setter records that its
/// property was assigned ("touched"); `updateMetadata` sends exactly the
/// touched properties, a touched nil as JSON `null` (deletion). Metadata
/// read from the server starts with nothing touched, so fetching it,
/// changing one property and sending it back changes that one property.
///
/// Custom metadata is merged, as Cloud Storage's PATCH merges the
/// `metadata` map: assigning `customMetadata = ["a": "1"]` sets key `a` and
/// leaves the object's other keys alone; `removeCustomMetadata(forKey:)`
/// deletes one key; assigning `customMetadata = nil` deletes them all. A
/// key both removed and present in `customMetadata` is set (the value wins).
///
/// Thread safety: the state sits behind a `Mutex`, so the class is
/// `Sendable` without `@unchecked` and may be shared across tasks; each
/// property access is atomic on its own.
public final class StorageMetadata: Sendable, CustomStringConvertible {
    /// The writable fields, each recorded when assigned.
    enum WritableField: Hashable, Sendable {
        case md5Hash
        case property(StandardProperty)
        /// `customMetadata`, sent as the resource's `metadata` map.
        case customMetadata
    }

    /// Everything the class holds; the JSON mapping (ObjectResource.swift)
    /// reads and makes it.
    struct Fields: Sendable {
        var bucket = ""
        var generation: Int64 = 0
        var metageneration: Int64 = 0
        var fullPath = ""
        var size: Int64 = 0
        var timeCreated: Date?
        var updated: Date?
        var crc32c: String?
        var isFile = false
        /// Firebase's v0 metadata lists download tokens apart
        /// (`downloadTokens`) rather than in the custom metadata.
        var downloadTokens: String?

        var md5Hash: String?
        var properties = ObjectProperties()
        var customMetadata: [String: String]?

        var touched: Set<WritableField> = []
        var removedCustomKeys: Set<String> = []
    }

    private let state: Mutex<Fields>

    /// Empty metadata, to fill in for an upload or an update.
    public init() {
        state = Mutex(Fields())
    }

    init(_ fields: Fields) {
        state = Mutex(fields)
    }

    /// A consistent copy of every field.
    var fields: Fields { state.withLock { $0 } }

    /// An independent copy, assigned properties and removed keys included.
    public func copy() -> StorageMetadata {
        StorageMetadata(fields)
    }

    // MARK: read-only properties

    /// The bucket holding the object.
    public var bucket: String { state.withLock { $0.bucket } }
    /// The object's generation: it changes whenever the object's data does.
    public var generation: Int64 { state.withLock { $0.generation } }
    /// The metadata's generation within the object's generation.
    public var metageneration: Int64 { state.withLock { $0.metageneration } }
    /// The object's full name in the bucket, e.g. `images/space.jpg`.
    public var fullPath: String { state.withLock { $0.fullPath } }
    /// The last segment of `fullPath`, e.g. `space.jpg`.
    public var name: String { StoragePath(fullPath).name }
    /// The object's size in bytes.
    public var size: Int64 { state.withLock { $0.size } }
    public var timeCreated: Date? { state.withLock { $0.timeCreated } }
    /// When the object or its metadata last changed.
    public var updated: Date? { state.withLock { $0.updated } }
    /// Base64 of the big-endian CRC32C of the data, as Cloud Storage reports it.
    public var crc32c: String? { state.withLock { $0.crc32c } }
    /// Whether this describes an object the server returned (as opposed to
    /// metadata made locally for an upload or update).
    public var isFile: Bool { state.withLock { $0.isFile } }
    /// The download tokens as Firebase's v0 API lists them (comma-separated);
    /// the JSON API keeps them in `customMetadata` instead.
    var downloadTokens: String? { state.withLock { $0.downloadTokens } }

    // MARK: writable properties

    /// Base64 of the MD5 of the data. On upload, the server checks it.
    public var md5Hash: String? {
        get { state.withLock { $0.md5Hash } }
        set { assign(.md5Hash) { $0.md5Hash = newValue } }
    }

    // The standard properties by their Firebase names; each is
    // `self[property]`, which the code that handles every property uses.

    public var cacheControl: String? {
        get { self[.cacheControl] }
        set { self[.cacheControl] = newValue }
    }

    public var contentDisposition: String? {
        get { self[.contentDisposition] }
        set { self[.contentDisposition] = newValue }
    }

    public var contentEncoding: String? {
        get { self[.contentEncoding] }
        set { self[.contentEncoding] = newValue }
    }

    public var contentLanguage: String? {
        get { self[.contentLanguage] }
        set { self[.contentLanguage] = newValue }
    }

    public var contentType: String? {
        get { self[.contentType] }
        set { self[.contentType] = newValue }
    }

    /// A standard property, by name; assigning it counts as assigning the
    /// named property (nil deletes it in an update).
    public subscript(property: StandardProperty) -> String? {
        get { state.withLock { $0.properties[property] } }
        set { assign(.property(property)) { $0.properties[property] = newValue } }
    }

    /// Every standard property at once, as read.
    public var standardProperties: ObjectProperties { state.withLock { $0.properties } }

    /// Custom key/value metadata (the object's `metadata` map). In an
    /// update, the keys given are set and others kept; nil deletes all.
    public var customMetadata: [String: String]? {
        get { state.withLock { $0.customMetadata } }
        set { assign(.customMetadata) { $0.customMetadata = newValue } }
    }

    /// Marks custom key `key` for deletion by the next `updateMetadata`
    /// (and drops it from `customMetadata` here). Removing a key the object
    /// does not have is harmless.
    public func removeCustomMetadata(forKey key: String) {
        state.withLock {
            $0.removedCustomKeys.insert(key)
            $0.customMetadata?.removeValue(forKey: key)
        }
    }

    private func assign(_ field: WritableField, _ change: (inout Fields) -> Void) {
        state.withLock {
            change(&$0)
            $0.touched.insert(field)
        }
    }

    /// The writable properties assigned since this instance was made.
    var assignedFields: Set<WritableField> { state.withLock { $0.touched } }

    /// Custom keys marked with `removeCustomMetadata(forKey:)`.
    var removedCustomMetadataKeys: Set<String> { state.withLock { $0.removedCustomKeys } }

    public var description: String {
        let s = fields
        return "<StorageMetadata gs://\(s.bucket)/\(s.fullPath) size=\(s.size) generation=\(s.generation)"
            + " contentType=\(s.properties.contentType ?? "nil")>"
    }
}

/// RFC 3339 timestamps as Cloud Storage writes them:
/// `2026-11-21T19:10:23.123456Z`, without a fraction, or with an offset.
/// Parsed by hand: it is exact to the microsecond, faster than a formatter
/// (a listing of thousands of objects parses two per item) and has no
/// shared mutable formatter to guard.
enum RFC3339 {
    static func parse(_ string: String) -> Date? {
        let b = Array(string.utf8)
        func digits(_ at: Int, _ count: Int) -> Int? {
            guard at + count <= b.count else { return nil }
            var n = 0
            for i in at..<(at + count) {
                let d = Int(b[i]) - 48
                guard (0...9).contains(d) else { return nil }
                n = n * 10 + d
            }
            return n
        }
        guard b.count >= 20,
              let year = digits(0, 4), b[4] == UInt8(ascii: "-"),
              let month = digits(5, 2), b[7] == UInt8(ascii: "-"),
              let day = digits(8, 2), b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: "t") || b[10] == UInt8(ascii: " "),
              let hour = digits(11, 2), b[13] == UInt8(ascii: ":"),
              let minute = digits(14, 2), b[16] == UInt8(ascii: ":"),
              let second = digits(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second <= 60
        else { return nil }
        var i = 19
        var fraction = 0.0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var scale = 0.1
            let start = i
            while i < b.count, let d = digits(i, 1) {
                fraction += Double(d) * scale
                scale /= 10
                i += 1
            }
            guard i > start else { return nil }
        }
        guard i < b.count else { return nil }
        var offset = 0
        switch b[i] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            i += 1
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard let oh = digits(i + 1, 2), i + 3 < b.count, b[i + 3] == UInt8(ascii: ":"),
                  let om = digits(i + 4, 2) else { return nil }
            offset = (oh * 3600 + om * 60) * (b[i] == UInt8(ascii: "-") ? -1 : 1)
            i += 6
        default:
            return nil
        }
        guard i == b.count else { return nil }
        let days = daysFromCivil(year, month, day)
        let seconds = days * 86400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// `2026-11-21T19:10:23.123Z`: UTC with milliseconds, as GCS writes.
    static func format(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
    /// days_from_civil).
    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}
