import Foundation
import Transport

/// Supplies the `Authorization` header of Cloud Storage requests.
///
/// Providers cache what they fetch: `authorizationHeader()` is called before
/// every request, so it must be cheap when a valid token is at hand.
///
/// The credentials also choose the wire dialect: OAuth tokens (service
/// accounts, access tokens, the metadata server) and anonymous access speak
/// the Cloud Storage JSON API; a Firebase Auth user speaks the Firebase
/// Storage REST API (v0), where Security Rules decide.
public protocol CredentialsProvider: Sendable {
    /// The value of the `Authorization` header (`Bearer …`, `Firebase …`),
    /// or nil to send the request anonymously (public buckets, emulators).
    func authorizationHeader() async throws -> String?

    /// Which API these credentials are accepted by.
    var dialect: StorageDialect { get }

    /// Forgets any cached token. The storage layer calls this after a 401 so
    /// that the next `authorizationHeader()` fetches a fresh one (the token
    /// may have been revoked before its announced expiry).
    func invalidate() async

    /// Who these credentials act as, for the mount's first log line and
    /// `bucketfs status`: the type and an identity (an email, a client id,
    /// an audience, a host), never a secret.
    var identity: String { get }

    /// The project charged for quota and billing (`quota_project_id` of
    /// the credentials file), sent as `x-goog-user-project`
    /// (https://cloud.google.com/apis/docs/system-parameters).
    var quotaProject: String? { get }
}

extension CredentialsProvider {
    /// Providers without a cache have nothing to forget.
    public func invalidate() async {}

    public var identity: String { String(describing: self) }

    public var quotaProject: String? { nil }

    /// OAuth and anonymous access: the Cloud Storage JSON API.
    public var dialect: StorageDialect { .jsonAPI }
}

/// The two APIs in front of a Cloud Storage bucket.
public enum StorageDialect: String, Sendable, CaseIterable, CustomStringConvertible {
    /// The Cloud Storage JSON API (`/storage/v1/b/BUCKET/o…`), with OAuth
    /// credentials and IAM: what admins and servers use.
    case jsonAPI
    /// The Firebase Storage REST API (`/v0/b/BUCKET/o…`), with a Firebase
    /// Auth ID token and Security Rules: what a Firebase app's users use.
    /// It has no preconditions and no server-side copy (see docs/storagekit.md).
    case firebase

    /// Where it is served unless an endpoint is configured.
    public var defaultEndpoint: URL {
        switch self {
        case .jsonAPI: return URL(string: "https://storage.googleapis.com")!
        case .firebase: return URL(string: "https://firebasestorage.googleapis.com")!
        }
    }

    /// The environment variable naming an emulator for this API
    /// (`host:port`, as Google's and Firebase's client libraries read it).
    public var emulatorVariable: String {
        switch self {
        case .jsonAPI: return "STORAGE_EMULATOR_HOST"
        case .firebase: return "FIREBASE_STORAGE_EMULATOR_HOST"
        }
    }

    public var description: String {
        switch self {
        case .jsonAPI: return "Cloud Storage JSON API"
        case .firebase: return "Firebase Storage REST API (v0)"
        }
    }
}

/// No credentials: requests go out without an `Authorization` header.
public struct AnonymousCredentials: CredentialsProvider, CustomStringConvertible {
    public init() {}
    public func authorizationHeader() async throws -> String? { nil }
    public var identity: String { "anonymous" }
    public var description: String { "AnonymousCredentials" }
}

