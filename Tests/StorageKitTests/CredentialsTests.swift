import Foundation
import Synchronization
import Testing
import Transport
import _CryptoExtras

@testable import StorageKit
import TestSupport

/// Credentials against `Tests/Servers/token_server.py`, which verifies the
/// service-account JWT independently (with Python's `cryptography`) and
/// plays the metadata server. Each test starts its own server so that token
/// numbers and counts are deterministic.
@Suite struct CredentialsTests {
    static let email = "tester@bucketfs-test.iam.gserviceaccount.com"
    static let keyID = "test-key-1"

    // MARK: service account

    @Test func serviceAccountTokenIsCachedAndRefreshedBeforeExpiry() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let clock = TestClock()
        let credentials = try ServiceAccountCredentials(
            keyFile: fixture.writeKeyFile(tokenURI: server.tokenURI), transport: fixture.transport, clock: clock.now)

        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")
        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")
        #expect(try await server.count() == 1)

        // 10 minutes left: still good.
        try await server.advance(by: 3000, clock: clock)
        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")
        #expect(try await server.count() == 1)

        // Under 5 minutes left: renewed with a freshly signed JWT.
        try await server.advance(by: 301, clock: clock)
        #expect(try await credentials.authorizationHeader() == "Bearer tok-2")
        #expect(try await credentials.authorizationHeader() == "Bearer tok-2")
        #expect(try await server.count() == 2)
    }

    @Test func concurrentCallersShareOneExchange() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let credentials = try ServiceAccountCredentials(
            keyFile: fixture.writeKeyFile(tokenURI: server.tokenURI), transport: fixture.transport)

        let headers = try await withThrowingTaskGroup(of: String?.self) { group in
            for _ in 0..<16 { group.addTask { try await credentials.authorizationHeader() } }
            return try await group.reduce(into: [String?]()) { $0.append($1) }
        }
        #expect(headers.count == 16)
        #expect(headers.allSatisfy { $0 == "Bearer tok-1" })
        #expect(try await server.count() == 1)
    }

    @Test func invalidateForcesANewExchange() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let credentials = try ServiceAccountCredentials(
            keyFile: fixture.writeKeyFile(tokenURI: server.tokenURI), transport: fixture.transport)

        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")
        await credentials.invalidate()
        #expect(try await credentials.authorizationHeader() == "Bearer tok-2")
        #expect(try await server.count() == 2)
    }

    @Test func wrongKeyIsRefusedWithoutLeakingSecrets() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        // Same account and key id, different RSA key: the signature fails.
        let impostor = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let path = try fixture.writeKeyFile(tokenURI: server.tokenURI, key: impostor, name: "impostor.json")
        let credentials = try ServiceAccountCredentials(keyFile: path, transport: fixture.transport)

        let error = try await #require(throws: CredentialsError.self) { try await credentials.authorizationHeader() }
        guard case .refused(let status, let message) = error else {
            Issue.record("expected .refused, got \(error)")
            return
        }
        #expect(status == 400)
        #expect(message.contains("invalid_grant"))
        #expect(message.contains("Invalid JWT Signature"))
        #expect(try await server.count() == 0)
        let text = "\(error) \(String(reflecting: error)) \(credentials) \(credentials.key)"
        #expect(!text.contains(Fixture.pemBody(impostor.pkcs8PEMRepresentation)))
        #expect(!text.contains("eyJ"), "no JWT (base64 of '{\"') in messages")
    }

    @Test func claimsAreCheckedByTheServer() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let path = try fixture.writeKeyFile(tokenURI: server.tokenURI)

        // A scope the server does not expect.
        let readOnly = try ServiceAccountCredentials(
            keyFile: path, scope: "https://www.googleapis.com/auth/devstorage.read_only", transport: fixture.transport)
        let scopeError = try await #require(throws: CredentialsError.self) { try await readOnly.authorizationHeader() }
        #expect(scopeError.description.contains("scope must be"))

        // A clock an hour off: iat outside the server's skew allowance.
        let skewed = try ServiceAccountCredentials(
            keyFile: path, transport: fixture.transport, clock: { Date().addingTimeInterval(-3600) })
        let skewError = try await #require(throws: CredentialsError.self) { try await skewed.authorizationHeader() }
        #expect(skewError.description.contains("iat is"))
        #expect(try await server.count() == 0)
    }

    @Test func unreachableTokenEndpointRethrowsTheTransportError() async throws {
        let fixture = try Fixture()
        let credentials = try ServiceAccountCredentials(
            keyFile: fixture.writeKeyFile(tokenURI: "http://127.0.0.1:\(try freePort())/token"),
            transport: fixture.transport)
        await #expect(throws: TransportError.self) { try await credentials.authorizationHeader() }
    }

    @Test func keyFileErrorsNameTheFileButNotTheKey() throws {
        let fixture = try Fixture()
        let missing = fixture.directory.appendingPathComponent("missing.json").path
        #expect(throws: CredentialsError.unreadableFile(path: missing, reason: "No such file or directory")) {
            try ServiceAccountCredentials(keyFile: missing)
        }

        func invalid(_ object: [String: Any], _ name: String) throws -> CredentialsError? {
            let path = fixture.directory.appendingPathComponent(name).path
            try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
            do {
                _ = try ServiceAccountKey(contentsOfFile: path)
                return nil
            } catch {
                #expect(error.description.contains(path))
                return error
            }
        }
        var good = fixture.keyJSON(tokenURI: "http://127.0.0.1:1/token", key: fixture.key)
        good["client_email"] = nil
        #expect(try invalid(good, "no-email.json")?.description.contains("missing client_email") == true)

        let user: [String: Any] = ["type": "authorized_user", "client_id": "x", "refresh_token": "secret-refresh"]
        let userError = try invalid(user, "user.json")
        #expect(userError?.description.contains("authorized_user") == true)
        #expect(userError?.description.contains("secret-refresh") == false)

        var garbled = fixture.keyJSON(tokenURI: "http://127.0.0.1:1/token", key: fixture.key)
        garbled["private_key"] = "-----BEGIN PRIVATE KEY-----\nTOPSECRETKEYMATERIAL\n-----END PRIVATE KEY-----\n"
        let garbledError = try invalid(garbled, "garbled.json")
        #expect(garbledError?.description.contains("private_key") == true)
        #expect(garbledError?.description.contains("TOPSECRET") == false)

        let notJSONPath = fixture.directory.appendingPathComponent("text.json").path
        try Data("private_key: TOPSECRET".utf8).write(to: URL(fileURLWithPath: notJSONPath))
        let notJSON = try #require(throws: CredentialsError.self) { try ServiceAccountKey(contentsOfFile: notJSONPath) }
        #expect(notJSON == .invalidKeyFile(path: notJSONPath, reason: "not a JSON object"))

        // The parsed key never prints its private part.
        let key = try ServiceAccountKey(contentsOfFile: fixture.writeKeyFile(tokenURI: "http://127.0.0.1:1/token"))
        var dumped = ""
        dump(key, to: &dumped)
        for text in ["\(key)", String(reflecting: key), dumped] {
            #expect(text.contains(Self.email))
            #expect(!text.contains(Fixture.pemBody(fixture.key.pkcs8PEMRepresentation)))
        }
    }

    // MARK: metadata server

    @Test func metadataServerTokenWithTheFlavorHeader() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let clock = TestClock()
        let credentials = MetadataServerCredentials(
            host: "127.0.0.1:\(server.port)", environment: [:], transport: fixture.transport, clock: clock.now)
        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")
        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")
        #expect(try await server.count() == 1)
        clock.advance(by: 3301)
        #expect(try await credentials.authorizationHeader() == "Bearer tok-2")

        // The host also comes from GCE_METADATA_HOST.
        let fromEnvironment = MetadataServerCredentials(
            environment: ["GCE_METADATA_HOST": "http://127.0.0.1:\(server.port)/"], transport: fixture.transport)
        #expect(fromEnvironment.host == "127.0.0.1:\(server.port)")
        #expect(try await fromEnvironment.authorizationHeader() == "Bearer tok-3")
        #expect(MetadataServerCredentials(environment: [:]).host == "169.254.169.254")

        // The server insists on the header (so the credentials did send it).
        let bare = try await fixture.transport.send(HTTPRequest(
            method: .get, url: "\(server.base)/computeMetadata/v1/instance/service-accounts/default/token",
            isIdempotent: true))
        #expect(bare.status == 403)
        #expect(try await server.count() == 3)
    }

    @Test func metadataServerFailuresAreClear() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let credentials = MetadataServerCredentials(
            host: "127.0.0.1:\(server.port)", environment: [:], transport: fixture.transport)
        #expect(try await credentials.authorizationHeader() == "Bearer tok-1")

        // No service account on the "VM": a refusal naming the reason,
        // without the token handed out before.
        try await server.failNextMetadataRequest(status: 404)
        await credentials.invalidate()
        let error = try await #require(throws: CredentialsError.self) { try await credentials.authorizationHeader() }
        #expect(error == .refused(status: 404, message: "not_found: no service account for this instance"))
        #expect(!"\(error)".contains("tok-1"))
        #expect(!String(reflecting: error).contains("tok-1"))

        // The failure is not cached.
        #expect(try await credentials.authorizationHeader() == "Bearer tok-2")

        let nowhere = MetadataServerCredentials(
            host: "127.0.0.1:\(try freePort())", environment: [:], transport: fixture.transport)
        await #expect(throws: TransportError.self) { try await nowhere.authorizationHeader() }
    }

    // MARK: static tokens

    @Test func tokenFileIsReReadWhenItChanges() async throws {
        let fixture = try Fixture()
        let path = fixture.directory.appendingPathComponent("token").path
        try write("first-token\n", to: path, modified: Date(timeIntervalSinceNow: -60))
        let credentials = StaticTokenCredentials(tokenFile: path)
        #expect(try await credentials.authorizationHeader() == "Bearer first-token")

        // Same length, new mtime: only the mtime tells them apart.
        try write("other-token \n", to: path, modified: Date())
        #expect(try await credentials.authorizationHeader() == "Bearer other-token")

        // Replaced by rename, as refreshers writing atomically do.
        let staged = fixture.directory.appendingPathComponent("token.new").path
        try write("\trenamed-token\r\n", to: staged, modified: Date())
        #expect(rename(staged, path) == 0)
        #expect(try await credentials.authorizationHeader() == "Bearer renamed-token")

        try write("  \n", to: path, modified: Date(timeIntervalSinceNow: 10))
        await #expect(throws: CredentialsError.emptyToken(source: "token file \(path)")) {
            try await credentials.authorizationHeader()
        }
        try FileManager.default.removeItem(atPath: path)
        await #expect(throws: CredentialsError.unreadableFile(path: path, reason: "No such file or directory")) {
            try await credentials.authorizationHeader()
        }
    }

    @Test func fixedAndEnvironmentTokens() async throws {
        #expect(try await StaticTokenCredentials(token: " abc \n").authorizationHeader() == "Bearer abc")
        let fromEnvironment = StaticTokenCredentials(
            environmentVariable: "MY_TOKEN", environment: ["MY_TOKEN": "env-token\n"])
        #expect(try await fromEnvironment.authorizationHeader() == "Bearer env-token")
        let unset = StaticTokenCredentials(environmentVariable: "MY_TOKEN", environment: [:])
        await #expect(throws: CredentialsError.missingEnvironmentVariable("MY_TOKEN")) {
            try await unset.authorizationHeader()
        }
        #expect(try await AnonymousCredentials().authorizationHeader() == nil)
    }

    @Test func staticTokensNeverShowInDescriptions() async throws {
        let secret = "ya29.super-secret-token"
        let credentials = StaticTokenCredentials(token: secret)
        var dumped = ""
        dump(credentials, to: &dumped)
        for text in ["\(credentials)", String(reflecting: credentials), dumped] {
            #expect(!text.contains(secret), "\(text)")
        }
        let environment = StaticTokenCredentials(environmentVariable: "T", environment: ["T": secret])
        #expect(!"\(environment)".contains(secret))
        #expect("\(environment)".contains("environment variable T"))
    }

    @Test func tokenEndpointErrorMessagesAreRedacted() {
        let assertion = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJ4In0.c2lnbmF0dXJl"
        let body = Data(#"{"error":"invalid_grant","error_description":"bad assertion \#(assertion)"}"#.utf8)
        let error = #expect(throws: CredentialsError.self) {
            try TokenResponse.parse(
                HTTPResponse(status: 400, body: body), endpoint: "http://x/token",
                requestedAt: Date(), redacting: [assertion])
        }
        #expect(error?.description.contains(assertion) == false)
        #expect(error?.description.contains("invalid_grant: bad assertion <redacted>") == true)

        // A success without a token is not mistaken for one.
        #expect(throws: CredentialsError.self) {
            try TokenResponse.parse(
                HTTPResponse(status: 200, body: Data(#"{"expires_in":3600}"#.utf8)),
                endpoint: "http://x/token", requestedAt: Date())
        }
    }

    // MARK: factory

    @Test func credentialsFromEnvironment() throws {
        let fixture = try Fixture()
        let path = try fixture.writeKeyFile(tokenURI: "http://127.0.0.1:1/token")
        let account = try Credentials.fromEnvironment(["GOOGLE_APPLICATION_CREDENTIALS": path])
        #expect((account as? ServiceAccountCredentials)?.key.clientEmail == Self.email)
        let metadata = try Credentials.fromEnvironment(["GCE_METADATA_HOST": "127.0.0.1:1"])
        #expect((metadata as? MetadataServerCredentials)?.host == "127.0.0.1:1")
        #expect(throws: CredentialsError.self) {
            try Credentials.fromEnvironment(["GOOGLE_APPLICATION_CREDENTIALS": path + ".missing"])
        }
    }

    // MARK: helpers

    private func write(_ text: String, to path: String, modified: Date) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        try FileManager.default.setAttributes([.modificationDate: modified], ofItemAtPath: path)
    }
}

