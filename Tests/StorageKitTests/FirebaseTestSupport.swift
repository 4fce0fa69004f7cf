import Foundation
import TestServerClient
import Testing
import Transport
@testable import StorageKit

/// `Tests/Servers/firebase_emulator.py` as `scripts/test.sh` starts it:
/// Firebase Storage v0 with the rules `users/{uid}/**` (that user only),
/// `public/**` (read: all, write: signed in), the Auth emulator's
/// endpoints, and the JSON API without rules (checks go through `raw`).
struct FirebaseServer {
    static let apiKey = "fake-api-key"
    static let project = "demo-bucketfs"

    let base: String
    let bucket: String
    /// The JSON API of the same server, for checks and seeding.
    let raw: DirectGCS

    init(bucket: String = "fb-\(UUID().uuidString.prefix(8).lowercased())") throws {
        let url = try TestEnv.url("BUCKETFS_TEST_FIREBASE").absoluteString
        base = url.hasSuffix("/") ? String(url.dropLast()) : url
        self.bucket = bucket
        raw = try DirectGCS("BUCKETFS_TEST_FIREBASE", bucket: bucket)
    }

    /// `127.0.0.1:PORT`, as FIREBASE_*_EMULATOR_HOST take it.
    var host: String { String(base.dropFirst("http://".count)) }

    func auth(apiKey: String = FirebaseServer.apiKey) -> FirebaseAuth {
        FirebaseAuth(apiKey: apiKey, emulatorHost: host, transport: TestEnv.transport)
    }

    /// A Storage for this server's bucket with `credentials` (Firebase:
    /// v0; anything else: the JSON API of the same server).
    func storage(
        _ credentials: any CredentialsProvider, chunk: Int64 = 16 << 20, threshold: Int64 = 8 << 20
    ) throws -> Storage {
        Storage(bucket: bucket, configuration: StorageConfiguration(
            endpoint: URL(string: base)!, credentials: credentials, transport: TestEnv.transport,
            multipartThreshold: threshold, uploadChunkSize: chunk))
    }

    struct Account {
        let uid: String
        let email: String
        let password: String
        let refreshToken: String
    }

    /// A new email/password user, made with a plain request (not StorageKit).
    func newAccount() async throws -> Account {
        let email = "u\(UUID().uuidString.prefix(12).lowercased())@example.com"
        let password = "pw-\(UUID().uuidString)"
        let json = try await post(
            "/identitytoolkit.googleapis.com/v1/accounts:signUp?key=\(Self.apiKey)",
            ["email": email, "password": password, "returnSecureToken": true])
        return Account(
            uid: try #require(json["localId"] as? String), email: email, password: password,
            refreshToken: try #require(json["refreshToken"] as? String))
    }

    /// Credentials signing in as a new user, and that user.
    func newUser() async throws -> (FirebaseAuthCredentials, Account) {
        let account = try await newAccount()
        return (FirebaseAuthCredentials(auth: auth(), signIn: .emailPassword(email: account.email, password: account.password)), account)
    }

    func setTokenLifetime(_ seconds: Int, uid: String) async throws {
        _ = try await post("/_auth/config", ["tokenLifetime": seconds, "localId": uid])
    }

    /// The v0 requests the server saw (`auth`, `command`, `offset`, …).
    func requests() async throws -> [[String: Any]] { try await ServerRequestLog(base + "/_firebase/requests").entries() }

    /// The server's resumable sessions (either protocol) for objects whose
    /// name starts with `prefix`: name and status (active, final, cancelled).
    func uploadSessions(under prefix: String) async throws -> [(name: String, status: String)] {
        let response = try await TestEnv.transport.send(HTTPRequest(method: .get, url: base + "/_uploads", isIdempotent: true))
        let all = (try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]]) ?? []
        return all.compactMap { session in
            guard session["bucket"] as? String == bucket, let name = session["name"] as? String, name.hasPrefix(prefix) else { return nil }
            return (name, session["status"] as? String ?? "")
        }
    }

    /// fake_gcs.py's log of every request (auth endpoints included).
    func allRequests() async throws -> [LoggedRequest] { try await raw.requests() }

    @discardableResult
    func post(_ path: String, _ json: [String: Any]) async throws -> [String: Any] {
        let response = try await TestEnv.transport.send(HTTPRequest(
            method: .post, url: base + path, headers: ["Content-Type": "application/json"],
            body: .bytes(try JSONSerialization.data(withJSONObject: json)), isIdempotent: false))
        let body = (try? JSONSerialization.jsonObject(with: response.body) as? [String: Any]) ?? [:]
        #expect(response.isSuccess, "POST \(path) answered \(response.status): \(body)")
        return body
    }
}

/// A Firebase-dialect provider that always sends the same ID token (an
/// expired or forged one, for the 401 tests).
struct FixedFirebaseToken: CredentialsProvider {
    let token: String
    var dialect: StorageDialect { .firebase }
    func authorizationHeader() async throws -> String? { "Firebase \(token)" }

    /// An unsigned ID token for `uid` that expired a minute ago.
    static func expired(uid: String) -> FixedFirebaseToken {
        let now = Int(Date().timeIntervalSince1970)
        let claims: [String: Any] = [
            "iss": "https://securetoken.google.com/\(FirebaseServer.project)", "aud": FirebaseServer.project,
            "user_id": uid, "sub": uid, "iat": now - 3660, "exp": now - 60,
        ]
        return FixedFirebaseToken(token: unsignedJWT(claims))
    }

    static func unsignedJWT(_ claims: [String: Any]) -> String {
        let header = ServiceAccountKey.base64URL(Data(#"{"alg":"none","typ":"JWT"}"#.utf8))
        let payload = ServiceAccountKey.base64URL((try? JSONSerialization.data(withJSONObject: claims)) ?? Data())
        return "\(header).\(payload)."
    }
}
