import Foundation
import Logging
import Transport

/// Access tokens of the VM's (or GKE workload's) default service account,
/// from the metadata server. The server does the signing; it answers a
/// plain GET as long as the `Metadata-Flavor: Google` header is present,
/// the guard against requests forged through an open proxy.
public final class MetadataServerCredentials: CredentialsProvider, CustomStringConvertible {
    public static let defaultHost = "169.254.169.254"

    /// `host` or `host:port` of the metadata server.
    public let host: String
    private let cache: AccessTokenCache

    /// - Parameters:
    ///   - host: the metadata server; nil means `GCE_METADATA_HOST` from
    ///     `environment`, else 169.254.169.254 (the name
    ///     `metadata.google.internal` would need DNS to work, the address
    ///     does not).
    ///   - clock: the current time; tests inject one to travel to expiry.
    public init(
        host: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        transport: HTTPTransport = .shared,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) {
        let resolved = Self.resolveHost(host, environment: environment)
        self.host = resolved
        let url = "http://\(resolved)/computeMetadata/v1/instance/service-accounts/default/token"
        self.cache = AccessTokenCache(now: clock) {
            let now = clock()
            let request = HTTPRequest(
                method: .get, url: url, headers: ["Metadata-Flavor": "Google"], isIdempotent: true)
            let response = try await transport.send(request)
            let token = try TokenResponse.parse(response, endpoint: url, requestedAt: now)
            logger.debug("obtained access token from metadata server", metadata: [
                "host": "\(resolved)",
                "expires_in": "\(Int(token.expiresAt.timeIntervalSince(now)))",
            ])
            return token
        }
    }

    public func authorizationHeader() async throws -> String? {
        "Bearer " + (try await cache.accessToken())
    }

    public func invalidate() async { await cache.invalidate() }

    public var identity: String { "metadata server \(host)" }

    public var description: String { "MetadataServerCredentials(\(host))" }

    /// Explicit host, else `GCE_METADATA_HOST` (as Google's libraries read
    /// it, possibly with a scheme or trailing slash), else the default.
    static func resolveHost(_ host: String?, environment: [String: String]) -> String {
        var value = host ?? environment["GCE_METADATA_HOST"] ?? ""
        for scheme in ["http://", "https://"] where value.hasPrefix(scheme) {
            value.removeFirst(scheme.count)
        }
        while value.hasSuffix("/") { value.removeLast() }
        return value.isEmpty ? defaultHost : value
    }
}
