import Foundation
import Logging
import Transport

/// Access tokens of another service account, minted by the IAM Service
/// Account Credentials API for whoever `source` is (it needs
/// `roles/iam.serviceAccountTokenCreator` on the target):
/// https://cloud.google.com/iam/docs/reference/credentials/rest/v1/projects.serviceAccounts/generateAccessToken
/// Used for `impersonated_service_account` files (gcloud's
/// `--impersonate-service-account`), for external accounts with
/// `service_account_impersonation_url`, and for bucketfs's
/// `--impersonate-service-account`.
public final class ImpersonatedCredentials: CredentialsProvider, CustomStringConvertible {
    public static let iamCredentialsEndpoint = "https://iamcredentials.googleapis.com"

    /// The target service account's email, taken from the URL.
    public let serviceAccount: String
    public let url: String
    public let source: any CredentialsProvider
    public let quotaProject: String?
    private let cache: AccessTokenCache

    /// - Parameters:
    ///   - url: the `…/serviceAccounts/EMAIL:generateAccessToken` URL.
    ///   - scope: the scopes the minted token carries.
    public init(
        url: String, source: any CredentialsProvider, delegates: [String] = [],
        scope: String = ServiceAccountCredentials.defaultScope, quotaProject: String? = nil,
        transport: HTTPTransport = .shared,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) {
        self.url = url
        self.source = source
        self.quotaProject = quotaProject
        let account = Self.account(in: url)
        self.serviceAccount = account
        self.cache = AccessTokenCache(now: clock) {
            let now = clock()
            var request = HTTPRequest(
                method: .post, url: url, headers: ["Content-Type": "application/json", "Accept": "application/json"],
                body: .bytes(ObjectAPI.jsonBody([
                    "scope": scope.split(separator: " ").map(String.init) as [Any], "lifetime": "3600s",
                    "delegates": delegates as [Any],
                ])),
                isIdempotent: true)
            // A refused source token is fetched again once, as for storage requests.
            for attempt in 0..<2 {
                if let header = try await source.authorizationHeader() { request.headers["Authorization"] = header }
                let response = try await transport.send(request)
                if response.status == 401 && attempt == 0 {
                    await source.invalidate()
                    continue
                }
                let token = try Self.parse(response, endpoint: url, requestedAt: now)
                logger.debug("obtained impersonated access token", metadata: [
                    "service_account": "\(account)", "expires_in": "\(Int(token.expiresAt.timeIntervalSince(now)))",
                ])
                return token
            }
            throw CredentialsError.refused(status: 401, message: "the source credentials were refused twice")
        }
    }

    /// Impersonates `email` through the IAM credentials API at `endpoint`.
    public convenience init(
        serviceAccount email: String, source: any CredentialsProvider,
        endpoint: String = ImpersonatedCredentials.iamCredentialsEndpoint,
        quotaProject: String? = nil, transport: HTTPTransport = .shared
    ) {
        let base = endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint
        self.init(
            url: "\(base)/v1/projects/-/serviceAccounts/\(ObjectAPI.encode(email)):generateAccessToken",
            source: source, quotaProject: quotaProject ?? source.quotaProject, transport: transport)
    }

    public func authorizationHeader() async throws -> String? {
        "Bearer " + (try await cache.accessToken())
    }

    public func invalidate() async { await cache.invalidate() }

    public var identity: String { "impersonated service account \(serviceAccount) (as \(source.identity))" }

    public var description: String { "ImpersonatedCredentials(\(serviceAccount))" }

    /// The email between `serviceAccounts/` and `:generateAccessToken`.
    static func account(in url: String) -> String {
        guard let start = url.range(of: "/serviceAccounts/") else { return url }
        var name = url[start.upperBound...]
        if let end = name.range(of: ":generateAccessToken") { name = name[..<end.lowerBound] }
        return String(name).removingPercentEncoding ?? String(name)
    }

    /// `{"accessToken": "…", "expireTime": "2014-10-02T15:01:23Z"}`.
    static func parse(_ response: HTTPResponse, endpoint: String, requestedAt: Date) throws(CredentialsError) -> AccessToken {
        guard response.isSuccess else {
            // The OAuth-style parser reads Google's `{"error":{"message"}}` too.
            _ = try TokenResponse.parse(response, endpoint: endpoint, requestedAt: requestedAt)
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: "no token")
        }
        guard let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
              let value = json["accessToken"] as? String, !value.isEmpty,
              let expiry = (json["expireTime"] as? String).flatMap(parseTime)
        else {
            throw .invalidTokenResponse(
                endpoint: endpoint, status: response.status, message: "no accessToken and expireTime in the answer")
        }
        return AccessToken(value: value, expiresAt: expiry, lifetime: expiry.timeIntervalSince(requestedAt))
    }

    private static func parseTime(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text)
    }
}
