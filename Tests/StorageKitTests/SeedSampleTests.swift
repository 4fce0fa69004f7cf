import Foundation
import TestServerClient
import Synchronization
import Testing
import Transport
@testable import StorageKit

/// The Swift samples of the seeds (Tests/SeedSamples, compiled as written
/// against StorageKit), run as a separate program the way a Firebase
/// developer runs them on Linux, each group against a bucket of its own.
/// What the samples report is checked, and so is the bucket, through the
/// JSON API.
///
/// `SeedSampleRun` is all the configuration there is: the environment of
/// the program (`FIREBASE_CONFIG` names the bucket, `STORAGE_EMULATOR_HOST`
/// the server). Running the same samples against another server or signed
/// in another way means another environment.
///
/// Serialized: one SeedSamples process at a time, so the suite does not
/// load the shared emulator (and the machine) with several at once.
@Suite(.serialized) struct SeedSampleTests {
    static let imageBytes = Data((0..<64 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 31) })
    static let largeSize = 12 << 20

    @Test func referenceSamples() async throws {
        let (run, _) = try await SeedSampleRun.onEmulator("refs")
        let report = try await run.run(["000-1", "000-2", "000-3", "000-4", "000-5", "000-6"])
        #expect(report.value("000-1", "bucket") == run.bucket)
        #expect(report.value("000-1", "usable") == "true")
        #expect(report.value("000-2", "imagesRef") == "images")
        #expect(report.value("000-2", "spaceRef") == "images/space.jpg")
        #expect(report.value("000-2", "equivalent") == "true")
        #expect(report.value("000-3", "imagesRef") == "images")
        #expect(report.value("000-3", "rootRef") == "[]")
        #expect(report.value("000-4", "earthRef") == "images/earth.jpg")
        #expect(report.value("000-4", "nilRef") == "nil")
        #expect(report.value("000-5", "fullPath") == "images/space.jpg")
        #expect(report.value("000-5", "name") == "space.jpg")
        #expect(report.value("000-5", "bucket") == run.bucket)
        #expect(report.value("000-6", "path") == "images/space.jpg")
        #expect(report.value("000-6", "name") == "space.jpg")
        #expect(report.value("000-6", "images") == "images")
    }

    @Test func uploadWithCompletionAndDownloadURL() async throws {
        let (run, raw) = try await SeedSampleRun.onEmulator("upload")
        var report = try await run.run(["001-1", "001-2"])
        #expect(report.value("001-1", "sameName") == "true")
        #expect(report.value("001-1", "sameFullPath") == "false")
        // Data() from memory, then its download URL.
        #expect(report.value("001-2", "size") == "0")
        try await Self.expectDownloadURL(report.value("001-2", "downloadURL"), of: "images/rivers.jpg", raw: raw, bucket: run.bucket)
        #expect(try await raw.media("images/rivers.jpg") == Data())

        // A local file: its bytes, the type its extension implies, a new token.
        report = try await run.run(["001-3"])
        #expect(report.value("001-3", "size") == String(Self.imageBytes.count))
        #expect(report.value("001-3", "contentType") == "image/jpeg")
        try await Self.expectDownloadURL(report.value("001-3", "downloadURL"), of: "images/rivers.jpg", raw: raw, bucket: run.bucket)
        #expect(try await raw.media("images/rivers.jpg") == Self.imageBytes)

        // Both uploads with metadata; whichever finished last holds the name.
        report = try await run.run(["001-4"])
        #expect(report.values("001-4", "outcome").sorted() == [
            "success size=\(Self.imageBytes.count)", "success size=\("mountains, from memory".utf8.count)",
        ].sorted())
        let mountains = try #require(try await raw.resource("images/mountains.jpg"))
        #expect(mountains["contentType"] as? String == "image/jpeg")
        let bytes = try await raw.media("images/mountains.jpg")
        #expect(bytes == Self.imageBytes || bytes == Data("mountains, from memory".utf8))
    }

    @Test func manageAndObserveUploads() async throws {
        let (run, raw) = try await SeedSampleRun.onEmulator("manage")
        let report = try await run.run(["001-5", "001-6", "001-7", "001-8", "001-8-cancel"])
        // pause(), resume(), cancel(): the failure observer sees .cancelled.
        #expect(report.value("001-5", "failure") == "cancelled")
        #expect(report.value("001-5", "success") == nil)
        #expect(report.value("001-5", "final") == "failure")
        #expect(try await raw.resource("images/cancelled.bin") == nil)
        // An observer fires; a removed one never does.
        #expect(report.value("001-6", "observer")?.isEmpty == false)
        #expect(report.values("001-6", "progress").last == String(Self.largeSize))
        #expect(report.value("001-6", "outcome") == "success size=\(Self.largeSize)")
        #expect(report.values("001-7", "removed observer called").isEmpty)
        #expect(report.value("001-7", "outcome") == "success size=\(Self.largeSize)")
        #expect((try await raw.resource("images/unobserved.bin"))?["size"] as? String == String(Self.largeSize))
        // The complete example: resume, progress to 100%, success.
        #expect(report.value("001-8", "resume") == "resume")
        let percents = report.values("001-8", "percentComplete").compactMap(Double.init)
        #expect(!percents.isEmpty && percents == percents.sorted())
        #expect(percents.last == 100.0)
        #expect(report.value("001-8", "success") == String(Self.imageBytes.count))
        let mountains = try #require(try await raw.resource("images/mountains.jpg"))
        #expect(mountains["contentType"] as? String == "image/jpeg")
        #expect(try await raw.media("images/mountains.jpg") == Self.imageBytes)
        // Cancelled part-way: `snapshot.error as? NSError` maps to .cancelled.
        #expect(report.value("001-8-cancel", "failure") == "cancelled")
        #expect(report.value("001-8-cancel", "success") == nil)
        #expect(report.values("001-8-cancel", "percentComplete").compactMap(Double.init).allSatisfy { $0 < 100 })
        #expect(try await raw.resource("images/cancelled-mountains.jpg") == nil)
    }

    @Test func metadataWithCompletionHandlers() async throws {
        let (run, raw) = try await SeedSampleRun.onEmulator("meta-cb")
        try await Self.checkMetadataSamples(seed: "002", run: run, raw: raw)
    }

    @Test func metadataWithAsyncAwait() async throws {
        let (run, raw) = try await SeedSampleRun.onEmulator("meta-async")
        try await Self.checkMetadataSamples(seed: "004", run: run, raw: raw)
    }

    static func checkMetadataSamples(seed: String, run: SeedSampleRun, raw: DirectGCS) async throws {
        var report = try await run.run(["\(seed)-1"])
        #expect(report.value("\(seed)-1", "name") == "forest.jpg")
        #expect(report.value("\(seed)-1", "error") == nil)

        report = try await run.run(["\(seed)-2"])
        #expect(report.value("\(seed)-2", "cacheControl") == "public,max-age=300")
        var forest = try #require(try await raw.resource("images/forest.jpg"))
        #expect(forest["cacheControl"] as? String == "public,max-age=300")
        #expect(forest["contentType"] as? String == "image/jpeg")

        report = try await run.run(["\(seed)-3"])
        #expect(report.value("\(seed)-3", "contentType") == "nil")
        forest = try #require(try await raw.resource("images/forest.jpg"))
        #expect(forest["contentType"] as? String == nil, "contentType deleted: \(forest)")
        #expect(forest["cacheControl"] as? String == "public,max-age=300", "only the nil property changed")

        report = try await run.run(["\(seed)-4"])
        #expect(report.value("\(seed)-4", "customMetadata") == "activity=Hiking;location=Yosemite, CA, USA")
        let path = seed == "002" ? "images/yosemite.jpg" : "images/yosemite-korean.jpg"
        let stored = try #require(try await raw.resource(path))
        // Uploads through Firebase's v0 API also get a download token.
        let custom = (stored["metadata"] as? [String: String])?.filter { $0.key != StorageReference.downloadTokensKey }
        #expect(custom == ["location": "Yosemite, CA, USA", "activity": "Hiking"])
    }

    @Test func listSamplesOnTheEmulator() async throws {
        let (run, raw) = try await SeedSampleRun.onEmulator("list")
        let report = try await run.run(["003-setup", "003-1", "003-2"])
        let listed = try await raw.listFolder(prefix: "files/uid/")
        #expect(listed.items.count == 5)
        #expect(report.values("003-1", "item") == listed.items)
        #expect(report.values("003-1", "prefix") == listed.prefixes.map { String($0.dropLast()) })
        #expect(report.values("003-1", "prefix") == ["files/uid/photos"])
        #expect(report.values("003-2", "item") == listed.items)
    }

    /// The fake server pages for real (the emulator ignores maxResults), so
    /// the paginated sample walks three pages of 100.
    @Test func paginationSampleFollowsPageTokens() async throws {
        let bucket = "seeds-pages-\(UUID().uuidString.prefix(8).lowercased())"
        let run = SeedSampleRun(bucket: bucket, endpoint: try TestEnv.url("BUCKETFS_TEST_FAKE_GCS"))
        let raw = try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket)
        let report = try await run.run(["003-setup-250", "003-2", "003-1"])
        let pages = report.values("003-2", "page")
        #expect(pages == [
            "0 prefixes, 100 items, pageToken no", "0 prefixes, 100 items, pageToken yes",
            "1 prefixes, 50 items, pageToken yes",
        ])
        let listed = try await raw.listFolder(prefix: "files/uid/")
        #expect(listed.items.count == 250)
        #expect(report.values("003-2", "item") == listed.items)
        #expect(report.values("003-1", "item") == listed.items)
        #expect(report.values("003-1", "prefix") == ["files/uid/photos"])
        let pageRequests = try await raw.requests().compactMap { request -> [String: String]? in
            guard request.path == "/storage/v1/b/\(bucket)/o" else { return nil }
            let items = URLComponents(string: "?" + request.query)?.queryItems ?? []
            let fields = Dictionary(items.map { ($0.name, $0.value ?? "") }) { $1 }
            return fields["maxResults"] == "100" ? fields : nil
        }
        #expect(pageRequests.count == 3)
        #expect(pageRequests.filter { $0["pageToken"] != nil }.count == 2)
    }

    /// `SeedSamples` with no argument: every sample, one process, the main
    /// thread blocking on each completion.
    @Test func everySampleInOneRun() async throws {
        let (run, _) = try await SeedSampleRun.onEmulator("all")
        let report = try await run.run([])
        let names = try await SeedSampleRun(bucket: run.bucket, endpoint: run.endpoint).names()
        #expect(report.values(key: "done") == names.filter { !$0.hasPrefix("003-setup-") })
        #expect(report.values(key: "error").isEmpty)
        #expect(report.values(key: "setup-error").isEmpty)
    }

    /// A download URL the sample received: the Firebase form, the object's
    /// path as one segment, and the token the object's metadata holds.
    static func expectDownloadURL(_ text: String?, of name: String, raw: DirectGCS, bucket: String) async throws {
        let url = try #require(text.flatMap { URL(string: $0) }, "a download URL")
        let resource = try #require(try await raw.resource(name))
        let token = try #require((resource["metadata"] as? [String: String])?[StorageReference.downloadTokensKey])
        let encoded = name.replacingOccurrences(of: "/", with: "%2F")
        #expect(url.absoluteString == "\(raw.base)/v0/b/\(bucket)/o/\(encoded)?alt=media&token=\(token)")
    }
}

