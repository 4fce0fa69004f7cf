import Foundation
import Testing
@testable import StorageKit

extension SeedSampleTests {
    /// The seeds' samples over Firebase's v0 API, signed in as a user: the
    /// same program, another environment (`FIREBASE_CONFIG` with the API
    /// key, the Firebase emulator variables, and the user's email and
    /// password file). The bucket has the getting-started rules (signed-in
    /// users may read and write; the samples use `images/`, `files/uid/`),
    /// and every v0 request must come from that user. Checked through the
    /// server's JSON API.
    @Test func samplesOverFirebaseSignedInAsAUser() async throws {
        let server = try FirebaseServer(bucket: "signed-in-seeds-\(UUID().uuidString.prefix(8).lowercased())")
        let account = try await server.newAccount()
        let passwordFile = FileManager.default.temporaryDirectory.appendingPathComponent("seed-password-\(UUID().uuidString)")
        try Data((account.password + "\n").utf8).write(to: passwordFile)
        defer { try? FileManager.default.removeItem(at: passwordFile) }
        var run = SeedSampleRun(bucket: server.bucket, endpoint: URL(string: server.base)!)
        run.extraEnvironment = [
            "FIREBASE_CONFIG": #"{"storageBucket":"\#(server.bucket)","apiKey":"\#(FirebaseServer.apiKey)"}"#,
            "FIREBASE_STORAGE_EMULATOR_HOST": server.host,
            "FIREBASE_AUTH_EMULATOR_HOST": server.host,
            "STORAGEKIT_FIREBASE_EMAIL": account.email,
            "STORAGEKIT_FIREBASE_PASSWORD_FILE": passwordFile.path,
        ]

        var report = try await run.run(["000-1", "000-5", "001-1", "001-2", "001-3"])
        #expect(report.value("000-1", "bucket") == server.bucket)
        #expect(report.value("001-3", "contentType") == "image/jpeg")
        #expect(try await server.raw.media("images/rivers.jpg") == Self.imageBytes)
        try await Self.expectDownloadURL(report.value("001-3", "downloadURL"), of: "images/rivers.jpg", raw: server.raw, bucket: server.bucket)

        try await Self.checkMetadataSamples(seed: "002", run: run, raw: server.raw)

        report = try await run.run(["003-setup", "003-1", "003-2"])
        let listed = try await server.raw.listFolder(prefix: "files/uid/")
        #expect(listed.items.count == 5)
        #expect(report.values("003-1", "item") == listed.items)
        #expect(report.values("003-1", "prefix") == ["files/uid/photos"])
        #expect(report.values("003-2", "item") == listed.items)

        report = try await run.run(["001-5", "001-7", "001-8"])
        #expect(report.value("001-5", "failure") == "cancelled")
        #expect(try await server.raw.resource("images/cancelled.bin") == nil)
        #expect(report.value("001-7", "outcome") == "success size=\(Self.largeSize)")
        #expect((try await server.raw.resource("images/unobserved.bin"))?["size"] as? String == String(Self.largeSize))
        #expect(report.value("001-8", "success") == String(Self.imageBytes.count))

        let seen = try await server.requests().filter { ($0["path"] as? String ?? "").hasPrefix("/v0/b/\(server.bucket)/") }
        #expect(seen.count > 20)
        #expect(seen.allSatisfy { $0["auth"] as? String == "uid:\(account.uid)" }, "every request as the user")
    }
}
