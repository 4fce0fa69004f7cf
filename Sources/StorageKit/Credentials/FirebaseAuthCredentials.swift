import Foundation
import Logging
import Synchronization
import Transport

/// A Firebase Auth user as credentials: requests carry
/// `Authorization: Firebase <ID token>` and speak the Firebase Storage
/// REST API (v0), where the bucket's Security Rules decide what this user
/// may read and write.
///
///     let auth = try FirebaseAuth.fromEnvironment(apiKey: "AIza…")
///     let user = FirebaseAuthCredentials(auth: auth, signIn: .emailPassword(email: "a@example.com", password: pw))
///     let storage = Storage(bucket: "my-app.appspot.com", configuration: StorageConfiguration(credentials: user))
///
/// Sign-in happens at the first request (or `idToken()`), not at init.
/// The ID token (one hour in production) is cached and renewed through
/// Secure Token with the refresh token before it expires (5 minutes
/// before, or a quarter of its lifetime for short-lived tokens), and after
/// a 401. If the refresh token is refused (revoked, user deleted) a user
/// signed in with a password signs in again; the other methods fail with
/// `CredentialsError.refused`.
///
/// Passwords, tokens and the API key never appear in `description`, in
/// reflection or in errors.
public final class FirebaseAuthCredentials: CredentialsProvider, CustomStringConvertible, CustomReflectable {
    /// How the user signs in.
    public enum SignIn: Sendable {
        case emailPassword(email: String, password: String)
        /// A custom token minted by the app's server (Admin SDK).
        case customToken(String)
        /// A new anonymous user (once; later tokens come from its refresh token).
        case anonymous
        /// A refresh token kept from an earlier sign-in.
        case refreshToken(String)

        var label: String {
            switch self {
            case .emailPassword(let email, _): return "email \(email)"
            case .customToken: return "custom token"
            case .anonymous: return "anonymous"
            case .refreshToken: return "refresh token"
            }
        }
    }

    /// Who is signed in, once known.
    public struct User: Sendable, Equatable {
        public let uid: String
        public let email: String?
    }

    public let auth: FirebaseAuth
    private let method: SignIn
    private let session: Session
    private let cache: AccessTokenCache