/// Why credentials could not be obtained.
///
/// Messages name files, variables and endpoints so that a misconfiguration
/// can be found, but never contain a key, a token or a signed assertion:
/// errors end up in logs and on terminals.
public enum CredentialsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A key or token file could not be read (missing, unreadable).
    case unreadableFile(path: String, reason: String)
    /// A service-account key file was read but is not a usable key.
    case invalidKeyFile(path: String, reason: String)
    /// A token source (file, environment variable) yielded an empty token.
    case emptyToken(source: String)
    /// The environment variable that should hold a token is not set.
    case missingEnvironmentVariable(String)
    /// The token endpoint refused the request (bad signature, unknown key,
    /// disabled account, no service account on the VM, ...): retrying the
    /// same request will not help.
    case refused(status: Int, message: String)
    /// The token endpoint failed in another way (5xx after retries, or an
    /// answer that is not a token).
    case invalidTokenResponse(endpoint: String, status: Int, message: String)
    /// The JWT could not be signed with the key.
    case signingFailed(String)
    /// Something the credentials need is not configured (a Firebase API
    /// key, …); the message says what and where to put it.
    case missingConfiguration(String)
    /// No credentials anywhere in the Application Default Credentials
    /// order; `tried` says what was looked at.
    case noCredentials(tried: [String])

    public var description: String {
        switch self {
        case .unreadableFile(let path, let reason):
            return "cannot read credentials file \(path): \(reason)"
        case .invalidKeyFile(let path, let reason):
            return "invalid service-account key file \(path): \(reason)"
        case .emptyToken(let source):
            return "the access token from \(source) is empty"
        case .missingEnvironmentVariable(let name):
            return "environment variable \(name) is not set"
        case .refused(let status, let message):
            return "token endpoint refused the credentials (HTTP \(status)): \(message)"
        case .invalidTokenResponse(let endpoint, let status, let message):
            return "unusable answer from token endpoint \(endpoint) (HTTP \(status)): \(message)"
        case .signingFailed(let reason):
            return "cannot sign the token request: \(reason)"
        case .missingConfiguration(let what):
            return what
        case .noCredentials(let tried):
            return "no Google credentials found (tried: \(tried.joined(separator: "; "))); "
                + "run `gcloud auth application-default login`, set GOOGLE_APPLICATION_CREDENTIALS, or use --anonymous"
        }
    }
}

extension CredentialsError {
    /// A short, secret-free reason for a file-reading failure: the OS's
    /// message (Foundation's would repeat the path), never file content.
    static func reason(_ error: any Error) -> String {
        if let error = error as? CocoaError, let underlying = error.underlying as? POSIXError {
            return String(cString: strerror(underlying.code.rawValue))
        }
        if let error = error as? CocoaError {
            switch error.code {
            case .fileReadNoSuchFile: return "No such file or directory"
            case .fileReadNoPermission: return "Permission denied"
            default: break
            }
        }
        return "\(type(of: error))"
    }
}

/// Picks credentials in the Application Default Credentials order, as
/// Google's client libraries do
/// (https://cloud.google.com/docs/authentication/application-default-credentials).
public enum Credentials {
    /// 1. `GOOGLE_APPLICATION_CREDENTIALS` names a credentials file
    ///    (`CredentialsFile.load`; a missing or unsupported file is an
    ///    error, never a silent fall back).
    /// 2. gcloud's well-known file (`wellKnownFile`), when it exists.
    /// 3. The metadata server: `GCE_METADATA_HOST` when set; else, unless
    ///    `NO_GCE_CHECK` is true, `metadata.google.internal`, probed before
    ///    its first token (`ProbedMetadataCredentials`).
    /// Otherwise `CredentialsError.noCredentials` naming what was tried.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment,
        transport: HTTPTransport = .shared
    ) throws(CredentialsError) -> any CredentialsProvider {
        if let path = environment["GOOGLE_APPLICATION_CREDENTIALS"], !path.isEmpty {
            return try CredentialsFile.load(path, transport: transport)
        }
        var tried = ["GOOGLE_APPLICATION_CREDENTIALS: not set"]
        if let path = wellKnownFile(environment) {
            if FileManager.default.fileExists(atPath: path) {
                return try CredentialsFile.load(path, transport: transport)
            }
            tried.append("\(path): no such file")
        } else {
            tried.append("gcloud's file: neither CLOUDSDK_CONFIG nor HOME is set")
        }
        if let host = environment["GCE_METADATA_HOST"], !host.isEmpty {
            return MetadataServerCredentials(host: host, transport: transport)
        }
        if skipsMetadataProbe(environment) {
            throw .noCredentials(tried: tried + ["metadata server: skipped (NO_GCE_CHECK)"])
        }
        return ProbedMetadataCredentials(host: metadataServerName, tried: tried, transport: transport)
    }
}
