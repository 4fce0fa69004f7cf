import Foundation

/// A normalised object path inside a bucket: segments separated by single
/// `/`, no leading or trailing slash; the root is the empty path.
///
/// Normalisation is the Firebase one: empty segments collapse, so
/// `"foo///bar/"` is `"foo/bar"`. `.` and `..` are ordinary segments here
/// (object names may contain them); the filesystem decides what to show.
///
/// Only the joined string is stored: `fullPath` is what nearly every caller
/// needs (URLs, cache keys), and `name`/`parent` are cheap slices of it.
///
/// A path can be *unusable* (`unusableReason` set): that is how the
/// non-throwing `Storage.reference(forURL:)` and a `Storage` without a
/// bucket answer bad input without trapping. Every path derived from it
/// (child, parent, root) stays unusable, and every request made through it
/// fails with `StorageError.invalidArgument(unusableReason)` before anything
/// is sent, so a bad URL can never read or write some other object.
struct StoragePath: Sendable, Hashable, CustomStringConvertible {
    /// The segments joined by `/`; "" at the root.
    let fullPath: String
    /// Why no request may be made through this path; nil for usable paths.
    let unusableReason: String?

    /// The most bytes of UTF-8 an object name may have (Cloud Storage's limit).
    static let maxObjectNameBytes = 1024

    static let root = StoragePath(normalised: "")

    init(_ string: String) {
        self.init(normalised: Self.normalise(string))
    }

    private init(normalised: String, unusableReason: String? = nil) {
        self.fullPath = normalised
        self.unusableReason = unusableReason
    }

    /// An object name taken exactly as given, without normalisation: the
    /// filesystem must reach objects Firebase paths cannot name, such as
    /// the directory placeholder `dir/`.
    init(verbatim name: String) {
        self.init(normalised: name)
    }

    /// The root path, unusable for `reason`.
    static func unusable(_ reason: String) -> StoragePath {
        StoragePath(normalised: "", unusableReason: reason)
    }

    /// Joins the non-empty segments of `string` with single slashes.
    static func normalise(_ string: String) -> String {
        // Fast path: already normalised (the common case for names coming
        // back from listings) needs no split and join.
        if !string.hasPrefix("/"), !string.hasSuffix("/"), !hasEmptySegment(string) { return string }
        return string.split(separator: "/", omittingEmptySubsequences: true).joined(separator: "/")
    }

    /// Whether `string` holds "//". Read from its UTF-8 bytes: Foundation's
    /// `contains(_: StringProtocol)` goes through NSString, a tenth of the
    /// CPU a listing of a million names costs.
    static func hasEmptySegment(_ string: String) -> Bool {
        var afterSlash = false
        for byte in string.utf8 {
            let slash = byte == UInt8(ascii: "/")
            if slash && afterSlash { return true }
            afterSlash = slash
        }
        return false
    }

    var isRoot: Bool { fullPath.isEmpty }

    var segments: [Substring] { fullPath.split(separator: "/") }

    /// The last segment; "" at the root.
    var name: String {
        guard let slash = fullPath.lastIndex(of: "/") else { return fullPath }
        return String(fullPath[fullPath.index(after: slash)...])
    }

    /// One level up; nil at the root (a top-level path's parent is the root).
    var parent: StoragePath? {
        if isRoot { return nil }
        guard let slash = fullPath.lastIndex(of: "/") else { return root }
        return StoragePath(normalised: String(fullPath[..<slash]), unusableReason: unusableReason)
    }

    /// The bucket's root (unusable if this path is).
    var root: StoragePath { unusableReason == nil ? .root : StoragePath(normalised: "", unusableReason: unusableReason) }

    /// `path` below this one; `path` may hold several segments.
    func child(_ path: String) -> StoragePath {
        let tail = Self.normalise(path)
        if tail.isEmpty { return self }
        if isRoot { return StoragePath(normalised: tail, unusableReason: unusableReason) }
        return StoragePath(normalised: fullPath + "/" + tail, unusableReason: unusableReason)
    }

    /// Whether `other` is this path or lies below it.
    func contains(_ other: StoragePath) -> Bool {
        if isRoot || other == self { return true }
        return other.fullPath.hasPrefix(fullPath + "/")
    }

    /// The prefix that lists this path's children: "" at the root, else
    /// `fullPath + "/"`.
    var listingPrefix: String { isRoot ? "" : fullPath + "/" }

    /// Checks the Cloud Storage object name rules before a request is made:
    /// 1–1024 bytes of UTF-8, no carriage return or line feed. The root is
    /// not an object, so nothing can be uploaded to, read from or deleted
    /// at it.
    func validateForObject() throws(StorageError) {
        try validateForListing()
        if isRoot {
            throw StorageError.invalidArgument("the root reference is not an object; use a child reference")
        }
        let bytes = fullPath.utf8.count
        if bytes > Self.maxObjectNameBytes {
            throw StorageError.invalidArgument(
                "object path is \(bytes) bytes of UTF-8; the limit is \(Self.maxObjectNameBytes)")
        }
        // Scan the bytes, not Characters: "\r\n" is one Character (a
        // grapheme cluster) and would not compare equal to "\n".
        if fullPath.utf8.contains(where: { $0 == 0x0A || $0 == 0x0D }) {
            throw StorageError.invalidArgument("object path must not contain a carriage return or line feed")
        }
    }

    /// Listing needs no object name (the root lists), only a usable path.
    func validateForListing() throws(StorageError) {
        if let unusableReason { throw StorageError.invalidArgument(unusableReason) }
    }

    var description: String { fullPath }
}
