import Foundation
import Synchronization

/// An access token obtained elsewhere (`gcloud auth print-access-token`, a
/// sidecar, a CI secret): given directly, read from a file, or read from an
/// environment variable. StorageKit cannot renew such a token.
///
/// A token file is re-read whenever its modification time, size or inode
/// changes, so an external refresher that rewrites the file (in place or by
/// rename) is picked up without restarting. Surrounding whitespace, such as
/// the newline `echo` leaves, is trimmed.
///
/// The token never appears in `description`, `debugDescription` or
/// reflection (`dump`), only its source.
public final class StaticTokenCredentials: CredentialsProvider,
    CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable
{
    private enum Source: Sendable {
        case token(String)
        case file(String)
        case environment(name: String, value: String?)
    }

    /// What identifies a version of the token file: if none of these
    /// changed, the cached token is still the file's content.
    private struct FileVersion: Equatable {
        var modified: Date?
        var size: Int?
        var inode: Int?
    }

    private let source: Source
    private let cached = Mutex<(version: FileVersion, token: String)?>(nil)

    /// A fixed token.
    public init(token: String) {
        source = .token(token)
    }

    /// The token in the file at `path`, re-read when the file changes.
    /// Errors (missing file, empty token) surface when a token is needed,
    /// since the refresher may not have written the file yet.
    public init(tokenFile path: String) {
        source = .file(path)
    }

    /// The token in environment variable `name` (looked up in `environment`
    /// once, now).
    public init(environmentVariable name: String, environment: [String: String] = ProcessInfo.processInfo.environment) {
        source = .environment(name: name, value: environment[name])
    }

    public func authorizationHeader() async throws -> String? {
        "Bearer " + (try currentToken())
    }

    /// Forces the token file to be read again on the next call; a fixed
    /// token has nothing to refresh.
    public func invalidate() async {
        cached.withLock { $0 = nil }
    }

    private func currentToken() throws(CredentialsError) -> String {
        switch source {
        case .token(let token):
            return try Self.checked(token, source: "the configured token")
        case .environment(let name, let value):
            guard let value else { throw .missingEnvironmentVariable(name) }
            return try Self.checked(value, source: "environment variable \(name)")
        case .file(let path):
            return try fileToken(path)
        }
    }

    private func fileToken(_ path: String) throws(CredentialsError) -> String {
        let version: FileVersion
        do {
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            version = FileVersion(
                modified: attributes[.modificationDate] as? Date,
                size: (attributes[.size] as? NSNumber)?.intValue,
                inode: (attributes[.systemFileNumber] as? NSNumber)?.intValue)
        } catch {
            throw .unreadableFile(path: path, reason: CredentialsError.reason(error))
        }
        if let hit = cached.withLock({ $0 }), hit.version == version {
            return hit.token
        }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadableFile(path: path, reason: CredentialsError.reason(error))
        }
        let token = try Self.checked(String(decoding: data, as: UTF8.self), source: "token file \(path)")
        cached.withLock { $0 = (version, token) }
        return token
    }

    private static func checked(_ raw: String, source: String) throws(CredentialsError) -> String {
        let token = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty else { throw .emptyToken(source: source) }
        return token
    }

    private var sourceDescription: String {
        switch source {
        case .token: return "fixed token"
        case .file(let path): return "token file \(path)"
        case .environment(let name, _): return "environment variable \(name)"
        }
    }

    public var identity: String { "access token from \(sourceDescription)" }

    public var description: String { "StaticTokenCredentials(\(sourceDescription))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["source": sourceDescription]) }
}
