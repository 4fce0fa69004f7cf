import StorageKit

/// A `gs://BUCKET[/PATH]` argument of the command line, checked before
/// anything connects, so that a mistyped URL is a usage error (exit 64)
/// rather than a request for a bucket named after the typo (`gs:/nb`,
/// read as a bare bucket and path, would name the bucket "gs:").
struct BucketURL: CustomStringConvertible {
    let bucket: String
    /// The normalised object path or prefix; "" for the bucket's root.
    let path: String

    /// `text` parsed by StorageKit like every storage URL (gs://, and the
    /// https forms of Cloud Storage and Firebase); with `bareBucket`, a
    /// `BUCKET[/PATH]` without a scheme as well, as /etc/fstab may name it.
    init(_ text: String, bareBucket: Bool = false) throws(CLIError) {
        if let slip = Self.misspeltScheme(text) {
            throw CLIError.usage("\(text) is not a gs:// URL (did you mean \(slip)?)")
        }
        let url = bareBucket && !text.contains("://") ? "gs://" + text : text
        do {
            let location = try Storage.location(ofURL: url)
            bucket = location.bucket
            path = location.path
        } catch {
            // StorageKit's reasons name the URL they refuse.
            let reason = Self.reason(error)
            throw CLIError.usage(reason.hasPrefix(url) ? reason : "\(text): \(reason)")
        }
        guard bucket.allSatisfy(Self.bucketCharacters.contains) else {
            throw CLIError.usage("\(text): \(bucket) is not a bucket name (letters, digits, '-', '_' and '.' only)")
        }
    }

    var description: String { path.isEmpty ? "gs://\(bucket)" : "gs://\(bucket)/\(path)" }

    /// Whether a copy argument names the bucket side: it starts with
    /// `gs:` (a local path meant to start so can be written `./gs:…`).
    static func isBucketSide(_ text: String) -> Bool {
        text.lowercased().hasPrefix("gs:")
    }

    /// The URL meant by `gs:/b`, `gs:b` or `gs:///b`; nil for a URL with
    /// the two slashes, and for anything that does not start with `gs:`.
    static func misspeltScheme(_ text: String) -> String? {
        guard isBucketSide(text) else { return nil }
        let rest = text.dropFirst(3)
        let slashes = rest.prefix { $0 == "/" }.count
        let name = rest.dropFirst(slashes)
        guard slashes != 2, !name.isEmpty else { return nil }
        return "gs://" + name
    }

    private static let bucketCharacters = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")

    /// StorageKit's reason without its error class ("invalid argument: ").
    private static func reason(_ error: StorageError) -> String {
        if case .invalidArgument(let message) = error { return message }
        return "\(error)"
    }
}
