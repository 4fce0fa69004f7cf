import Foundation
import Testing
@testable import StorageKit

/// `Storage.storage()` without a plist: FIREBASE_CONFIG, the emulator
/// variable, credentials, and the errors when something is missing.
@Suite struct DefaultAppTests {
    static let emulatorEnvironment = ["STORAGE_EMULATOR_HOST": "127.0.0.1:9"]

    @Test func inlineJSONGivesTheBucket() throws {
        var environment = Self.emulatorEnvironment
        environment["FIREBASE_CONFIG"] = #" {"projectId":"my-app","storageBucket":"my-app.firebasestorage.app","apiKey":"k"}"#
        let storage = try Storage.storageFromEnvironment(environment)
        #expect(storage.bucket == "my-app.firebasestorage.app")
        #expect(storage.configuration.endpoint.absoluteString == "http://127.0.0.1:9")
        #expect(storage.configuration.credentials is AnonymousCredentials)
        #expect(storage.reference().isUsable)
        let config = try #require(try FirebaseConfig.fromEnvironment(environment))
        #expect(config == FirebaseConfig(storageBucket: "my-app.firebasestorage.app", projectId: "my-app", apiKey: "k"))
    }

    @Test func aPathToAJSONFileGivesTheBucket() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("firebase-config-\(UUID().uuidString).json")
        try Data(#"{"storageBucket": "gs://legacy-app.appspot.com/"}"#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var environment = Self.emulatorEnvironment
        environment["FIREBASE_CONFIG"] = file.path
        #expect(try Storage.defaultBucket(environment) == "legacy-app.appspot.com")
    }

    @Test func missingBucketNamesTheVariableToSet() throws {
        for config in [nil, "", #"{"projectId":"my-app"}"#] {
            var environment = Self.emulatorEnvironment
            environment["FIREBASE_CONFIG"] = config
            let error = try #require(Self.error { try Storage.storageFromEnvironment(environment) })
            guard case .invalidArgument(let message) = error else {
                Issue.record("expected invalidArgument, got \(error)")
                continue
            }
            #expect(message.contains("FIREBASE_CONFIG"))
            #expect(message.contains("storageBucket"))
            #expect(!message.contains("GOOGLE_CLOUD_PROJECT"))
        }
    }

    @Test func theProjectIsNamedButNotGuessedFrom() throws {
        let environment = ["GOOGLE_CLOUD_PROJECT": "my-app"]
        let error = try #require(Self.error { try Storage.defaultBucket(environment) })
        let message = "\(error)"
        #expect(message.contains("FIREBASE_CONFIG"))
        #expect(message.contains("my-app.firebasestorage.app"))
        #expect(message.contains("my-app.appspot.com"))
    }

    @Test func unreadableOrMalformedConfigIsAnError() throws {
        for (value, expected) in [("/nonexistent/firebase.json", "/nonexistent/firebase.json"), ("{not json", "not a JSON object")] {
            let error = try #require(Self.error { try Storage.defaultBucket(["FIREBASE_CONFIG": value]) })
            #expect("\(error)".contains(expected), "\(error)")
        }
    }

    @Test func unusableCredentialsFailRequestsNamingTheFile() async throws {
        let environment = [
            "FIREBASE_CONFIG": #"{"storageBucket":"b"}"#,
            "GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json",
        ]
        let error = try #require(Self.error { try Storage.storageFromEnvironment(environment) })
        guard case .unauthenticated(let message) = error else {
            Issue.record("expected unauthenticated, got \(error)")
            return
        }
        #expect(message.contains("/nonexistent/key.json"))
        // The non-throwing form defers the same error to each request.
        let configuration = StorageConfiguration.defaultApp(environment)
        let storage = Storage(bucket: "b", configuration: configuration)
        await #expect(throws: StorageError.self) { _ = try await storage.reference().child("x").getMetadata() }
        do {
            _ = try await storage.reference().child("x").getMetadata()
        } catch StorageError.unauthenticated(let message) {
            #expect(message.contains("/nonexistent/key.json"))
        }
    }

    /// What `Storage.storage()` returns when there is no bucket: no trap,
    /// every operation fails with the instructions.
    @Test func aStorageWithoutBucketRefusesEveryOperation() async throws {
        let storage = Storage(unusable: "set FIREBASE_CONFIG", configuration: StorageConfiguration(
            endpoint: URL(string: "http://127.0.0.1:9")!, transport: TestEnv.transport))
        let refs = [storage.reference(), storage.reference().child("images/a.jpg"), storage.reference(withPath: "x"),
                    storage.reference(objectName: "dir/"), storage.reference(forURL: "gs://b/x")]
        for ref in refs {
            #expect(!ref.isUsable)
            await PathTests.expectInvalidArgument(mentioning: "FIREBASE_CONFIG") { _ = try await ref.getMetadata() }
            await PathTests.expectInvalidArgument(mentioning: "FIREBASE_CONFIG") { _ = try await ref.list(maxResults: 10) }
            await PathTests.expectInvalidArgument(mentioning: "FIREBASE_CONFIG") { _ = try await ref.putDataAsync(Data()) }
        }
        #expect(throws: StorageError.self) { try storage.reference(validatingURL: "gs://b/x") }
    }

    @Test func storageURLInstancesAreSharedPerBucket() {
        let a = Storage.storage(url: "gs://shared-test-bucket")
        let b = Storage.storage(url: "gs://shared-test-bucket/some/path")
        #expect(a === b)
        #expect(a.bucket == "shared-test-bucket")
        #expect(Storage.storage(url: "gs://other-shared-test-bucket") !== a)
        #expect(Storage.storage() === Storage.storage())
        #expect(Storage.storage(url: "gs://shared-test-bucket", configuration: StorageConfiguration()) !== a)
    }

    /// The StorageError `body` throws; nil if it returns.
    static func error(_ body: () throws -> Any) -> StorageError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? StorageError
        }
    }
}
