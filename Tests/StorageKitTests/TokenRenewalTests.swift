import Foundation
import Testing
import TestSupport
import Transport

@testable import StorageKit

/// When access tokens are fetched again: after storage refuses one (401). Against `Tests/Servers/token_server.py` (which
/// counts and logs the tokens it issues) and `fake_gcs.py` (which logs the
/// bearer token of each request and refuses the tokens it is told to).
@Suite struct TokenRenewalTests {
    typealias Kind = ApplicationDefaultCredentialsTests.Kind

    // MARK: after a 401

    /// An `authorized_user` file for `server`, its provider, and a Storage
    /// on fake_gcs.py for a bucket of the test's own.
    static func userStorage(_ server: TokenServer, _ fixture: Fixture) throws -> (Storage, RawGCS) {
        let path = try Kind.authorizedUser.file(server, fixture, quota: "quota-401")
        let credentials = try CredentialsFile.load(path, transport: fixture.transport)
        let bucket = "renew-\(UUID().uuidString.prefix(8).lowercased())"
        let storage = Storage(bucket: bucket, configuration: StorageConfiguration(
            endpoint: try TestEnv.url("BUCKETFS_TEST_FAKE_GCS"), credentials: credentials, transport: TestEnv.transport))
        return (storage, try RawGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket))
    }

    /// The Authorization header of each request fake_gcs.py saw for the bucket.
    static func bearers(_ gcs: RawGCS) async throws -> [String?] {
        try await gcs.requests()
            .filter { ($0["path"] as? String ?? "").contains("/b/\(gcs.bucket)/") }
            .map { $0["authorization"] as? String }
    }

    // GCS answers 401 to a token it no longer accepts (revoked, or expired
    // earlier than the client thought), and Google's clients then fetch a
    // new token and send the request again, once: google-auth-library-python's
    // AuthorizedSession (transport/requests.py, refresh_status_codes = 401,
    // max_refresh_attempts = 2 attempts in all).
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
}