/// One run of the SeedSamples program, configured only by its environment.
struct SeedSampleRun {
    let bucket: String
    let endpoint: URL
    /// More environment for the program (credentials, other endpoints).
    var extraEnvironment: [String: String] = [:]

    /// A fresh bucket on the emulator, and a reader for it.
    static func onEmulator(_ label: String) async throws -> (SeedSampleRun, DirectGCS) {
        let bucket = "seeds-\(label)-\(UUID().uuidString.prefix(8).lowercased())"
        let raw = try DirectGCS("BUCKETFS_TEST_EMULATOR", bucket: bucket)
        try await raw.post("/storage/v1/b?project=seeds", json: ["name": bucket])
        return (SeedSampleRun(bucket: bucket, endpoint: try TestEnv.url("BUCKETFS_TEST_EMULATOR")), raw)
    }

    var environment: [String: String] {
        var environment = ProcessInfo.processInfo.environment
        for name in ["GOOGLE_APPLICATION_CREDENTIALS", "GCE_METADATA_HOST", "GOOGLE_CLOUD_PROJECT"] {
            environment[name] = nil
        }
        environment["FIREBASE_CONFIG"] = #"{"storageBucket":"\#(bucket)"}"#
        environment["STORAGE_EMULATOR_HOST"] = endpoint.absoluteString
        environment.merge(extraEnvironment) { $1 }
        return environment
    }

