import Foundation
import Transport

// The metadata's JSON mapping, both ways: an object resource of the JSON
// API (and of Firebase's v0 API, whose resource uses the same field names
// and adds `downloadTokens`) into `StorageMetadata`, and `StorageMetadata`
// into upload, patch and dictionary JSON. The standard properties go by
// their `StandardProperty` names, which are the JSON field names.

/// The fields of a Cloud Storage object resource that `StorageMetadata`
/// reads, typed. Made from a parsed dictionary (any answer) or, for listing
/// pages, straight from the bytes (`ListingDocument.parse`).
struct ObjectResource: Sendable, Equatable {
    var kind: String?
    var bucket: String?
    var name: String?
    var generation: Int64?
    var metageneration: Int64?
    var size: Int64?
    var timeCreated: String?
    var updated: String?
    var crc32c: String?
    var downloadTokens: String?
    var md5Hash: String?
    var properties = ObjectProperties()
    var metadata: [String: String]?

    init() {}

    /// From an object resource parsed by JSONSerialization, or a dictionary
    /// with the keys Firebase's `StorageMetadata(dictionary:)` takes. Numbers
    /// may be decimal strings (as GCS sends int64s) or numbers; a custom
    /// metadata value that is not a string is kept as its description, a
    /// null one dropped.
    init(dictionary: [String: Any]) {
        kind = dictionary["kind"] as? String
        bucket = dictionary["bucket"] as? String
        name = dictionary["name"] as? String
        generation = Self.int64(dictionary["generation"])
        metageneration = Self.int64(dictionary["metageneration"])
        size = Self.int64(dictionary["size"])
        timeCreated = dictionary["timeCreated"] as? String
        updated = dictionary["updated"] as? String
        crc32c = dictionary["crc32c"] as? String
        downloadTokens = dictionary["downloadTokens"] as? String
        md5Hash = dictionary["md5Hash"] as? String
        for property in StandardProperty.allCases {
            properties[property] = dictionary[property.rawValue] as? String
        }
        // "customMetadata" is the key of Firebase's dictionary form.
        if let custom = (dictionary["metadata"] ?? dictionary["customMetadata"]) as? [String: Any] {
            metadata = custom.compactMapValues { value in
                value is NSNull ? nil : (value as? String ?? "\(value)")
            }
        }
    }

    /// An int64 field: GCS sends decimal strings; other servers numbers.
    static func int64(_ value: Any?) -> Int64? {
        switch value {
        case let s as String: return Int64(s)
        case let n as Int: return Int64(n)
        case let n as Int64: return n
        case let n as NSNumber: return n.int64Value
        default: return nil
        }
    }
}

extension StorageMetadata {
    /// Metadata from a Cloud Storage object resource (the JSON of
    /// `objects.get`, an upload or a listing item), or from a dictionary
    /// with the same keys as Firebase's `init(dictionary:)` takes. Numbers
    /// may be decimal strings (as GCS sends int64s) or numbers; times are
    /// RFC 3339. Nothing counts as assigned.
    public convenience init(dictionary: [String: Any]) {
        self.init(fields: ObjectResource(dictionary: dictionary))
    }

    /// Metadata from an object resource's typed fields.
    convenience init(fields resource: ObjectResource) {
        var s = Fields()
        s.bucket = resource.bucket ?? ""
        s.fullPath = resource.name ?? ""
        s.generation = resource.generation ?? 0
        s.metageneration = resource.metageneration ?? 0
        s.size = resource.size ?? 0
        s.timeCreated = resource.timeCreated.flatMap(RFC3339.parse)
        s.updated = resource.updated.flatMap(RFC3339.parse)
        // One encoding inside, the JSON API's base64, whichever the server sent.
        s.crc32c = resource.crc32c.map(CRC32C.normalized)
        s.downloadTokens = resource.downloadTokens
        s.md5Hash = resource.md5Hash
        s.properties = resource.properties
        s.customMetadata = resource.metadata
        s.isFile = !s.fullPath.isEmpty && (resource.kind ?? "storage#object") == "storage#object"
        self.init(s)
    }

    /// The object resource's fields `init(dictionary:)` reads (the JSON
    /// API's `fields` syntax), for listings that ask for no more.
    static let resourceFields = (
        ["bucket", "name", "generation", "metageneration", "size", "timeCreated", "updated", "crc32c", "md5Hash"]
            + StandardProperty.allCases.map(\.rawValue) + ["metadata"]
    ).joined(separator: ",")