    public init(
        auth: FirebaseAuth, signIn: SignIn,
        clock: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "bucketfs.credentials")
    ) {
        self.auth = auth
        self.method = signIn
        let session = Session(auth: auth, method: signIn, logger: logger)
        self.session = session
        self.cache = AccessTokenCache(now: clock) { try await session.fetch() }
    }

    public var dialect: StorageDialect { .firebase }

    public func authorizationHeader() async throws -> String? {
        "Firebase " + (try await idToken())
    }

    /// The current ID token, signing in or refreshing as needed (the SDK's
    /// `getIDToken(forcingRefresh:)`).
    public func idToken(forcingRefresh: Bool = false) async throws -> String {
        if forcingRefresh { await cache.invalidate() }
        return try await cache.accessToken()
    }

    /// The signed-in user; nil before the first sign-in.
    public var currentUser: User? { session.user }

    /// The refresh token of the session, for keeping a sign-in across
    /// runs (`SignIn.refreshToken`); nil before the first sign-in. It is a
    /// long-lived secret: store it like a password.
    public var refreshToken: String? { session.currentRefreshToken }

    public func invalidate() async { await cache.invalidate() }

    /// A Firebase user for the default app (`Storage.storage()`), when the
    /// environment names one; nil when it names none:
    /// `STORAGEKIT_FIREBASE_EMAIL` with `STORAGEKIT_FIREBASE_PASSWORD_FILE`,
    /// or `STORAGEKIT_FIREBASE_REFRESH_TOKEN_FILE`, or
    /// `STORAGEKIT_FIREBASE_CUSTOM_TOKEN_FILE` (Firebase has no variables
    /// for a user; these are StorageKit's). The API key and the Auth
    /// emulator come from `FirebaseAuth.fromEnvironment` (`FIREBASE_CONFIG`,
    /// `FIREBASE_AUTH_EMULATOR_HOST`).
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment, transport: HTTPTransport = .shared
    ) throws(CredentialsError) -> FirebaseAuthCredentials? {
        func value(_ name: String) -> String? { environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let signIn: SignIn
        if let email = value("STORAGEKIT_FIREBASE_EMAIL") {
            guard let file = value("STORAGEKIT_FIREBASE_PASSWORD_FILE") else {
                throw .missingConfiguration("STORAGEKIT_FIREBASE_EMAIL needs STORAGEKIT_FIREBASE_PASSWORD_FILE")
            }
            signIn = .emailPassword(email: email, password: try readSecret(fromFile: file, what: "password"))
        } else if let file = value("STORAGEKIT_FIREBASE_REFRESH_TOKEN_FILE") {
            signIn = .refreshToken(try readSecret(fromFile: file, what: "refresh token"))
        } else if let file = value("STORAGEKIT_FIREBASE_CUSTOM_TOKEN_FILE") {
            signIn = .customToken(try readSecret(fromFile: file, what: "custom token"))
        } else {
            return nil
        }
        let auth = try FirebaseAuth.fromEnvironment(environment: environment, transport: transport)
        return FirebaseAuthCredentials(auth: auth, signIn: signIn)
    }

    /// A secret kept in a file (a password, a refresh or custom token):
    /// the file's content without the line break that ends it. Errors name
    /// the file, never its content.
    public static func readSecret(fromFile path: String, what: String) throws(CredentialsError) -> String {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .unreadableFile(path: path, reason: CredentialsError.reason(error))
        }
        var value = String(decoding: data, as: UTF8.self)
        while let last = value.last, last.isNewline { value.removeLast() }
        guard !value.isEmpty else { throw .emptyToken(source: "the \(what) file \(path)") }
        return value
    }

    public var description: String { "FirebaseAuthCredentials(\(method.label), \(auth))" }

    /// The signed-in user once known (after the first token), else how
    /// the sign-in will be made.
    public var identity: String {
        guard let user = session.user else { return "Firebase user (\(method.label), not signed in yet)" }
        return "Firebase user \(user.uid)" + (user.email.map { " (\($0))" } ?? "")
    }
    public var customMirror: Mirror { Mirror(self, children: ["signIn": method.label]) }

    /// The state between sign-ins: the refresh token and who it belongs
    /// to. Fetches are serialised by `AccessTokenCache` (one at a time),
    /// so the lock only guards against readers.
    final class Session: Sendable {
        private struct State {
            var refreshToken: String?
            var user: User?
        }

        private let auth: FirebaseAuth
        private let method: SignIn
        private let logger: Logger
        private let state: Mutex<State>

        init(auth: FirebaseAuth, method: SignIn, logger: Logger) {
            self.auth = auth
            self.method = method
            self.logger = logger
            if case .refreshToken(let token) = method {
                state = Mutex(State(refreshToken: token))
            } else {
                state = Mutex(State())
            }
        }

        var user: User? { state.withLock { $0.user } }
        var currentRefreshToken: String? { state.withLock { $0.refreshToken } }

        /// A fresh ID token: refreshed while a refresh token is held, else
        /// by signing in; a refused refresh falls back to signing in again
        /// when the method allows it.
        func fetch() async throws -> AccessToken {
            if let refresh = currentRefreshToken {
                do {
                    return try adopt(await auth.refresh(refresh), how: "refreshed ID token")
                } catch CredentialsError.refused(let status, let message) where canSignInAgain {
                    logger.info("refresh token refused; signing in again", metadata: ["status": "\(status)", "cause": "\(message)"])
                }
            }
            return try adopt(await signIn(), how: "signed in")
        }

        /// Only a password sign-in can simply be repeated: an anonymous one
        /// would make another user, a custom token has likely expired, and
        /// a refresh token is all there was.
        private var canSignInAgain: Bool {
            if case .emailPassword = method { return true }
            return false
        }

        private func signIn() async throws -> FirebaseTokenGrant {
            switch method {
            case .emailPassword(let email, let password): return try await auth.signIn(email: email, password: password)
            case .customToken(let token): return try await auth.signIn(customToken: token)
            case .anonymous: return try await auth.signInAnonymously()
            case .refreshToken(let token): return try await auth.refresh(token)
            }
        }

        private func adopt(_ grant: FirebaseTokenGrant, how: String) -> AccessToken {
            state.withLock {
                $0.refreshToken = grant.refreshToken
                $0.user = User(uid: grant.uid, email: grant.email ?? $0.user?.email)
            }
            logger.debug("\(how)", metadata: [
                "uid": "\(grant.uid)", "expires_in": "\(Int(grant.token.lifetime ?? 0))",
            ])
            return grant.token
        }
    }
}
