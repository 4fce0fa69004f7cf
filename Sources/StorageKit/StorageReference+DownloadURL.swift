import Foundation

/// Firebase download URLs:
/// `https://firebasestorage.googleapis.com/v0/b/BUCKET/o/PATH?alt=media&token=TOKEN`.
///
/// The token is what makes the URL work without credentials: the Firebase
/// Storage service serves the object to anyone who presents one of the
/// tokens listed (comma-separated) in the object's custom metadata key
/// `firebaseStorageDownloadTokens`. The URL uses the first. An object
/// without one gets one here, as the Firebase console and SDKs do: a random
/// UUID, written with one metadata patch that carries
/// `ifMetagenerationMatch`, so two clients racing to create a token never
/// overwrite each other's (a URL already handed out keeps working). The
/// loser of such a race reads the metadata again and uses the winner's
/// token. Revoking a token (editing that key) breaks the URLs made from it.
extension StorageReference {
    /// The custom metadata key holding an object's download tokens.
    public static let downloadTokensKey = "firebaseStorageDownloadTokens"

    /// The object's Firebase download URL, creating its download token if it
    /// has none (a request to read the metadata, plus one patch the first
    /// time). The host is `firebasestorage.googleapis.com` for Cloud
    /// Storage's own endpoint, else the configured endpoint (an emulator).
    public func downloadURL() async throws -> URL {
        var metadata = try await getMetadata()
        for _ in 0..<Self.tokenAttempts {
            if let token = Self.firstDownloadToken(metadata) {
                return try firebaseDownloadURL(token: token)
            }
            let patch = StorageMetadata()
            patch.customMetadata = [Self.downloadTokensKey: UUID().uuidString.lowercased()]
            do {
                // Metageneration 0 would be a precondition no object meets:
                // a server that reports none gets an unconditional patch.
                metadata = try await updateMetadata(
                    patch, ifMetagenerationMatch: metadata.metageneration > 0 ? metadata.metageneration : nil)
            } catch StorageError.preconditionFailed {
                // Someone changed the metadata first (perhaps adding a
                // token of their own): look again.
                metadata = try await getMetadata()
            }
        }
        throw StorageError.unknown(
            message: "\(self): the object's metadata kept changing; no download token after \(Self.tokenAttempts) attempts",
            response: nil)
    }

    private static let tokenAttempts = 5

    /// The first token of `firebaseStorageDownloadTokens` (or, from
    /// Firebase's v0 API, of `downloadTokens`), if any.
    static func firstDownloadToken(_ metadata: StorageMetadata) -> String? {
        guard let tokens = metadata.customMetadata?[downloadTokensKey] ?? metadata.downloadTokens else { return nil }
        return tokens.split(separator: ",").lazy
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .first { !$0.isEmpty }
    }

    /// The download URL of this object for `token`.
    func firebaseDownloadURL(token: String) throws(StorageError) -> URL {
        let base = storage.configuration.firebaseDownloadBase
        let bucket = Self.escapeForDownloadURL(self.bucket)
        let text = "\(base)/v0/b/\(bucket)/o/\(Self.escapeForDownloadURL(fullPath))?alt=media&token=\(Self.escapeForDownloadURL(token))"
        guard let url = URL(string: text) else {
            throw StorageError.invalidArgument("cannot make a download URL of \(text)")
        }
        return url
    }

    /// Percent-encodes an object path as one URL path segment, as the
    /// Firebase Apple SDK does (`GCSEscapedString`): everything but letters,
    /// digits and `-._~!$'()*,=:@` is escaped, so `/` is `%2F`, a space
    /// `%20`, `#` `%23`, `?` `%3F`, `&` `%26`, `+` `%2B`, and non-ASCII
    /// characters are their UTF-8 bytes.
    static func escapeForDownloadURL(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: downloadURLAllowed) ?? text
    }

    private static let downloadURLAllowed = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~!$'()*,=:@")
}

extension StorageConfiguration {
    /// Where Firebase download URLs point: the Firebase Storage service for
    /// Cloud Storage's own endpoint, else the endpoint itself (scheme, host
    /// and port), which is where an emulator serves `/v0/`.
    var firebaseDownloadBase: String {
        let host = endpoint.host?.lowercased() ?? ""
        if host == "storage.googleapis.com" || host == "www.googleapis.com" {
            return "https://firebasestorage.googleapis.com"
        }
        let name = endpoint.host ?? ""
        var base = "\(endpoint.scheme ?? "https")://\(name.contains(":") ? "[\(name)]" : name)"
        if let port = endpoint.port { base += ":\(port)" }
        return base
    }
}