    /// Metadata from an object resource the server returned; fails when it
    /// is not one (no `name`).
    convenience init(resource: [String: Any]) throws(StorageError) {
        try self.init(resource: ObjectResource(dictionary: resource))
    }

    convenience init(resource: ObjectResource) throws(StorageError) {
        guard resource.name?.isEmpty == false else {
            throw StorageError.unknown(message: "the server's object resource has no name", response: nil)
        }
        self.init(fields: resource)
    }

    /// Metadata from the JSON bytes of an object resource.
    convenience init(json: Data) throws(StorageError) {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw StorageError.unknown(message: "the server's object resource is not a JSON object", response: nil)
        }
        try self.init(resource: object)
    }

    /// The JSON part of an upload: every writable property that has a
    /// value, whether assigned or not (read-only ones are never sent), and
    /// `name` when given. Sendable values (strings and a string map), so
    /// the result can be kept by a Sendable uploader.
    func uploadJSON(name: String? = nil) -> [String: any Sendable] {
        let s = fields
        var json: [String: any Sendable] = [:]
        if let md5 = s.md5Hash { json["md5Hash"] = md5 }
        for property in StandardProperty.allCases {
            if let value = s.properties[property] { json[property.rawValue] = value }
        }
        if let custom = s.customMetadata, !custom.isEmpty { json["metadata"] = custom }
        if let name { json["name"] = name }
        return json
    }

    /// The body of an `objects.patch` for `updateMetadata`: only assigned
    /// properties, a nil one as `NSNull` (JSON null, which deletes it);
    /// custom keys merged, removed keys as null.
    func patchJSON() -> [String: Any] {
        let s = fields
        var json: [String: Any] = [:]
        if s.touched.contains(.md5Hash) { json["md5Hash"] = s.md5Hash ?? NSNull() }
        for property in StandardProperty.allCases where s.touched.contains(.property(property)) {
            json[property.rawValue] = s.properties[property] ?? NSNull()
        }
        if s.touched.contains(.customMetadata) && s.customMetadata == nil {
            json["metadata"] = NSNull()  // deletes every custom key
        } else if s.touched.contains(.customMetadata) || !s.removedCustomKeys.isEmpty {
            var map: [String: Any] = [:]
            for key in s.removedCustomKeys { map[key] = NSNull() }
            if s.touched.contains(.customMetadata) {
                for (key, value) in s.customMetadata ?? [:] { map[key] = value }
            }
            if !map.isEmpty { json["metadata"] = map }
        }
        return json
    }

    /// Every property that has a value, with Cloud Storage's field names and
    /// encodings (int64s as decimal strings, times as RFC 3339).
    public func dictionaryRepresentation() -> [String: Any] {
        let s = fields
        var json: [String: Any] = uploadJSON()
        if !s.bucket.isEmpty { json["bucket"] = s.bucket }
        if !s.fullPath.isEmpty { json["name"] = s.fullPath }
        if s.isFile {
            json["generation"] = String(s.generation)
            json["metageneration"] = String(s.metageneration)
            json["size"] = String(s.size)
        }
        if let t = s.timeCreated { json["timeCreated"] = RFC3339.format(t) }
        if let t = s.updated { json["updated"] = RFC3339.format(t) }
        if let crc = s.crc32c { json["crc32c"] = crc }
        return json
    }
}

/// An `objects.list` answer: prefixes, items and the next page's token.
struct ListingDocument: Sendable, Equatable {
    var prefixes: [String] = []
    var items: [ObjectResource] = []
    var nextPageToken: String?

    init(prefixes: [String] = [], items: [ObjectResource] = [], nextPageToken: String? = nil) {
        self.prefixes = prefixes
        self.items = items
        self.nextPageToken = nextPageToken
    }

    init(dictionary: [String: Any]) {
        prefixes = dictionary["prefixes"] as? [String] ?? []
        items = (dictionary["items"] as? [[String: Any]] ?? []).map(ObjectResource.init(dictionary:))
        nextPageToken = dictionary["nextPageToken"] as? String
    }

    /// The listing in `response`: read straight from the bytes when they
    /// have the usual shape (`ListingParser`), else through JSONSerialization,
    /// which decides every unusual case exactly as before.
    static func of(_ response: HTTPResponse) throws(StorageError) -> ListingDocument {
        if let fast = ListingParser.parse(response.body) { return fast }
        return ListingDocument(dictionary: try ObjectAPI.json(response))
    }
}
