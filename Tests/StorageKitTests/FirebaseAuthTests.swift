import Foundation
import Testing
@testable import StorageKit

/// Firebase Auth credentials and Security Rules, against the loopback
/// Firebase server (Auth emulator endpoints, Storage v0 with the rules
/// `users/{uid}/**` for that user, `public/**` readable by all).
@Suite struct FirebaseAuthTests {
    let server: FirebaseServer

    init() throws {
        server = try FirebaseServer()
    }

    /// Writes one object as `credentials` in that user's folder and reads
    /// it back through the admin view; returns the uid the server saw.
    func roundTrip(_ credentials: FirebaseAuthCredentials) async throws -> String {
        _ = try await credentials.idToken()
        let uid = try #require(credentials.currentUser?.uid)
        let storage = try server.storage(credentials)
        let ref = storage.reference().child("users/\(uid)/hello.txt")
        _ = try await ref.putDataAsync(Data("hi \(uid)".utf8))
        #expect(try await server.raw.media(ref.fullPath) == Data("hi \(uid)".utf8))
        #expect(try await ref.data(maxSize: 100) == Data("hi \(uid)".utf8))
        return uid
    }

    @Test func signInWithEmailAndPassword() async throws {
        let (user, account) = try await server.newUser()
        #expect(user.currentUser == nil, "no sign-in before the first request")
        #expect(try await roundTrip(user) == account.uid)
        #expect(user.currentUser == .init(uid: account.uid, email: account.email))
        #expect(user.dialect == .firebase)
    }

    @Test func signInWithACustomToken() async throws {
        let uid = "custom-\(UUID().uuidString.prefix(8))"
        let now = Int(Date().timeIntervalSince1970)
        let token = FixedFirebaseToken.unsignedJWT([
            "uid": uid, "iat": now, "exp": now + 3600,
            "aud": "https://identitytoolkit.googleapis.com/google.identity.identitytoolkit.v1.IdentityToolkit",
        ])
        let user = FirebaseAuthCredentials(auth: server.auth(), signIn: .customToken(token))
        #expect(try await roundTrip(user) == uid)
        let expired = FixedFirebaseToken.unsignedJWT(["uid": uid, "iat": now - 7200, "exp": now - 3600])
        let late = FirebaseAuthCredentials(auth: server.auth(), signIn: .customToken(expired))
        await #expect(throws: CredentialsError.self) { _ = try await late.idToken() }
    }

    @Test func signInAnonymouslyReachesPublicAndItsOwnFolder() async throws {
        let user = FirebaseAuthCredentials(auth: server.auth(), signIn: .anonymous)
        let uid = try await roundTrip(user)
        #expect(!uid.isEmpty)
        let storage = try server.storage(user)
        _ = try await storage.reference().child("public/anon-\(uid).txt").putDataAsync(Data("p".utf8))
        // The same user across calls: one sign-up, then refreshes.
        _ = try await user.idToken(forcingRefresh: true)
        #expect(user.currentUser?.uid == uid)
    }

    @Test func signInFromARefreshToken() async throws {
        let account = try await server.newAccount()
        let user = FirebaseAuthCredentials(auth: server.auth(), signIn: .refreshToken(account.refreshToken))
        #expect(try await roundTrip(user) == account.uid)
        #expect(user.refreshToken == account.refreshToken)
    }

    @Test func idTokensAreRefreshedAcrossExpiry() async throws {
        let (user, account) = try await server.newUser()
        // 8 s tokens are renewed 2 s before they expire (a quarter of their
        // lifetime): a margin that a loaded machine does not eat (3 s tokens,
        // renewed 0.75 s early, saw half their requests refused at a load
        // average of 16).
        try await server.setTokenLifetime(8, uid: account.uid)
        let storage = try server.storage(user)
        let ref = storage.reference().child("users/\(account.uid)/refreshed.txt")
        _ = try await ref.putDataAsync(Data("r".utf8))
        var tokens: Set<String> = []
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(20) {
            tokens.insert(try await user.idToken())
            #expect(try await ref.getMetadata().size == 1)
            try await Task.sleep(for: .milliseconds(250))
        }
        #expect(tokens.count >= 3, "an 8 s token is renewed during 20 s of use, got \(tokens.count) tokens")
        let refreshes = try await server.allRequests().filter { $0.path == "/securetoken.googleapis.com/v1/token" }
        #expect(refreshes.count >= 2)
        // A token renewed in time is never refused; under heavy load a
        // request may still reach the server after its token expired: it
        // must then be repeated at once with a fresh token (401, refresh, retry).
        let seen = try await server.requests().filter { ($0["path"] as? String ?? "").contains(account.uid) }
        for (index, request) in seen.enumerated() where request["auth"] as? String != "uid:\(account.uid)" {
            #expect(request["auth"] as? String == "invalid")
            let retry = seen.dropFirst(index + 1).first { $0["path"] as? String == request["path"] as? String }
            #expect(retry?["auth"] as? String == "uid:\(account.uid)", "a refused request is retried with a fresh token")
        }
        let refused = seen.filter { $0["auth"] as? String == "invalid" }.count
        #expect(refused * 4 <= seen.count, "tokens are renewed before they expire: \(refused) of \(seen.count) refused")
    }

