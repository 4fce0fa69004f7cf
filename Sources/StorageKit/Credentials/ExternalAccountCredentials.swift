import Foundation
import Logging
import Transport

/// Workload identity federation (type `external_account`,
/// https://google.aip.dev/auth/4117): a token from another identity
/// provider (a Kubernetes service-account token, a GitHub Actions OIDC
/// token, …), read from a file or a URL, is exchanged at the Security Token
/// Service (`token_url`,
/// https://cloud.google.com/iam/docs/reference/sts/rest/v1/TopLevel/token)
/// for a Google access token; with `service_account_impersonation_url` that
/// token then impersonates a service account.
public final class ExternalAccountCredentials: CredentialsProvider, CustomStringConvertible {
    static let tokenExchangeGrant = "urn:ietf:params:oauth:grant-type:token-exchange"
    static let accessTokenType = "urn:ietf:params:oauth:token-type:access_token"
    static let cloudPlatformScope = "https://www.googleapis.com/auth/cloud-platform"

    /// Where the subject token comes from.
    public enum SubjectTokenSource: Sendable {
        case file(String)
        case url(String, headers: [String: String])
    }

    /// How the subject token is held: the whole text, or a field of JSON.
    public enum SubjectTokenFormat: Sendable {
        case text
        case json(field: String)
    }

    public let audience: String
    public let tokenURL: String
    public let quotaProject: String?
    /// The provider whose token reaches storage: the STS exchange itself,
    /// or the impersonation on top of it.
    private let exchange: any CredentialsProvider
    private let impersonated: ImpersonatedCredentials?

    public init(
        audience: String, subjectTokenType: String, tokenURL: String,
        source: SubjectTokenSource, format: SubjectTokenFormat = .text,
        impersonationURL: String? = nil, quotaProject: String? = nil,
        transport: HTTPTransport = .shared,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) {
        self.audience = audience
        self.tokenURL = tokenURL
        self.quotaProject = quotaProject
        // Without impersonation the STS token is used on storage, so it
        // carries storage's scope; with it, it only calls IAM.
        let scope = impersonationURL == nil ? ServiceAccountCredentials.defaultScope : Self.cloudPlatformScope
        let sts = SecurityTokenExchange(
            audience: audience, subjectTokenType: subjectTokenType, tokenURL: tokenURL, scope: scope,
            source: source, format: format, transport: transport, clock: clock, logger: logger)
        if let impersonationURL {
            let impersonated = ImpersonatedCredentials(
                url: impersonationURL, source: sts, quotaProject: quotaProject, transport: transport,
                clock: clock, logger: logger)
            self.impersonated = impersonated
            self.exchange = impersonated
        } else {
            self.impersonated = nil
            self.exchange = sts
        }
    }

    /// From the JSON of an `external_account` file.
    convenience init(json object: [String: Any], source: String, transport: HTTPTransport) throws(CredentialsError) {
        let file = CredentialsFile.Fields(object, source: source)
        guard let credentialSource = object["credential_source"] as? [String: Any] else {
            throw .invalidKeyFile(path: source, reason: "missing credential_source")
        }
        let subject: SubjectTokenSource
        if let path = credentialSource["file"] as? String, !path.isEmpty {
            subject = .file(path)
        } else if let url = credentialSource["url"] as? String, !url.isEmpty {
            subject = .url(url, headers: credentialSource["headers"] as? [String: String] ?? [:])
        } else {
            // AWS and executable sources need signing or running programs.
            throw .invalidKeyFile(path: source, reason: "credential_source has neither file nor url (other sources are not supported)")
        }
        var format = SubjectTokenFormat.text
        if let spec = credentialSource["format"] as? [String: Any], spec["type"] as? String == "json" {
            guard let field = spec["subject_token_field_name"] as? String, !field.isEmpty else {
                throw .invalidKeyFile(path: source, reason: "credential_source.format needs subject_token_field_name")
            }
            format = .json(field: field)
        }
        self.init(
            audience: try file.required("audience"), subjectTokenType: try file.required("subject_token_type"),
            tokenURL: try file.required("token_url"), source: subject, format: format,
            impersonationURL: file.optional("service_account_impersonation_url"),
            quotaProject: file.optional("quota_project_id"), transport: transport)
    }

    public func authorizationHeader() async throws -> String? { try await exchange.authorizationHeader() }

    public func invalidate() async { await exchange.invalidate() }

    public var identity: String {
        let base = "external account \(audience)"
        return impersonated.map { "\(base) as service account \($0.serviceAccount)" } ?? base
    }

    public var description: String { "ExternalAccountCredentials(\(audience))" }
}

/// The STS exchange of a subject token for a Google access token.
final class SecurityTokenExchange: CredentialsProvider {
    private let cache: AccessTokenCache
    let audience: String

    init(
        audience: String, subjectTokenType: String, tokenURL: String, scope: String,
        source: ExternalAccountCredentials.SubjectTokenSource, format: ExternalAccountCredentials.SubjectTokenFormat,
        transport: HTTPTransport, clock: @escaping @Sendable () -> Date, logger: Logger
    ) {
        self.audience = audience
        self.cache = AccessTokenCache(now: clock) {
            let now = clock()
            // Read at every exchange: the other provider rotates it
            // (Kubernetes projects a new file, a CI runner serves a new one).
            let subject = try await Self.subjectToken(source, format: format, transport: transport)
            let body = OAuthForm.encode([
                ("grant_type", ExternalAccountCredentials.tokenExchangeGrant), ("audience", audience),
                ("scope", scope), ("requested_token_type", ExternalAccountCredentials.accessTokenType),
                ("subject_token", subject), ("subject_token_type", subjectTokenType),
            ])
            let response = try await transport.send(OAuthForm.post(tokenURL, body: body))
            let token = try TokenResponse.parse(response, endpoint: tokenURL, requestedAt: now, redacting: [subject])
            logger.debug("exchanged an external token at the STS", metadata: [
                "audience": "\(audience)", "expires_in": "\(Int(token.expiresAt.timeIntervalSince(now)))",
            ])
            return token
        }
    }

    func authorizationHeader() async throws -> String? { "Bearer " + (try await cache.accessToken()) }
    func invalidate() async { await cache.invalidate() }
    var identity: String { "external account \(audience)" }

    static func subjectToken(
        _ source: ExternalAccountCredentials.SubjectTokenSource, format: ExternalAccountCredentials.SubjectTokenFormat,
        transport: HTTPTransport
    ) async throws -> String {
        let data: Data
        let origin: String
        switch source {
        case .file(let path):
            origin = path
            do {
                data = try Data(contentsOf: URL(fileURLWithPath: path))
            } catch {
                throw CredentialsError.unreadableFile(path: path, reason: CredentialsError.reason(error))
            }
        case .url(let url, let headers):
            origin = url
            let response = try await transport.send(HTTPRequest(
                method: .get, url: url, headers: headers, isIdempotent: true))
            guard response.isSuccess else {
                throw CredentialsError.invalidTokenResponse(
                    endpoint: url, status: response.status, message: "the subject token URL did not answer with a token")
            }
            data = response.body
        }
        let token: String?
        switch format {
        case .text:
            token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        case .json(let field):
            token = (try? JSONSerialization.jsonObject(with: data) as? [String: Any])?[field] as? String
        }
        guard let token, !token.isEmpty else { throw CredentialsError.emptyToken(source: "the subject token source \(origin)") }
        return token
    }
}
