import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The credentials of a request, from its `secrets` (a Kubernetes Secret
/// the StorageClass or volume names): `key.json`, a Google credentials
/// file's content (service account key, authorized user, external
/// account), or `token`, an OAuth2 access token. No secret: the node's
/// Application Default Credentials, or `anonymous`.
///
/// bucketfs reads credentials from files, so a secret is written to a
/// file of its own under the state directory: mode 0600, owned by the user
/// the mount runs as, in a 0700 directory. Never a command line (which
/// /proc shows to everyone), never a log, never the cache directory.
public enum VolumeSecrets: Equatable, Sendable {
    case none
    case keyJSON(String)
    case accessToken(String)

    public static let keyJSONKey = "key.json"
    public static let tokenKey = "token"

    /// The secret in `secrets`; an unknown key or both keys are refused
    /// (a typo must not silently fall back to the node's identity).
    public static func parse(_ secrets: [String: String]) throws(VolumeSecretsError) -> VolumeSecrets {
        let unknown = secrets.keys.filter { $0 != keyJSONKey && $0 != tokenKey }.sorted()
        guard unknown.isEmpty else {
            throw VolumeSecretsError(description: "unknown secret key(s) \(unknown.joined(separator: ", ")): use \(keyJSONKey) or \(tokenKey)")
        }
        switch (secrets[keyJSONKey], secrets[tokenKey]) {
        case (nil, nil): return .none
        case (let key?, nil):
            guard !key.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { throw VolumeSecretsError(description: "\(keyJSONKey) is empty") }
            return .keyJSON(key)
        case (nil, let token?):
            let trimmed = token.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !trimmed.isEmpty else { throw VolumeSecretsError(description: "\(tokenKey) is empty") }
            return .accessToken(trimmed)
        case (_?, _?):
            throw VolumeSecretsError(description: "give \(keyJSONKey) or \(tokenKey), not both")
        }
    }

    /// The setting that names the file, and its content.
    var file: (setting: String, name: String, content: String)? {
        switch self {
        case .none: return nil
        case .keyJSON(let json): return ("key-file", "key.json", json)
        case .accessToken(let token): return ("token-file", "token", token + "\n")
        }
    }

    /// The file a secret was written to, and the setting that names it.
    struct Installed {
        let setting: String
        let path: String
        var arguments: [String] { ["--" + setting, path] }
    }

    /// Writes the secret into `directory` (made 0700, owned by
    /// `uid`:`gid`) and returns where, or nil for no secret. An existing file is replaced whole (write to a temporary
    /// name, then rename): bucketfs re-reads a token file when it changes
    /// and must never see half of one.
    func install(in directory: String, uid: uid_t, gid: gid_t) throws(VolumeSecretsError) -> Installed? {
        guard let file else { return nil }
        try Self.makePrivateDirectory(directory, uid: uid, gid: gid)
        let path = directory + "/" + file.name
        let temporary = path + ".new"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .system("cannot write the secret file", errno) }
        defer { close(fd) }
        let bytes = Array(file.content.utf8)
        let written = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == bytes.count, fchown(fd, uid, gid) == 0, fchmod(fd, 0o600) == 0, fsync(fd) == 0 else {
            let cause = errno
            unlink(temporary)
            throw .system("cannot write the secret file", cause)
        }
        guard rename(temporary, path) == 0 else { throw .system("cannot install the secret file", errno) }
        return Installed(setting: file.setting, path: path)
    }

    /// A directory only `uid` can enter (the secrets' parent is root's).
    static func makePrivateDirectory(_ path: String, uid: uid_t, gid: gid_t) throws(VolumeSecretsError) {
        if mkdir(path, 0o700) != 0 && errno != EEXIST { throw .system("cannot make \(path)", errno) }
        guard chown(path, uid, gid) == 0, chmod(path, 0o700) == 0 else { throw .system("cannot secure \(path)", errno) }
    }
}

public struct VolumeSecretsError: Error, CustomStringConvertible, Sendable {
    public let description: String

    static func system(_ what: String, _ code: Int32) -> VolumeSecretsError {
        VolumeSecretsError(description: "\(what): \(String(cString: strerror(code)))")
    }
}
