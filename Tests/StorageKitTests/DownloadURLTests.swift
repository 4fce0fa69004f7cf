import Foundation
import TestServerClient
import Synchronization
import Testing
import Transport
@testable import StorageKit

/// Firebase download URLs: the encoding, the host, and the token, checked
/// against the object's metadata through the JSON API.
@Suite struct DownloadURLTests {
    let prefix = TestEnv.uniquePrefix("durl")

    /// What the Firebase Apple SDK's `GCSEscapedString` makes of these
    /// names: the whole path one segment, `/` as %2F.
    static let encodings: [(name: String, encoded: String)] = [
        ("images/space.jpg", "images%2Fspace.jpg"),
        ("with space.txt", "with%20space.txt"),
        ("hash#and?question", "hash%23and%3Fquestion"),
        ("a/b/c/d.txt", "a%2Fb%2Fc%2Fd.txt"),
        ("naïve/日本語.txt", "na%C3%AFve%2F%E6%97%A5%E6%9C%AC%E8%AA%9E.txt"),
        ("plus+amp&semi;pct%", "plus%2Bamp%26semi%3Bpct%25"),
        ("kept-._~!$'()*,=:@", "kept-._~!$'()*,=:@"),
        ("emoji 📷.png", "emoji%20%F0%9F%93%B7.png"),
    ]

    @Test func pathsAreOneEncodedSegment() throws {
        let storage = Storage(bucket: "my-app.firebasestorage.app")
        for (name, encoded) in Self.encodings {
            let url = try storage.reference().child(name).firebaseDownloadURL(token: "tok-1")
            #expect(url.absoluteString == "https://firebasestorage.googleapis.com/v0/b/my-app.firebasestorage.app/o/\(encoded)?alt=media&token=tok-1")
            // And it names the same reference again.
            #expect(storage.reference(forURL: url.absoluteString) == storage.reference().child(name))
        }
    }

    @Test func theHostFollowsTheEndpoint() throws {
        let emulator = Storage(bucket: "b", configuration: StorageConfiguration(endpoint: URL(string: "http://127.0.0.1:9199/")!))
        #expect(try emulator.reference().child("a b").firebaseDownloadURL(token: "t").absoluteString
            == "http://127.0.0.1:9199/v0/b/b/o/a%20b?alt=media&token=t")
        let explicit = Storage(bucket: "b", configuration: StorageConfiguration(endpoint: URL(string: "https://storage.googleapis.com")!))
        #expect(try explicit.reference().child("x").firebaseDownloadURL(token: "t").host == "firebasestorage.googleapis.com")
    }

    @Test func tokenIsCreatedOnceThenStableForEveryKindOfName() async throws {
        let storage = try TestEnv.emulator()
        let raw = try DirectGCS.emulator()
        for (name, encoded) in Self.encodings {
            let ref = storage.reference().child("\(prefix)/\(name)")
            try await raw.put(ref.fullPath, Data("bytes of \(name)".utf8))
            let first = try await ref.downloadURL()
            let resource = try #require(try await raw.resource(ref.fullPath))
            let tokens = try #require((resource["metadata"] as? [String: String])?[StorageReference.downloadTokensKey])
            #expect(UUID(uuidString: tokens) != nil, "one new UUID token, not \(tokens)")
            #expect(resource["metageneration"] as? String == "2", "one metadata patch")
            let expectedPath = "/v0/b/\(TestEnv.emulatorBucket)/o/\(StorageReference.escapeForDownloadURL(prefix))%2F\(encoded)"
            #expect(first.absoluteString.hasSuffix("\(expectedPath)?alt=media&token=\(tokens)"), "\(first)")
            #expect(first.absoluteString.hasPrefix(try TestEnv.url("BUCKETFS_TEST_EMULATOR").absoluteString))
            // Decoding the URL gives the object's name back.
            #expect(storage.reference(forURL: first.absoluteString).fullPath == resource["name"] as? String)

            let second = try await ref.downloadURL()
            #expect(second == first)
            let after = try #require(try await raw.resource(ref.fullPath))
            #expect(after["metageneration"] as? String == "2", "no further patch")
        }
    }

    @Test func anExistingTokenIsUsedAsItIs() async throws {
        let storage = try TestEnv.emulator()
        let raw = try DirectGCS.emulator()
        let name = "\(prefix)/has-tokens.txt"
        try await raw.put(name, Data("x".utf8), metadata: [StorageReference.downloadTokensKey: "first-token,second-token", "other": "kept"])
        let url = try await storage.reference().child(name).downloadURL()
        #expect(url.query == "alt=media&token=first-token")
        let resource = try #require(try await raw.resource(name))
        #expect(resource["metageneration"] as? String == "1")
        #expect((resource["metadata"] as? [String: String])?["other"] == "kept")
    }

    @Test func aMissingObjectIsObjectNotFound() async throws {
        let storage = try TestEnv.emulator()
        await #expect(throws: StorageError.self) { _ = try await storage.reference().child("\(prefix)/missing").downloadURL() }
        do {
            _ = try await storage.reference().child("\(prefix)/missing").downloadURL()
        } catch StorageError.objectNotFound {}
    }

    /// Against the fake server, which enforces ifMetagenerationMatch: of
    /// several clients creating the first token at once, one patch wins
    /// and everyone gets the winner's token.
    @Test func racingClientsAgreeOnOneToken() async throws {
        let storage = try TestEnv.fake(bucket: "race-\(prefix.lowercased())")
        let raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: storage.bucket)
        let name = "\(prefix)/race.bin"
        try await raw.put(name, Data("race".utf8), metadata: ["keep": "me"])
        let ref = storage.reference().child(name)
        let urls = try await withThrowingTaskGroup(of: URL.self) { group in
            for _ in 0..<8 { group.addTask { try await ref.downloadURL() } }
            return try await group.reduce(into: Set<URL>()) { $0.insert($1) }
        }
        #expect(urls.count == 1, "every client got the same URL: \(urls)")
        let resource = try #require(try await raw.resource(name))
        let metadata = try #require(resource["metadata"] as? [String: String])
        #expect(metadata["keep"] == "me")
        let token = try #require(metadata[StorageReference.downloadTokensKey])
        #expect(!token.contains(","), "exactly one token was written")
        #expect(urls.first?.query == "alt=media&token=\(token)")
        #expect(resource["metageneration"] as? String == "2", "exactly one patch applied")
    }
}
