import Foundation
import Logging
import Transport
import _CryptoExtras

/// A parsed service-account JSON key file (as downloaded from the Cloud
/// console). The private key is held only as a signing key object and is
/// never printed: `description` and reflection show the account, not the key.
public struct ServiceAccountKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public static let defaultTokenURI = "https://oauth2.googleapis.com/token"

    public let clientEmail: String
    public let privateKeyID: String
    public let tokenURI: String
    public let projectID: String?
    /// `quota_project_id`: the project charged for quota, when set.
    public let quotaProject: String?
    /// Where the key came from, for error messages.
    public let source: String
    fileprivate let privateKey: _RSA.Signing.PrivateKey

    /// Reads and parses the key file at `path`.
    public init(contentsOfFile path: String) throws(CredentialsError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadableFile(path: path, reason: CredentialsError.reason(error))
        }
        try self.init(json: data, source: path)
    }

    /// Parses key-file JSON; `source` names it in errors.
    public init(json: Data, source: String = "<in-memory key>") throws(CredentialsError) {
        func invalid(_ reason: String) -> CredentialsError { .invalidKeyFile(path: source, reason: reason) }
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw invalid("not a JSON object")
        }
        func field(_ name: String) throws(CredentialsError) -> String {
            guard let value = object[name] as? String, !value.isEmpty else { throw invalid("missing \(name)") }
            return value
        }
        // Other types are read by `CredentialsFile`.
        let type = try field("type")
        guard type == "service_account" else {
            throw invalid("type is \"\(type)\", expected \"service_account\"")
        }
        clientEmail = try field("client_email")
        privateKeyID = try field("private_key_id")
        let pem = try field("private_key")
        tokenURI = (object["token_uri"] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? Self.defaultTokenURI
        projectID = object["project_id"] as? String
        quotaProject = (object["quota_project_id"] as? String).flatMap { $0.isEmpty ? nil : $0 }
        self.source = source
        do {
            privateKey = try _RSA.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            // The crypto error says nothing about the key material, but a
            // fixed message is the safest thing to show.
            throw invalid("private_key is not a PEM RSA private key of 2048 bits or more")
        }
    }

    public var description: String { "ServiceAccountKey(\(clientEmail), key id \(privateKeyID), from \(source))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror {
        Mirror(self, children: ["clientEmail": clientEmail, "privateKeyID": privateKeyID, "tokenURI": tokenURI])
    }

    /// A signed JWT asserting this account for `scope`, valid for an hour
    /// from `issuedAt` (the most Google accepts).
    func assertion(scope: String, issuedAt: Date) throws(CredentialsError) -> String {
        let iat = Int(issuedAt.timeIntervalSince1970)
        let header: [String: Any] = ["alg": "RS256", "typ": "JWT", "kid": privateKeyID]
        let claims: [String: Any] = [
            "iss": clientEmail, "scope": scope, "aud": tokenURI, "iat": iat, "exp": iat + 3600,
        ]
        do {
            let signingInput = try Self.base64URL(Self.json(header)) + "." + Self.base64URL(Self.json(claims))
            let signature = try privateKey.signature(for: Data(signingInput.utf8), padding: .insecurePKCS1v1_5)
            return signingInput + "." + Self.base64URL(signature.rawRepresentation)
        } catch {
            throw .signingFailed(CredentialsError.reason(error))
        }
    }

    private static func json(_ object: [String: Any]) throws -> Data {
        try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
    }

    /// Base64url without padding (RFC 7515 §2).
    static func base64URL(_ data: Data) -> String {
        var text = data.base64EncodedString()
        text = text.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        while text.hasSuffix("=") { text.removeLast() }
        return text
    }
}

/// OAuth2 access tokens for a service account, by the JWT-bearer grant
/// (RFC 7523): a JWT signed with the account's key is exchanged at the key's
/// `token_uri` for a one-hour access token, which is cached and renewed
/// five minutes before it expires.
public final class ServiceAccountCredentials: CredentialsProvider, CustomStringConvertible {
    public static let defaultScope = "https://www.googleapis.com/auth/devstorage.full_control"

    public let key: ServiceAccountKey
    public let scope: String
    private let cache: AccessTokenCache

    /// - Parameters:
    ///   - scope: space-separated OAuth2 scopes.
    ///   - clock: the current time; tests inject one to travel to expiry.
    public init(
        key: ServiceAccountKey,
        scope: String = ServiceAccountCredentials.defaultScope,
        transport: HTTPTransport = .shared,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) {
        self.key = key
        self.scope = scope
        self.cache = AccessTokenCache(now: clock) {
            try await Self.exchange(key: key, scope: scope, transport: transport, clock: clock, logger: logger)
        }
    }

    /// Reads the key file at `path`; throws `CredentialsError` if it is
    /// missing or not a service-account key.
    public convenience init(
        keyFile path: String,
        scope: String = ServiceAccountCredentials.defaultScope,
        transport: HTTPTransport = .shared,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) throws(CredentialsError) {
        self.init(
            key: try ServiceAccountKey(contentsOfFile: path), scope: scope,
            transport: transport, clock: clock, logger: logger)
    }

    public func authorizationHeader() async throws -> String? {
        "Bearer " + (try await cache.accessToken())
    }

    public func invalidate() async { await cache.invalidate() }

    public var identity: String { "service account \(key.clientEmail)" }

    public var quotaProject: String? { key.quotaProject }

    public var description: String { "ServiceAccountCredentials(\(key.clientEmail))" }

    /// One token exchange. Transport failures propagate as `TransportError`
    /// (after the transport's retries: the request is idempotent, a repeated
    /// exchange just yields another token).
    private static func exchange(
        key: ServiceAccountKey, scope: String, transport: HTTPTransport,
        clock: @Sendable () -> Date, logger: Logger
    ) async throws -> AccessToken {
        let now = clock()
        let assertion = try key.assertion(scope: scope, issuedAt: now)
        let body = OAuthForm.encode([
            ("grant_type", "urn:ietf:params:oauth:grant-type:jwt-bearer"), ("assertion", assertion),
        ])
        let response = try await transport.send(OAuthForm.post(key.tokenURI, body: body))
        let token = try TokenResponse.parse(response, endpoint: key.tokenURI, requestedAt: now, redacting: [assertion])
        logger.debug("obtained access token", metadata: [
            "account": "\(key.clientEmail)",
            "expires_in": "\(Int(token.expiresAt.timeIntervalSince(now)))",
        ])
        return token
    }

    /// `application/x-www-form-urlencoded` value: everything but RFC 3986
    /// unreserved characters percent-encoded.
    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func formEncode(_ value: String) -> String {
        value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? value
    }
}
