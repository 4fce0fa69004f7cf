import Foundation

/// A bucket and an object path parsed from one of the URL forms that name
/// an object:
///
/// - `gs://bucket/path/to/object` (the path is taken literally: `#`, `?`
///   and `%` are legal in object names);
/// - Firebase download URLs, `https://firebasestorage.googleapis.com/v0/b/bucket/o/path%2Fto%2Fobject?alt=media&token=…`
///   (any host, so emulator URLs work too; the object is one percent-encoded
///   segment, the query is ignored);
/// - Cloud Storage URLs, `https://storage.googleapis.com/bucket/path/to/object`
///   and `https://bucket.storage.googleapis.com/path/to/object` (each
///   segment percent-decoded);
/// - JSON API URLs, `https://storage.googleapis.com/storage/v1/b/bucket/o/path%2Fto%2Fobject`.
///
/// Anything else is `StorageError.invalidArgument`, where Firebase raises.
struct StorageURL: Sendable, Equatable {
    let bucket: String
    /// The normalised object path; "" for the bucket's root.
    let path: String

    init(bucket: String, path: String) {
        self.bucket = bucket
        self.path = StoragePath.normalise(path)
    }

    static func parse(_ string: String) throws(StorageError) -> StorageURL {
        let url = string.trimmingCharacters(in: .whitespaces)
        guard let schemeEnd = url.range(of: "://") else {
            throw invalid(string, "it has no scheme (expected gs:// or https://)")
        }
        let scheme = url[..<schemeEnd.lowerBound].lowercased()
        let rest = url[schemeEnd.upperBound...]
        switch scheme {
        case "gs":
            let (bucket, path) = splitFirst(rest)
            return try make(string, bucket: bucket, path: path)
        case "http", "https":
            return try parseHTTP(string, rest)
        default:
            throw invalid(string, "the scheme \(scheme) is neither gs nor http(s)")
        }
    }

    private static func parseHTTP(_ original: String, _ rest: Substring) throws(StorageError) -> StorageURL {
        // The query (download token, alt=media) and fragment carry no path.
        let withoutQuery = rest.prefix { $0 != "?" && $0 != "#" }
        let (host, path) = splitFirst(withoutQuery)
        let hostName = host.split(separator: ":").first.map { $0.lowercased() } ?? ""
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)

        // /v0/b/{bucket}/o/{encoded object}: the Firebase REST form.
        if segments.count >= 3, segments[0] == "v0", segments[1] == "b" {
            return try restForm(original, segments.dropFirst(2))
        }
        // /storage/v1/b/{bucket}/o/{encoded object}: the JSON API form.
        if segments.count >= 4, segments[0] == "storage", segments[1] == "v1", segments[2] == "b" {
            return try restForm(original, segments.dropFirst(3))
        }
        // bucket.storage.googleapis.com/{path}: virtual-hosted style.
        let virtualSuffix = ".storage.googleapis.com"
        if hostName.hasSuffix(virtualSuffix), hostName.count > virtualSuffix.count {
            let bucket = String(hostName.dropLast(virtualSuffix.count))
            return try make(original, bucket: bucket, path: decodeSegments(original, segments))
        }
        // storage.googleapis.com/{bucket}/{path}: path style.
        if hostName == "storage.googleapis.com" || hostName == "storage.cloud.google.com" {
            guard let first = segments.first, !first.isEmpty else {
                throw invalid(original, "it names no bucket")
            }
            let bucket = try decode(original, first)
            return try make(original, bucket: bucket, path: decodeSegments(original, segments.dropFirst()))
        }
        throw invalid(original, "it is not a Cloud Storage or Firebase Storage URL")
    }

    /// `{bucket}` or `{bucket}/o` or `{bucket}/o/{object}`, the object one
    /// percent-encoded segment (slashes are `%2F`).
    private static func restForm(_ original: String, _ segments: ArraySlice<Substring>) throws(StorageError) -> StorageURL {
        var rest = segments
        let bucket = try decode(original, rest.removeFirst())
        if rest.isEmpty || rest == [""] { return try make(original, bucket: bucket, path: "") }
        guard rest.first == "o" else {
            throw invalid(original, "expected /o/ after the bucket")
        }
        rest.removeFirst()
        // Tolerate a literal slash in the object part (some tools leave it).
        let object = try decode(original, rest.joined(separator: "/"))
        return try make(original, bucket: bucket, path: object)
    }

    private static func make(_ original: String, bucket: some StringProtocol, path: some StringProtocol) throws(StorageError) -> StorageURL {
        guard !bucket.isEmpty else { throw invalid(original, "it names no bucket") }
        return StorageURL(bucket: String(bucket), path: String(path))
    }

    private static func splitFirst(_ s: Substring) -> (Substring, Substring) {
        guard let slash = s.firstIndex(of: "/") else { return (s, "") }
        return (s[..<slash], s[s.index(after: slash)...])
    }

    private static func decodeSegments(_ original: String, _ segments: some Sequence<Substring>) throws(StorageError) -> String {
        var decoded: [String] = []
        for segment in segments { decoded.append(try decode(original, segment)) }
        return decoded.joined(separator: "/")
    }

    private static func decode(_ original: String, _ s: some StringProtocol) throws(StorageError) -> String {
        guard let decoded = String(s).removingPercentEncoding else {
            throw invalid(original, "it has a malformed percent-escape")
        }
        return decoded
    }

    private static func invalid(_ url: String, _ why: String) -> StorageError {
        .invalidArgument("\(url) is not a storage URL: \(why)")
    }
}

extension Storage {
    /// The bucket and normalised object path ("" for the root) that a
    /// `gs://` or https URL names, parsed as `reference(validatingURL:)`
    /// parses it, for callers that need them before there is a `Storage`
    /// (the command line checks its arguments before it connects).
    public static func location(ofURL url: String) throws(StorageError) -> (bucket: String, path: String) {
        let parsed = try StorageURL.parse(url)
        return (parsed.bucket, parsed.path)
    }
}