    /// The SeedSamples executable beside the test bundle.
    static func binary() throws -> URL {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let url = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent("SeedSamples")
        guard FileManager.default.isExecutableFile(atPath: url.path) else {
            throw TestEnv.NotConfigured(variable: "the SeedSamples executable at \(url.path) (swift build --build-tests)")
        }
        return url
    }

    func names() async throws -> [String] {
        let output = try await execute(["list"])
        return output.split(separator: "\n").map(String.init)
    }

    /// Runs `samples` (all when empty); fails unless the program exits 0.
    func run(_ samples: [String], timeout: Duration = .seconds(300)) async throws -> SampleReport {
        let output = try await execute(samples, timeout: timeout)
        let report = SampleReport(output)
        for sample in samples {
            #expect(report.value(sample, "done") == "true", "sample \(sample) did not finish")
            #expect(report.value(sample, "timeout") == nil)
        }
        for (sample, message) in report.entries(key: "setup-error") { Issue.record("\(sample) setup: \(message)") }
        for (sample, message) in report.entries(key: "error") { Issue.record("\(sample): \(message)") }
        return report
    }

    private func execute(_ arguments: [String], timeout: Duration = .seconds(300)) async throws -> String {
        let process = Process()
        process.executableURL = try Self.binary()
        process.arguments = arguments
        process.environment = environment
        let out = FileManager.default.temporaryDirectory.appendingPathComponent("seed-samples-\(UUID().uuidString).out")
        FileManager.default.createFile(atPath: out.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: out) }
        let handle = try FileHandle(forWritingTo: out)
        defer { try? handle.close() }
        process.standardOutput = handle
        let exited = AsyncStream<Void>.makeStream()
        process.terminationHandler = { _ in exited.continuation.finish() }
        try process.run()
        let watchdog = Task {
            try await Task.sleep(for: timeout)
            process.terminate()
        }
        for await _ in exited.stream {}
        watchdog.cancel()
        let text = String(decoding: try Data(contentsOf: out), as: UTF8.self)
        #expect(process.terminationReason == .exit && process.terminationStatus == 0,
                "SeedSamples \(arguments) exited with \(process.terminationStatus); output:\n\(text)")
        return text
    }
}

/// The JSON lines a run printed.
struct SampleReport {
    private let lines: [(sample: String, key: String, value: String)]

    init(_ output: String) {
        lines = output.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String],
                  let sample = object["sample"], let key = object["key"], let value = object["value"] else { return nil }
            return (sample, key, value)
        }
    }

    func values(_ sample: String, _ key: String) -> [String] {
        lines.filter { $0.sample == sample && $0.key == key }.map(\.value)
    }

    /// The first value reported under `key` by `sample`.
    func value(_ sample: String, _ key: String) -> String? { values(sample, key).first }

    /// The samples that reported `key`, in order.
    func values(key: String) -> [String] { lines.filter { $0.key == key }.map(\.sample) }

    func entries(key: String) -> [(String, String)] { lines.filter { $0.key == key }.map { ($0.sample, $0.value) } }
}
