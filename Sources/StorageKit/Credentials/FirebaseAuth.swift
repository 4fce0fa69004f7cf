import Foundation
import Transport

/// Firebase Auth's REST API, as the Firebase SDKs call it: Identity
/// Toolkit (`accounts:signUp`, `accounts:signInWithPassword`,
/// `accounts:signInWithCustomToken`) and Secure Token (`/v1/token`, which
/// turns a refresh token into a fresh ID token). Every call carries the
/// project's API key (`?key=`, as the SDKs send it).
///
/// The Auth emulator is used when `FIREBASE_AUTH_EMULATOR_HOST` names it
/// (`fromEnvironment`) or after `useEmulator(withHost:port:)`: the same
/// paths below `http://HOST:PORT/identitytoolkit.googleapis.com/` and
/// `…/securetoken.googleapis.com/`.
///
/// The API key, passwords and tokens never appear in `description`, in
/// reflection, or in an error: errors carry the service's error code
/// (`INVALID_PASSWORD`, `TOKEN_EXPIRED`, …) and the endpoint's path.
public struct FirebaseAuth: Sendable, CustomStringConvertible, CustomReflectable {
    public static let identityToolkitHost = "identitytoolkit.googleapis.com"
    public static let secureTokenHost = "securetoken.googleapis.com"

    private let apiKey: String
    /// `https://identitytoolkit.googleapis.com` or `http://HOST:PORT/identitytoolkit.googleapis.com`.
    public private(set) var identityToolkitBase: String
    public private(set) var secureTokenBase: String
    public let transport: HTTPTransport

    public init(apiKey: String, emulatorHost: String? = nil, transport: HTTPTransport = .shared) {
        self.apiKey = apiKey
        self.transport = transport
        identityToolkitBase = "https://\(Self.identityToolkitHost)"
        secureTokenBase = "https://\(Self.secureTokenHost)"
        if let emulatorHost, !emulatorHost.isEmpty { point(atEmulator: emulatorHost) }
    }

    /// The API key given, else `apiKey` of `FIREBASE_CONFIG` (the app's
    /// Firebase configuration: its JSON, or the path of a file holding
    /// it); the Auth emulator of `FIREBASE_AUTH_EMULATOR_HOST` when set.
    public static func fromEnvironment(
        apiKey: String? = nil,
        environment: [String: String] = ProcessInfo.processInfo.environment,
        transport: HTTPTransport = .shared
    ) throws(CredentialsError) -> FirebaseAuth {
        var key = apiKey
        if key == nil {
            do {
                key = try FirebaseConfig.fromEnvironment(environment)?.apiKey
            } catch {
                throw .missingConfiguration("\(error)")
            }
        }
        guard let key, !key.isEmpty else {
            throw .missingConfiguration("no Firebase API key: give one, or set FIREBASE_CONFIG to the app's configuration with its apiKey")
        }
        return FirebaseAuth(apiKey: key, emulatorHost: environment["FIREBASE_AUTH_EMULATOR_HOST"], transport: transport)
    }

    /// Sends every call to the Auth emulator on `host:port`.
    public mutating func useEmulator(withHost host: String, port: Int) {
        point(atEmulator: "\(host):\(port)")
    }

    private mutating func point(atEmulator host: String) {
        let base = StorageConfiguration.emulatorURL(host)?.absoluteString ?? "http://\(host)"
        identityToolkitBase = "\(base)/\(Self.identityToolkitHost)"
        secureTokenBase = "\(base)/\(Self.secureTokenHost)"
    }

    public var description: String { "FirebaseAuth(\(identityToolkitBase))" }
    public var customMirror: Mirror { Mirror(self, children: ["identityToolkit": identityToolkitBase]) }

    // MARK: the calls

    /// `accounts:signInWithPassword`.
    func signIn(email: String, password: String) async throws -> FirebaseTokenGrant {
        try await identityToolkit("signInWithPassword", ["email": email, "password": password, "returnSecureToken": true],
                                  secrets: [password], idempotent: true)
    }

    /// `accounts:signInWithCustomToken` (a token minted by the app's server
    /// with the Admin SDK).
    func signIn(customToken: String) async throws -> FirebaseTokenGrant {
        try await identityToolkit("signInWithCustomToken", ["token": customToken, "returnSecureToken": true],
                                  secrets: [customToken], idempotent: true)
    }

    /// `accounts:signUp` without credentials: a new anonymous user.
    func signInAnonymously() async throws -> FirebaseTokenGrant {
        // Not idempotent: a repeat would make a second user.
        try await identityToolkit("signUp", ["returnSecureToken": true], secrets: [], idempotent: false)
    }

