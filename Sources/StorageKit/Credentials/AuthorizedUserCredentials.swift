import Foundation
import Logging
import Transport

/// A Google user's credentials, as `gcloud auth application-default login`
/// writes them (type `authorized_user`): an OAuth client and a refresh
/// token, exchanged at `token_uri` for one-hour access tokens
/// (https://developers.google.com/identity/protocols/oauth2/web-server#offline).
///
/// The client secret and the refresh token never appear in `description`,
/// in errors or in logs.
public final class AuthorizedUserCredentials: CredentialsProvider, CustomStringConvertible {
    public static let defaultTokenURI = ServiceAccountKey.defaultTokenURI

    public let clientID: String
    /// The user's email when the file names it (gcloud writes `account`
    /// in some versions); else nil.
    public let account: String?
    public let tokenURI: String
    public let quotaProject: String?
    private let cache: AccessTokenCache

    public init(
        clientID: String, clientSecret: String, refreshToken: String,
        tokenURI: String = AuthorizedUserCredentials.defaultTokenURI,
        account: String? = nil, quotaProject: String? = nil,
        transport: HTTPTransport = .shared,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) {
        self.clientID = clientID
        self.account = account
        self.tokenURI = tokenURI
        self.quotaProject = quotaProject
        self.cache = AccessTokenCache(now: clock) {
            let now = clock()
            let body = OAuthForm.encode([
                ("grant_type", "refresh_token"), ("client_id", clientID),
                ("client_secret", clientSecret), ("refresh_token", refreshToken),
            ])
            let response = try await transport.send(OAuthForm.post(tokenURI, body: body))
            let token = try TokenResponse.parse(
                response, endpoint: tokenURI, requestedAt: now, redacting: [clientSecret, refreshToken])
            logger.debug("obtained access token for authorized user", metadata: [
                "client_id": "\(clientID)", "expires_in": "\(Int(token.expiresAt.timeIntervalSince(now)))",
            ])
            return token
        }
    }

    /// From the JSON of an `authorized_user` file; `source` names it in errors.
    convenience init(json object: [String: Any], source: String, transport: HTTPTransport) throws(CredentialsError) {
        let file = CredentialsFile.Fields(object, source: source)
        self.init(
            clientID: try file.required("client_id"), clientSecret: try file.required("client_secret"),
            refreshToken: try file.required("refresh_token"),
            tokenURI: file.optional("token_uri") ?? Self.defaultTokenURI,
            account: file.optional("account"), quotaProject: file.optional("quota_project_id"),
            transport: transport)
    }

    public func authorizationHeader() async throws -> String? {
        "Bearer " + (try await cache.accessToken())
    }

    public func invalidate() async { await cache.invalidate() }

    public var identity: String {
        "authorized user " + (account.map { "\($0) (client \(clientID))" } ?? "(client \(clientID))")
    }

    public var description: String { "AuthorizedUserCredentials(\(account ?? clientID))" }
}

/// `application/x-www-form-urlencoded` requests to OAuth endpoints.
enum OAuthForm {
    static func encode(_ fields: [(String, String)]) -> String {
        fields.map { "\($0)=\(ServiceAccountCredentials.formEncode($1))" }.joined(separator: "&")
    }

    static func post(_ url: String, body: String) -> HTTPRequest {
        HTTPRequest(
            method: .post, url: url,
            headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
            body: .bytes(Data(body.utf8)), isIdempotent: true)
    }
}
