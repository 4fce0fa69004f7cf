import Foundation
import Transport

/// An OAuth2 access token (or a Firebase ID token) and the moment it stops
/// being accepted.
struct AccessToken: Sendable {
    let value: String
    let expiresAt: Date
    /// How long it was valid for when it arrived (`expires_in`, or
    /// `expireTime` less the time of the request; a metadata server's
    /// `expires_in` counts what is left of a token it caches), when known:
    /// a short-lived token is renewed once a quarter of its life remains,
    /// not 5 minutes before the end (which would be at every call).
    var lifetime: TimeInterval?
}

/// Caches the access token of a refreshing provider.
///
/// A token is reused until less than `refreshMargin` of its lifetime
/// remains (a quarter of its lifetime, if that is less), so a request
/// never starts with a token about to expire in flight. Concurrent callers that find no usable token share one fetch
/// instead of each hitting the token endpoint: the fetch runs in a task
/// that the actor remembers until it finishes.
actor AccessTokenCache {
    typealias Fetch = @Sendable () async throws -> AccessToken

    private let fetch: Fetch
    private let now: @Sendable () -> Date
    private let refreshMargin: TimeInterval
    private var token: AccessToken?
    private var refresh: Task<AccessToken, any Error>?
    /// Bumped by `invalidate()`, so that a fetch started before an
    /// invalidation does not store its (possibly revoked) result.
    private var generation = 0

    init(refreshMargin: TimeInterval = 300, now: @escaping @Sendable () -> Date, fetch: @escaping Fetch) {
        self.refreshMargin = refreshMargin
        self.now = now
        self.fetch = fetch
    }

    func accessToken() async throws -> String {
        if let token, token.expiresAt.timeIntervalSince(now()) >= margin(token) {
            return token.value
        }
        if let refresh {
            return try await refresh.value.value
        }
        // Unstructured on purpose: the fetch must not be cancelled with the
        // caller that happened to start it, since others may be waiting.
        let fetch = self.fetch
        let task = Task { try await fetch() }
        refresh = task
        let started = generation
        // Awaiting `result` of an unstructured task does not propagate
        // cancellation, so this bookkeeping always runs.
        let result = await task.result
        refresh = nil
        if case .success(let fresh) = result, started == generation {
            token = fresh
        }
        // A failure is not cached: the next call tries again. A freshly
        // fetched token is returned even if its lifetime is below the margin
        // (a metadata server may hand out a token it is about to rotate);
        // the next call then fetches again.
        return try result.get().value
    }

    func invalidate() {
        token = nil
        generation += 1
    }

    private func margin(_ token: AccessToken) -> TimeInterval {
        token.lifetime.map { min(refreshMargin, $0 / 4) } ?? refreshMargin
    }
}

/// Parsing of an OAuth2 token endpoint's answer, shared by the service
/// account and metadata server flows.
enum TokenResponse {
    /// Turns a response into a token, or into the error that explains it.
    /// `redacting` lists secrets (the signed assertion) that must not leak
    /// into an error message should the server echo them.
    static func parse(
        _ response: HTTPResponse, endpoint: String, requestedAt: Date, redacting secrets: [String] = []
    ) throws(CredentialsError) -> AccessToken {
        guard response.isSuccess else {
            let message = errorMessage(response.body, redacting: secrets)
            if (400..<500).contains(response.status) {
                throw .refused(status: response.status, message: message)
            }
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: message)
        }
        guard let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: "the body is not a JSON object")
        }
        guard let value = json["access_token"] as? String, !value.isEmpty else {
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: "no access_token in the answer")
        }
        if let type = json["token_type"] as? String, type.lowercased() != "bearer" {
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: "unsupported token_type \(type)")
        }
        guard let lifetime = (json["expires_in"] as? NSNumber)?.doubleValue, lifetime > 0 else {
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: "no positive expires_in in the answer")
        }
        // Counted from when the request was sent: the server's clock starts
        // no earlier, so the token never outlives our estimate. The
        // lifetime goes with it: without it the cache's 5-minute margin
        // made a token shorter than that fetched anew at every call.
        return AccessToken(value: value, expiresAt: requestedAt.addingTimeInterval(lifetime), lifetime: lifetime)
    }

    /// `error: error_description` of an OAuth2 error body, else the start
    /// of the body as text; secrets are cut out and the length is capped.
    static func errorMessage(_ body: Data, redacting secrets: [String]) -> String {
        var message: String
        if let json = try? JSONSerialization.jsonObject(with: body) as? [String: Any] {
            let code = json["error"] as? String
                ?? (json["error"] as? [String: Any])?["message"] as? String
            let detail = json["error_description"] as? String
            message = [code, detail].compactMap { $0 }.joined(separator: ": ")
        } else {
            message = String(decoding: body.prefix(512), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
        }
        for secret in secrets where !secret.isEmpty {
            message = message.replacingOccurrences(of: secret, with: "<redacted>")
        }
        if message.count > 300 { message = String(message.prefix(300)) + "…" }
        return message.isEmpty ? "no error message" : message
    }
}