    @Test func anExpiredTokenIsUnauthenticatedWithTheServersMessage() async throws {
        let account = try await server.newAccount()
        let storage = try server.storage(FixedFirebaseToken.expired(uid: account.uid))
        do {
            _ = try await storage.reference().child("users/\(account.uid)/x").getMetadata()
            Issue.record("an expired token must be refused")
        } catch StorageError.unauthenticated(let message) {
            #expect(message.contains("expired"))
            #expect(StorageError.unauthenticated(message).code == .unauthenticated)
        }
    }

    @Test func rulesDenialsAreUnauthorizedWithTheServersMessage() async throws {
        let (a, accountA) = try await server.newUser()
        let accountB = try await server.newAccount()
        try await server.raw.put("users/\(accountB.uid)/secret.txt", Data("b's".utf8))
        let storage = try server.storage(a)
        let foreign = storage.reference().child("users/\(accountB.uid)/secret.txt")
        func expectDenied(_ word: String, _ body: () async throws -> Void) async {
            do {
                try await body()
                Issue.record("user A must not \(word) in B's folder")
            } catch StorageError.unauthorized(let message) {
                #expect(message.contains("Permission denied. No \(word) permission."), "\(message)")
            } catch {
                Issue.record("expected unauthorized, got \(error)")
            }
        }
        await expectDenied("READ") { _ = try await foreign.data(maxSize: 100) }
        await expectDenied("READ") { _ = try await foreign.getMetadata() }
        await expectDenied("WRITE") { _ = try await foreign.putDataAsync(Data("a's".utf8)) }
        await expectDenied("WRITE") { try await foreign.delete() }
        await expectDenied("LIST") { _ = try await foreign.parent()!.list(maxResults: 10) }
        await expectDenied("LIST") { _ = try await storage.reference().list(maxResults: 10) }
        #expect(try await server.raw.media("users/\(accountB.uid)/secret.txt") == Data("b's".utf8), "nothing changed")
        // public/: readable by all, writable by signed-in users.
        try await server.raw.put("public/notice.txt", Data("hello all".utf8))
        #expect(try await storage.reference().child("public/notice.txt").data(maxSize: 100) == Data("hello all".utf8))
        _ = try await storage.reference().child("public/by-\(accountA.uid)").putDataAsync(Data("a".utf8))
        let nobody = try server.storage(NoFirebaseToken())
        #expect(try await nobody.reference().child("public/notice.txt").data(maxSize: 100) == Data("hello all".utf8))
        do {
            _ = try await nobody.reference().child("public/anonymous-write").putDataAsync(Data("x".utf8))
            Issue.record("public/ is not writable without signing in")
        } catch StorageError.unauthorized {}
    }

    @Test func wrongPasswordAndWrongAPIKeyAreRefusedWithoutSecrets() async throws {
        let account = try await server.newAccount()
        let wrong = FirebaseAuthCredentials(auth: server.auth(), signIn: .emailPassword(email: account.email, password: "not-\(account.password)"))
        do {
            _ = try await wrong.idToken()
            Issue.record("a wrong password must be refused")
        } catch let error as CredentialsError {
            guard case .refused(let status, let message) = error else { Issue.record("\(error)"); return }
            #expect(status == 400 && message.contains("INVALID_PASSWORD"))
            #expect(!"\(error)".contains(account.password))
        }
        // Through a storage call: unauthenticated, still without secrets.
        do {
            _ = try await server.storage(wrong).reference().child("users/\(account.uid)/x").getMetadata()
            Issue.record("must fail")
        } catch {
            guard case StorageError.unauthenticated(let message) = error else { Issue.record("\(error)"); return }
            #expect(message.contains("INVALID_PASSWORD") && !message.contains(account.password))
        }
        let badKey = "AIzaSyD-not-the-right-key-0123456789abcd"
        let keyed = FirebaseAuthCredentials(auth: server.auth(apiKey: badKey), signIn: .emailPassword(email: account.email, password: account.password))
        do {
            _ = try await keyed.idToken()
            Issue.record("a wrong API key must be refused")
        } catch {
            #expect("\(error)".contains("API key not valid"))
            #expect(!"\(error)".contains(badKey))
        }
    }