/// A freshly generated service account in a temporary directory, removed
/// when the test is done with it.
final class Fixture {
    let directory: URL
    let key: _RSA.Signing.PrivateKey
    /// No retries, so that failure tests are quick.
    let transport = HTTPTransport(configuration: TransportConfiguration(retry: .none))

    /// Generated once per run and shared: RSA key generation is slow in a
    /// debug build, and every test may use the same account.
    private static let accountKey = Result { try _RSA.Signing.PrivateKey(keySize: .bits2048) }

    init() throws {
        directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("credentials-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        key = try Self.accountKey.get()
        try Data(key.publicKey.pemRepresentation.utf8).write(to: publicKeyURL)
    }

    deinit { try? FileManager.default.removeItem(at: directory) }

    var publicKeyURL: URL { directory.appendingPathComponent("public.pem") }

    func keyJSON(tokenURI: String, key: _RSA.Signing.PrivateKey) -> [String: Any] {
        [
            "type": "service_account",
            "project_id": "bucketfs-test",
            "private_key_id": CredentialsTests.keyID,
            "private_key": key.pkcs8PEMRepresentation,
            "client_email": CredentialsTests.email,
            "client_id": "1234567890",
            "token_uri": tokenURI,
        ]
    }

    /// Writes a key file for `key` (the account's own by default).
    func writeKeyFile(tokenURI: String, key: _RSA.Signing.PrivateKey? = nil, name: String = "key.json") throws -> String {
        let url = directory.appendingPathComponent(name)
        try JSONSerialization.data(withJSONObject: keyJSON(tokenURI: tokenURI, key: key ?? self.key)).write(to: url)
        return url.path
    }

    /// The base64 body of a PEM, the part that must never be printed.
    static func pemBody(_ pem: String) -> String {
        pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
    }
}

/// A clock the tests move by hand.
final class TestClock: Sendable {
    private let time = Mutex(Date())
    var now: @Sendable () -> Date { { [self] in time.withLock { $0 } } }
    func advance(by seconds: TimeInterval) { time.withLock { $0.addTimeInterval(seconds) } }
}

/// token_server.py as a child process.
final class TokenServer: Sendable {
    struct NotStarted: Error, CustomStringConvertible {
        let description: String
    }

