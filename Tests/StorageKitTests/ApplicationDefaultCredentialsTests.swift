import Foundation
import TestServerClient
import Testing
import TestSupport
import Transport

@testable import StorageKit

/// The credential file types and the Application Default Credentials order,
/// against `Tests/Servers/token_server.py` (token endpoint, STS, IAM
/// credentials, metadata server) and, end to end, `fake_gcs.py`, whose
/// request log shows the bearer token and quota project each request had.
@Suite struct ApplicationDefaultCredentialsTests {
    typealias Files = GoogleCredentialFiles
    static let clientSecret = Files.clientSecret
    static let refreshToken = Files.refreshToken
    static let audience = Files.audience
    static let target = Files.target

    // MARK: files of each type

    static func authorizedUser(_ server: TokenServer, refreshToken: String = refreshToken, quota: String? = nil) -> [String: Any] {
        Files.authorizedUser(base: server.base, refreshToken: refreshToken, quota: quota)
    }

    static func externalAccount(
        _ server: TokenServer, source: [String: Any], impersonate: Bool = false, quota: String? = nil
    ) -> [String: Any] {
        Files.externalAccount(base: server.base, source: source, impersonate: impersonate, quota: quota)
    }

    static func write(_ object: [String: Any], _ fixture: Fixture, name: String) throws -> String {
        try Files.write(object, to: fixture.directory.appendingPathComponent(name).path)
    }

    /// Every supported type, with the bearer token storage must see.
    enum Kind: String, CaseIterable, Sendable {
        case serviceAccount, authorizedUser, externalFile, externalURLImpersonated, impersonatedServiceAccount

        func file(_ server: TokenServer, _ fixture: Fixture, quota: String) throws -> String {
            let tests = ApplicationDefaultCredentialsTests.self
            switch self {
            case .serviceAccount:
                var key = fixture.keyJSON(tokenURI: server.tokenURI, key: fixture.key)
                key["quota_project_id"] = quota
                return try tests.write(key, fixture, name: "sa.json")
            case .authorizedUser:
                return try tests.write(tests.authorizedUser(server, quota: quota), fixture, name: "user.json")
            case .externalFile:
                let source = try GoogleCredentialFiles.fileSource(in: fixture.directory.path)
                return try tests.write(
                    tests.externalAccount(server, source: source, quota: quota), fixture, name: "ext.json")
            case .externalURLImpersonated:
                let source = GoogleCredentialFiles.urlSource(base: server.base)
                return try tests.write(
                    tests.externalAccount(server, source: source, impersonate: true, quota: quota), fixture, name: "ext-url.json")
            case .impersonatedServiceAccount:
                return try tests.write(
                    GoogleCredentialFiles.impersonatedServiceAccount(base: server.base, quota: quota), fixture, name: "imp.json")
            }
        }

        /// The token storage sees (the server numbers tokens in issue order).
        var bearer: String {
            let target = ApplicationDefaultCredentialsTests.target
            switch self {
            case .serviceAccount: return "Bearer tok-1"
            case .authorizedUser: return "Bearer user-1"
            case .externalFile: return "Bearer sts-1"
            case .externalURLImpersonated, .impersonatedServiceAccount: return "Bearer iam-2-\(target)"
            }
        }

        var identity: String {
            let tests = ApplicationDefaultCredentialsTests.self
            switch self {
            case .serviceAccount: return "service account \(CredentialsTests.email)"
            case .authorizedUser: return "authorized user (client test-client.apps.googleusercontent.com)"
            case .externalFile: return "external account \(tests.audience)"
            case .externalURLImpersonated: return "external account \(tests.audience) as service account \(tests.target)"
            case .impersonatedServiceAccount:
                return "impersonated service account \(tests.target) (as authorized user (client test-client.apps.googleusercontent.com))"
            }
        }
    }

    @Test(arguments: Kind.allCases)
    func eachTypeAuthorisesStorageWithItsTokenAndQuotaProject(kind: Kind) async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let path = try kind.file(server, fixture, quota: "quota-\(kind.rawValue)")
        let credentials = try Credentials.fromEnvironment(
            ["GOOGLE_APPLICATION_CREDENTIALS": path], transport: fixture.transport)
        #expect(credentials.identity == kind.identity)
        #expect(credentials.quotaProject == "quota-\(kind.rawValue)")

