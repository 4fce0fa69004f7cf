import ArgumentParser
import Foundation
import Testing
@testable import BucketFSCLI

/// Which credentials a command line chooses: an endpoint changes where
/// requests go, never who sends them (Google's client libraries go without
/// credentials only for `STORAGE_EMULATOR_HOST`). The mount tests check
/// the same against a server (CredentialsMountTests).
@Suite struct CredentialChoiceTests {
    static func options(_ arguments: [String]) throws -> StorageOptions { try StorageOptions.parse(arguments) }

    static let noEnvironment: [String: String] = [:]
    static let emulatorNamed = ["STORAGE_EMULATOR_HOST": "127.0.0.1:9023"]

    @Test("--endpoint keeps the Application Default Credentials; --anonymous, STORAGE_EMULATOR_HOST and credential options replace them")
    func endpointKeepsApplicationDefaultCredentials() throws {
        for endpoint in ["https://storage.europe-west3.rep.googleapis.com", "http://127.0.0.1:9023"] {
            #expect(try Self.options(["--endpoint", endpoint]).usesApplicationDefaultCredentials(environment: Self.noEnvironment))
        }
        #expect(try Self.options([]).usesApplicationDefaultCredentials(environment: Self.noEnvironment))
        #expect(try !Self.options(["--endpoint", "http://127.0.0.1:9023", "--anonymous"]).usesApplicationDefaultCredentials(environment: Self.noEnvironment))
        #expect(try !Self.options([]).usesApplicationDefaultCredentials(environment: Self.emulatorNamed))
        #expect(try !Self.options(["--key-file", "/k.json"]).usesApplicationDefaultCredentials(environment: Self.noEnvironment))
        #expect(try !Self.options(["--token-file", "/t"]).usesApplicationDefaultCredentials(environment: Self.noEnvironment))
        // Impersonation needs credentials to impersonate with, emulator or not.
        #expect(try Self.options(["--impersonate-service-account", "sa@p.iam.gserviceaccount.com"])
            .usesApplicationDefaultCredentials(environment: Self.emulatorNamed))
    }

    @Test("plain http on a loopback address counts as local; https or another host does not")
    func localEndpoints() {
        for local in ["http://127.0.0.1:9023", "http://localhost:4443", "http://[::1]:9000", "http://127.0.0.2"] {
            #expect(StorageOptions.isLocalHTTP(URL(string: local)!), "\(local)")
        }
        for remote in ["https://127.0.0.1:9023", "http://10.0.0.7:9023", "https://storage.googleapis.com", "http://proxy.corp:3128"] {
            #expect(!StorageOptions.isLocalHTTP(URL(string: remote)!), "\(remote)")
        }
    }

    @Test("the hint suggests --anonymous only where the Application Default Credentials meet a local endpoint")
    func hint() throws {
        let local = URL(string: "http://127.0.0.1:9023")!
        let hint = try Self.options(["--endpoint", local.absoluteString]).credentialsHint(endpoint: local, environment: Self.noEnvironment)
        #expect(hint == "http://127.0.0.1:9023 is a local endpoint: for an emulator, add --anonymous")
        #expect(try Self.options([]).credentialsHint(endpoint: URL(string: "https://storage.googleapis.com")!, environment: Self.noEnvironment) == nil)
        #expect(try Self.options(["--key-file", "/k.json"]).credentialsHint(endpoint: local, environment: Self.noEnvironment) == nil)
    }
}