    let process: Process
    /// The server's stdin: it exits when this closes, even if we crash.
    let input: Pipe
    let port: Int
    let transport: HTTPTransport

    private init(process: Process, input: Pipe, port: Int, transport: HTTPTransport) {
        self.process = process
        self.input = input
        self.port = port
        self.transport = transport
    }

    var base: String { "http://127.0.0.1:\(port)" }
    var tokenURI: String { "\(base)/token" }

    /// Starts the server for `fixture`'s account, with `extra` options
    /// (`--lifetime 8`, …). The Python comes from
    /// BUCKETFS_TEST_PYTHON (the test venv, which has `cryptography`); a
    /// missing one is a failure with instructions, never a skip.
    static func start(_ fixture: Fixture, arguments extra: [String] = []) throws -> TokenServer {
        guard let python = ProcessInfo.processInfo.environment["BUCKETFS_TEST_PYTHON"], !python.isEmpty else {
            throw NotStarted(description: "BUCKETFS_TEST_PYTHON is not set: run scripts/test.sh")
        }
        let script = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Servers/token_server.py")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            script.path, "--port", "0", "--public-key", fixture.publicKeyURL.path,
            "--kid", CredentialsTests.keyID, "--issuer", CredentialsTests.email,
        ] + extra
        let output = Pipe()
        let input = Pipe()
        process.standardOutput = output
        process.standardInput = input
        try process.run()
        // The first line is "READY <port>"; EOF first means it died (its
        // stderr, inherited, says why).
        var line = Data()
        while !line.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line.append(chunk)
        }
        let words = String(decoding: line, as: UTF8.self).split(whereSeparator: \.isWhitespace)
        guard words.count == 2, words[0] == "READY", let port = Int(words[1]) else {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw NotStarted(description: "token_server.py did not start (\(python)): \(String(decoding: line, as: UTF8.self))")
        }
        return TokenServer(process: process, input: input, port: port, transport: fixture.transport)
    }

    /// SIGTERM (the server unblocks it, see token_server.py), then SIGKILL
    /// if it is still there after two seconds, so a test never hangs here.
    func stop() {
        try? input.fileHandleForWriting.close()
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(2)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    func count() async throws -> Int {
        let response = try await transport.send(HTTPRequest(method: .get, url: "\(base)/_count", isIdempotent: true))
        let json = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
        return try #require(json?["count"] as? Int)
    }

    /// Moves both the server's clock and the client's injected clock.
    func advance(by seconds: Int, clock: TestClock) async throws {
        try await control("/_advance?seconds=\(seconds)")
        clock.advance(by: TimeInterval(seconds))
    }

    /// The token requests seen: path and Authorization header.
    func log() async throws -> [(path: String, authorization: String?)] {
        let response = try await transport.send(HTTPRequest(method: .get, url: "\(base)/_log", isIdempotent: true))
        let entries = try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]] ?? []
        return entries.map { ($0["path"] as? String ?? "", $0["authorization"] as? String) }
    }

    /// When each token was issued, by the server's clock (token_server.py's `/_issued`).
    func issued() async throws -> [String: Date] {
        let response = try await transport.send(HTTPRequest(method: .get, url: "\(base)/_issued", isIdempotent: true))
        let times = try JSONSerialization.jsonObject(with: response.body) as? [String: Double] ?? [:]
        return times.mapValues { Date(timeIntervalSince1970: $0) }
    }

    func failNextMetadataRequest(status: Int) async throws {
        try await control("/_metadata_fail?status=\(status)")
    }

    private func control(_ path: String) async throws {
        let response = try await transport.send(HTTPRequest(method: .post, url: base + path, isIdempotent: false))
        guard response.isSuccess else { throw NotStarted(description: "\(path) answered \(response.status)") }
    }
}