        let bucket = "adc-\(UUID().uuidString.prefix(8).lowercased())"
        let storage = Storage(bucket: bucket, configuration: StorageConfiguration(
            endpoint: try TestEnv.url("BUCKETFS_TEST_FAKE_GCS"), credentials: credentials, transport: TestEnv.transport))
        _ = try await storage.reference().child("a.txt").putDataAsync(Data("a".utf8))
        _ = try await storage.reference().listAll()
        let seen = try await DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket).requests()
            .filter { $0.path.contains("/b/\(bucket)") }
        #expect(seen.count >= 2)
        for request in seen {
            #expect(request.authorization == kind.bearer, "\(request)")
            #expect(request.userProject == "quota-\(kind.rawValue)", "\(request)")
        }
        if kind == .externalURLImpersonated || kind == .impersonatedServiceAccount {
            // IAM was called with the source's token.
            let source = kind == .externalURLImpersonated ? "Bearer sts-1" : "Bearer user-1"
            let calls = try await server.log().filter { $0.path.hasSuffix(":generateAccessToken") }
            #expect(calls.map(\.authorization) == [source])
        }
    }

    @Test func billingProjectGoesInTheUserProjectParameter() async throws {
        let bucket = "pays-\(UUID().uuidString.prefix(8).lowercased())"
        var configuration = StorageConfiguration(
            endpoint: try TestEnv.url("BUCKETFS_TEST_FAKE_GCS"), transport: TestEnv.transport)
        configuration.billingProject = "my billing"
        let storage = Storage(bucket: bucket, configuration: configuration)
        _ = try await storage.reference().child("b.txt").putDataAsync(Data("b".utf8))
        _ = try await storage.reference().child("b.txt").getMetadata()
        let seen = try await DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket).requests()
            .filter { $0.path.contains("/b/\(bucket)") }
        #expect(seen.count >= 2)
        for request in seen {
            let query = request.query
            #expect(query.components(separatedBy: "&").filter { $0.hasPrefix("userProject=") } == ["userProject=my%20billing"], "\(request)")
        }
    }

    // MARK: refresh, refusal, secrets

    @Test func authorizedUserRefreshesAfterInvalidationAndKeepsItsSecrets() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let good = try CredentialsFile.load(
            Self.write(Self.authorizedUser(server), fixture, name: "u.json"), transport: fixture.transport)
        #expect(try await good.authorizationHeader() == "Bearer user-1")
        #expect(try await good.authorizationHeader() == "Bearer user-1")
        await good.invalidate()
        #expect(try await good.authorizationHeader() == "Bearer user-2")

        let revoked = "1//revoked-\(UUID().uuidString)"
        let bad = try CredentialsFile.load(
            Self.write(Self.authorizedUser(server, refreshToken: revoked), fixture, name: "bad.json"),
            transport: fixture.transport)
        let error = try await #require(throws: CredentialsError.self) { try await bad.authorizationHeader() }
        #expect(error.description.contains("invalid_grant"))
        let text = "\(error) \(bad) \(bad.identity)"
        #expect(!text.contains(revoked) && !text.contains(Self.clientSecret))
    }

    @Test func externalAccountRefusalsKeepTheSubjectTokenOut() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let subject = fixture.directory.appendingPathComponent("stolen.txt")
        let secret = "not-the-subject-\(UUID().uuidString)"
        try Data(secret.utf8).write(to: subject)
        let credentials = try CredentialsFile.load(
            Self.write(Self.externalAccount(server, source: ["file": subject.path]), fixture, name: "e.json"),
            transport: fixture.transport)
        let error = try await #require(throws: CredentialsError.self) { try await credentials.authorizationHeader() }
        #expect(error.description.contains("invalid_grant"))
        #expect(!error.description.contains(secret))
    }

    @Test func unsupportedTypesAndMissingFieldsNameTheFile() throws {
        let fixture = try Fixture()
        let other = try Self.write(["type": "external_account_authorized_user"], fixture, name: "o.json")
        let error = try #require(throws: CredentialsError.self) { try CredentialsFile.load(other) }
        #expect(error.description.contains(other) && error.description.contains("supported"))
        let partial = try Self.write(["type": "authorized_user", "client_id": "c"], fixture, name: "p.json")
        let missing = try #require(throws: CredentialsError.self) { try CredentialsFile.load(partial) }
        #expect(missing.description.contains("missing client_secret"))
    }

    // MARK: the ADC order

    @Test func theOrderIsVariableThenGcloudFileThenMetadataServer() throws {
        let fixture = try Fixture()
        let key = try fixture.writeKeyFile(tokenURI: "http://127.0.0.1:1/token")
        let gcloud = fixture.directory.appendingPathComponent("gcloud")
        try FileManager.default.createDirectory(at: gcloud, withIntermediateDirectories: true)
        let user: [String: Any] = [
            "type": "authorized_user", "client_id": "c", "client_secret": "s", "refresh_token": "r",
        ]
        try JSONSerialization.data(withJSONObject: user)
            .write(to: gcloud.appendingPathComponent("application_default_credentials.json"))
        let home = fixture.directory.appendingPathComponent("home")
        try FileManager.default.createDirectory(
            at: home.appendingPathComponent(".config/gcloud"), withIntermediateDirectories: true)
        try JSONSerialization.data(withJSONObject: user.merging(["client_id": "from-home"]) { $1 })
            .write(to: home.appendingPathComponent(".config/gcloud/application_default_credentials.json"))
        let metadata = "127.0.0.1:1"

        var environment = [
            "GOOGLE_APPLICATION_CREDENTIALS": key, "CLOUDSDK_CONFIG": gcloud.path, "HOME": home.path,
            "GCE_METADATA_HOST": metadata,
        ]
        #expect(try Credentials.fromEnvironment(environment) is ServiceAccountCredentials)
        environment["GOOGLE_APPLICATION_CREDENTIALS"] = nil
        #expect((try Credentials.fromEnvironment(environment) as? AuthorizedUserCredentials)?.clientID == "c")
        environment["CLOUDSDK_CONFIG"] = nil
        #expect((try Credentials.fromEnvironment(environment) as? AuthorizedUserCredentials)?.clientID == "from-home")
        environment["HOME"] = fixture.directory.path
        #expect((try Credentials.fromEnvironment(environment) as? MetadataServerCredentials)?.host == metadata)
        environment["GCE_METADATA_HOST"] = nil
        // Not probed here: the probe happens at the first token.
        let probed = try Credentials.fromEnvironment(environment)
        #expect(probed.identity == "metadata server metadata.google.internal")
        environment["NO_GCE_CHECK"] = "True"
        let error = try #require(throws: CredentialsError.self) { try Credentials.fromEnvironment(environment) }
        #expect(error.description.contains("GOOGLE_APPLICATION_CREDENTIALS: not set"))
        #expect(error.description.contains("\(fixture.directory.path)/.config/gcloud/application_default_credentials.json: no such file"))
        #expect(error.description.contains("skipped (NO_GCE_CHECK)"))
        #expect(error.description.contains("gcloud auth application-default login"))
    }

    @Test func theMetadataServerIsProbedBeforeItsFirstToken() async throws {
        let fixture = try Fixture()
        let server = try TokenServer.start(fixture)
        defer { server.stop() }
        let answering = ProbedMetadataCredentials(
            host: "127.0.0.1:\(server.port)", tried: ["x"], transport: fixture.transport)
        #expect(try await answering.authorizationHeader() == "Bearer tok-1")
        #expect(try await server.log().map(\.path) == [
            "/computeMetadata/v1/", "/computeMetadata/v1/instance/service-accounts/default/token",
        ])

        let silent = ProbedMetadataCredentials(
            host: "127.0.0.1:\(try freePort())", tried: ["GOOGLE_APPLICATION_CREDENTIALS: not set"],
            transport: fixture.transport)
        let error = try await #require(throws: CredentialsError.self) { try await silent.authorizationHeader() }
        guard case .noCredentials(let tried) = error else {
            Issue.record("expected noCredentials, got \(error)")
            return
        }
        #expect(tried.count == 2 && tried[1].hasPrefix("metadata server 127.0.0.1:"))
    }
}
