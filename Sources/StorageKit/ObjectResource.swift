import Foundation
import Transport

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
    var cacheControl: String?
    var contentDisposition: String?
    var contentEncoding: String?
    var contentLanguage: String?
    var contentType: String?
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
        cacheControl = dictionary["cacheControl"] as? String
        contentDisposition = dictionary["contentDisposition"] as? String
        contentEncoding = dictionary["contentEncoding"] as? String
        contentLanguage = dictionary["contentLanguage"] as? String
        contentType = dictionary["contentType"] as? String
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
