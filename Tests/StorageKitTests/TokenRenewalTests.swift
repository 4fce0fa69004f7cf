import Foundation
import TestServerClient
import Testing
import TestSupport
import Transport

@testable import StorageKit

/// When access tokens are fetched again: after storage refuses one (401),
/// and before one expires. Against `Tests/Servers/token_server.py` (which
/// counts and logs the tokens it issues) and `fake_gcs.py` (which logs the
/// bearer token of each request and refuses the tokens it is told to).
@Suite struct TokenRenewalTests {
    typealias Kind = ApplicationDefaultCredentialsTests.Kind

    // MARK: after a 401

    /// An `authorized_user` file for `server`, its provider, and a Storage
    /// on fake_gcs.py for a bucket of the test's own.
    static func userStorage(_ server: TokenServer, _ fixture: Fixture) throws -> (Storage, DirectGCS) {
        let path = try Kind.authorizedUser.file(server, fixture, quota: "quota-401")
        let credentials = try CredentialsFile.load(path, transport: fixture.transport)
        let bucket = "renew-\(UUID().uuidString.prefix(8).lowercased())"
        let storage = Storage(bucket: bucket, configuration: StorageConfiguration(
            endpoint: try TestEnv.url("BUCKETFS_TEST_FAKE_GCS"), credentials: credentials, transport: TestEnv.transport))
        return (storage, try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket))
    }

    /// The Authorization header of each request fake_gcs.py saw for the bucket.
    static func bearers(_ gcs: DirectGCS) async throws -> [String?] {
        try await gcs.requests()
            .filter { $0.path.contains("/b/\(gcs.bucket)/") }
            .map(\.authorization)
    }

    // GCS answers 401 to a token it no longer accepts (revoked, or expired
    // earlier than the client thought), and Google's clients then refresh
    // the credentials and send the request again: google-auth-library-python's
    // AuthorizedSession (transport/requests.py) does so on its
    // refresh_status_codes (401) up to max_refresh_attempts times (2 by
    // default). StorageKit refreshes once per call (issue 20: "after a 401,
    // once"), so a server that keeps refusing costs two requests.
    @Test func aTokenStorageRefusesIsReplacedOnceAndTheRequestSucceeds() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let (storage, gcs) = try Self.userStorage(server, fixture)
        // user-1 is revoked: refused however often it comes back.
        try await gcs.post("/_faults", json: [
            "status": 401, "path_contains": "/b/\(gcs.bucket)/", "authorization": "Bearer user-1", "count": 100,
        ])
        let stored = try await storage.reference().child("a.txt").putDataAsync(Data("a".utf8))
        #expect(stored.size == 1)
        let listed = try await storage.reference().listAll()
        #expect(listed.items.map(\.name) == ["a.txt"])
        // The upload refused with user-1, sent again with user-2; the
        // listing keeps user-2 without another fetch.
        #expect(try await Self.bearers(gcs) == ["Bearer user-1", "Bearer user-2", "Bearer user-2"])
        #expect(try await server.count() == 2)
        #expect(try await server.log().map(\.path) == ["/token", "/token"])
    }

    @Test func aServerThatRefusesEveryTokenGivesUnauthenticatedAfterExactlyOneRetry() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let (storage, gcs) = try Self.userStorage(server, fixture)
        try await gcs.post("/_faults", json: ["status": 401, "path_contains": "/b/\(gcs.bucket)/", "count": 100])
        let error = try await #require(throws: StorageError.self) {
            _ = try await storage.reference().child("a.txt").getMetadata()
        }
        guard case .unauthenticated(let message) = error else {
            Issue.record("expected .unauthenticated, got \(error)")
            return
        }
        #expect(message.contains("Invalid Credentials"), "\(message)")
        #expect(!"\(error)".contains("user-"), "no token in the error: \(error)")
        // Exactly two storage requests and two token fetches: one retry.
        #expect(try await Self.bearers(gcs) == ["Bearer user-1", "Bearer user-2"])
        #expect(try await server.count() == 2)

        // The next call starts with the token fetched last (nothing said
        // it was bad before its own 401, as google-auth keeps it too), then
        // one new token, one retry, no more.
        await #expect(throws: StorageError.self) { _ = try await storage.reference().listAll() }
        #expect(try await Self.bearers(gcs) == ["Bearer user-1", "Bearer user-2", "Bearer user-2", "Bearer user-3"])
        #expect(try await server.count() == 3)
    }

    // MARK: before expiry

    /// The server path that issues the token storage sees, and its prefix.
    static func issuer(_ kind: Kind) -> (path: String, prefix: String) {
        switch kind {
        case .serviceAccount: return ("/token", "Bearer tok-")
        case .authorizedUser: return ("/token", "Bearer user-")
        case .externalFile: return ("/sts", "Bearer sts-")
        case .externalURLImpersonated, .impersonatedServiceAccount: return (":generateAccessToken", "Bearer iam-")
        }
    }

    // Google's clients renew a token shortly before it expires rather than
    // after (google-auth-library-python: Credentials.expired with
    // _helpers.REFRESH_THRESHOLD; the Go and Java libraries likewise).
    // Tokens of 8 s here (expires_in, or expireTime with nanoseconds for
    // IAM, as protobuf's Timestamp may be written), asked for every 100 ms
    // with the real clock for at least 20 s and 150 calls.
    //
    // The test process is shared with the mount tests, whose blocking waits
    // can starve the cooperative pool for seconds (a fresh clone's CI run
    // saw a single call in 20 s), so nothing here assumes the calls came on
    // time: a call after a long gap rightly fetches a new token, so "renewed
    // before its predecessor expired" is judged only where consecutive calls
    // came within a second of each other, and at least one renewal must be
    // judged so.
    @Test(arguments: Kind.allCases)
    func eachProviderRenewsItsShortLivedTokenBeforeItExpires(kind: Kind) async throws {
        let lifetime = 8.0
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture, arguments: ["--lifetime", "8", "--expire-time-digits", "9"])
        defer { server.stop() }
        let credentials = try CredentialsFile.load(
            try kind.file(server, fixture, quota: "q"), transport: fixture.transport)
        var calls: [(header: String, end: Date)] = []
        // The clock starts once the first token is there (the server may be
        // slow to answer its first request).
        calls.append((try await credentials.authorizationHeader() ?? "", Date()))
        let started = Date()
        while Date().timeIntervalSince(started) < 20 || calls.count < 150, Date().timeIntervalSince(started) < 120 {
            try await Task.sleep(for: .milliseconds(100))
            let header = try await credentials.authorizationHeader() ?? ""
            calls.append((header, Date()))
        }
        let (path, prefix) = Self.issuer(kind)
        #expect(calls.allSatisfy { $0.header.hasPrefix(prefix) }, "\(calls.map(\.header))")
        var tokens: [String] = []
        for call in calls where tokens.last != call.header { tokens.append(call.header) }
        #expect(Set(tokens).count == tokens.count, "a token came back after its successor: \(tokens)")
        // Renewed, but not at every call.
        #expect(tokens.count >= 2, "\(tokens.count) tokens for \(calls.count) calls: \(tokens)")
        #expect(tokens.count * 3 <= calls.count, "\(tokens.count) tokens for \(calls.count) calls: \(tokens)")
        let fetches = try await server.log().filter { $0.path.hasSuffix(path) }.count
        #expect(fetches == tokens.count, "every token fetched was used, none twice")
        // No call returned a token after it expired (`lifetime` seconds
        // after the server issued it; same machine, same clock), and a
        // successor asked for without a gap was fetched before its
        // predecessor expired.
        let issued = try await server.issued()
        let expiries = try tokens.map { token in
            let issuedAt = try #require(issued[String(token.dropFirst("Bearer ".count))], "\(token) not issued? \(issued)")
            return issuedAt.addingTimeInterval(lifetime)
        }
        var judged = 0
        for (index, token) in tokens.enumerated() {
            let last = try #require(calls.last { $0.header == token })
            #expect(last.end < expiries[index], "\(token) returned \(last.end.timeIntervalSince(expiries[index])) s after it expired")
            guard index > 0, let first = calls.firstIndex(where: { $0.header == token }), first > 0,
                  calls[first].end.timeIntervalSince(calls[first - 1].end) < 1
            else { continue }
            judged += 1
            let renewedAt = expiries[index].addingTimeInterval(-lifetime)
            #expect(renewedAt < expiries[index - 1], "\(token) fetched \(renewedAt.timeIntervalSince(expiries[index - 1])) s after \(tokens[index - 1]) expired")
        }
        #expect(judged >= 1, "no renewal came between calls less than a second apart: \(calls.count) calls")
    }

    // MARK: parsing of the lifetimes

    @Test(arguments: [
        ("2026-11-26T07:00:08Z", 8.0), ("2026-11-26T07:00:08.250Z", 8.25),
        ("2026-11-26T07:00:08.250000Z", 8.25), ("2026-11-26T07:00:08.250000000Z", 8.25),
    ])
    func expireTimeIsReadWithAnyFractionalDigits(expireTime: String, seconds: Double) throws {
        let requested = try #require(ISO8601DateFormatter().date(from: "2026-11-26T07:00:00Z"))
        let body = Data(#"{"accessToken":"iam-1","expireTime":"\#(expireTime)"}"#.utf8)
        let token = try ImpersonatedCredentials.parse(
            HTTPResponse(status: 200, body: body), endpoint: "http://x", requestedAt: requested)
        #expect(token.value == "iam-1")
        #expect(abs(token.expiresAt.timeIntervalSince(requested) - seconds) < 0.001, "\(token.expiresAt)")
        #expect(abs((token.lifetime ?? 0) - seconds) < 0.001)
    }

    @Test func expiresInCountsFromTheRequestAndIsTheTokensLifetime() throws {
        let requested = Date(timeIntervalSince1970: 1_800_000_000)
        let token = try TokenResponse.parse(
            HTTPResponse(status: 200, body: Data(#"{"access_token":"a","expires_in":8,"token_type":"Bearer"}"#.utf8)),
            endpoint: "http://x/token", requestedAt: requested)
        #expect(token.expiresAt == requested.addingTimeInterval(8))
        // Known, so that the cache renews it once a quarter of it remains
        // (not 5 minutes before its end, which an 8 s token always is).
        #expect(token.lifetime == 8)
    }
}