    /// `accounts:signUp` with an email and a password: a new user.
    func createUser(email: String, password: String) async throws -> FirebaseTokenGrant {
        try await identityToolkit("signUp", ["email": email, "password": password, "returnSecureToken": true],
                                  secrets: [password], idempotent: false)
    }

    /// Secure Token's `grant_type=refresh_token`: a fresh ID token.
    func refresh(_ refreshToken: String) async throws -> FirebaseTokenGrant {
        let endpoint = "\(secureTokenBase)/v1/token"
        let body = "grant_type=refresh_token&refresh_token=" + ServiceAccountCredentials.formEncode(refreshToken)
        let requestedAt = Date()
        let response = try await transport.send(HTTPRequest(
            method: .post, url: endpoint + "?key=" + ServiceAccountCredentials.formEncode(apiKey),
            headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: .bytes(Data(body.utf8)), isIdempotent: true))
        let json = try Self.check(response, endpoint: endpoint, secrets: [refreshToken, apiKey])
        guard let idToken = json["id_token"] as? String, !idToken.isEmpty,
              let uid = json["user_id"] as? String
        else { throw CredentialsError.invalidTokenResponse(endpoint: endpoint, status: response.status, message: "no id_token or user_id in the answer") }
        return try FirebaseTokenGrant(
            idToken: idToken, refreshToken: json["refresh_token"] as? String ?? refreshToken,
            expiresIn: json["expires_in"], uid: uid, email: nil, requestedAt: requestedAt, endpoint: endpoint)
    }

    private func identityToolkit(
        _ method: String, _ fields: [String: Any], secrets: [String], idempotent: Bool
    ) async throws -> FirebaseTokenGrant {
        let endpoint = "\(identityToolkitBase)/v1/accounts:\(method)"
        let body = (try? JSONSerialization.data(withJSONObject: fields)) ?? Data("{}".utf8)
        let requestedAt = Date()
        let response = try await transport.send(HTTPRequest(
            method: .post, url: endpoint + "?key=" + ServiceAccountCredentials.formEncode(apiKey),
            headers: ["Content-Type": "application/json"], body: .bytes(body), isIdempotent: idempotent))
        let json = try Self.check(response, endpoint: endpoint, secrets: secrets + [apiKey])
        guard let idToken = json["idToken"] as? String, !idToken.isEmpty,
              let refreshToken = json["refreshToken"] as? String, let uid = json["localId"] as? String
        else { throw CredentialsError.invalidTokenResponse(endpoint: endpoint, status: response.status, message: "no idToken, refreshToken or localId in the answer") }
        return try FirebaseTokenGrant(
            idToken: idToken, refreshToken: refreshToken, expiresIn: json["expiresIn"], uid: uid,
            email: json["email"] as? String, requestedAt: requestedAt, endpoint: endpoint)
    }

    /// The JSON object of a 2xx answer; a 4xx is `refused` with the
    /// service's error code (`INVALID_PASSWORD`, …), anything else
    /// `invalidTokenResponse`. `secrets` are cut out of any message.
    private static func check(_ response: HTTPResponse, endpoint: String, secrets: [String]) throws(CredentialsError) -> [String: Any] {
        guard response.isSuccess else {
            let message = TokenResponse.errorMessage(response.body, redacting: secrets)
            if (400..<500).contains(response.status) { throw .refused(status: response.status, message: message) }
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: message)
        }
        guard let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
            throw .invalidTokenResponse(endpoint: endpoint, status: response.status, message: "the body is not a JSON object")
        }
        return json
    }
}

/// What a sign-in or a refresh yields.
struct FirebaseTokenGrant: Sendable {
    let idToken: String
    let refreshToken: String
    let uid: String
    let email: String?
    let token: AccessToken

    init(
        idToken: String, refreshToken: String, expiresIn: Any?, uid: String, email: String?,
        requestedAt: Date, endpoint: String
    ) throws(CredentialsError) {
        // Firebase sends expiresIn as a decimal string ("3600").
        let lifetime = (expiresIn as? String).flatMap(Double.init) ?? (expiresIn as? NSNumber)?.doubleValue
        guard let lifetime, lifetime > 0 else {
            throw .invalidTokenResponse(endpoint: endpoint, status: 200, message: "no positive expiresIn in the answer")
        }
        self.idToken = idToken
        self.refreshToken = refreshToken
        self.uid = uid
        self.email = email
        // Counted from when the request was sent, as for OAuth tokens.
        token = AccessToken(value: idToken, expiresAt: requestedAt.addingTimeInterval(lifetime), lifetime: lifetime)
    }
}