    @Test func secretsNeverShowInDescriptions() async throws {
        let account = try await server.newAccount()
        let auth = server.auth(apiKey: FirebaseServer.apiKey)
        let methods: [FirebaseAuthCredentials.SignIn] = [
            .emailPassword(email: account.email, password: account.password), .refreshToken(account.refreshToken),
            .customToken("eyJhbGciOiJub25lIn0.eyJ1aWQiOiJ4In0."), .anonymous,
        ]
        for method in methods {
            let credentials = FirebaseAuthCredentials(auth: auth, signIn: method)
            _ = try? await credentials.idToken()
            var dumped = ""
            dump(credentials, to: &dumped)
            for text in ["\(credentials)", String(reflecting: credentials), dumped, "\(auth)", String(reflecting: auth)] {
                for secret in [account.password, account.refreshToken, FirebaseServer.apiKey, "eyJ"] {
                    #expect(!text.contains(secret), "\(text) shows a secret")
                }
            }
        }
        let redacted = StorageError.redact("Authorization: Firebase eyJhbGciOi.eyJ1aWQi.sig and ?key=AIzaSyD-0123456789012345678901234567890123")
        #expect(!redacted.contains("eyJ") && !redacted.contains("AIza"))
    }

    @Test func configurationFromTheEnvironment() async throws {
        let account = try await server.newAccount()
        let json = #"{"apiKey": "\#(FirebaseServer.apiKey)", "projectId": "\#(FirebaseServer.project)"}"#
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("firebase-config-\(UUID().uuidString).json")
        try Data(json.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        for config in [json, file.path] {
            let auth = try FirebaseAuth.fromEnvironment(
                environment: ["FIREBASE_CONFIG": config, "FIREBASE_AUTH_EMULATOR_HOST": server.host], transport: TestEnv.transport)
            let user = FirebaseAuthCredentials(auth: auth, signIn: .emailPassword(email: account.email, password: account.password))
            #expect(try await roundTrip(user) == account.uid)
        }
        #expect(throws: CredentialsError.self) { _ = try FirebaseAuth.fromEnvironment(environment: [:]) }
        let explicit = try FirebaseAuth.fromEnvironment(apiKey: "k", environment: [:])
        #expect(explicit.identityToolkitBase == "https://identitytoolkit.googleapis.com")

        // The storage endpoint follows the credentials' dialect.
        var configuration = StorageConfiguration.fromEnvironment([
            "FIREBASE_STORAGE_EMULATOR_HOST": server.host, "STORAGE_EMULATOR_HOST": "127.0.0.1:1",
        ])
        #expect(configuration.endpoint.absoluteString == "http://127.0.0.1:1")
        configuration.credentials = FirebaseAuthCredentials(auth: server.auth(), signIn: .emailPassword(email: account.email, password: account.password))
        #expect(configuration.endpoint.absoluteString == "http://\(server.host)")
        configuration.transport = TestEnv.transport
        let storage = Storage(bucket: server.bucket, configuration: configuration)
        _ = try await storage.reference().child("users/\(account.uid)/env.txt").putDataAsync(Data("e".utf8))
        #expect(StorageConfiguration(credentials: configuration.credentials).endpoint.absoluteString == "https://firebasestorage.googleapis.com")
        #expect(StorageConfiguration().endpoint.absoluteString == "https://storage.googleapis.com")
        // useEmulator keeps a Firebase user signed in (and speaking v0).
        storage.useEmulator(withHost: "127.0.0.1", port: Int(server.host.split(separator: ":").last!)!)
        #expect(storage.configuration.dialect == .firebase)
        #expect(try await storage.reference().child("users/\(account.uid)/env.txt").data(maxSize: 10) == Data("e".utf8))
    }
}

/// Firebase's dialect without any token: the rules see no auth.
struct NoFirebaseToken: CredentialsProvider {
    var dialect: StorageDialect { .firebase }
    func authorizationHeader() async throws -> String? { nil }
}
