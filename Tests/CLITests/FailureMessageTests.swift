import Foundation
import StorageKit
import Testing
@testable import BucketFSCLI

/// How failures read: one exit code per cause for every command, no SDK
/// error domain, a config file's syntax error with its position, and only
/// documented settings in `bucketfs status`.
@Suite struct FailureMessageTests {
    static let endpoint = URL(string: "http://127.0.0.1:9")!

    @Test("mount's exit codes for every command: 2 bucket, 3 credentials, 4 endpoint, 1 the rest; bridged errors alike")
    func exitCodes() {
        let cases: [(StorageError, Int32, String)] = [
            (.bucketNotFound("nb"), 2, "no such bucket: gs://nb (at http://127.0.0.1:9)"),
            (.unauthenticated("no token"), 3, "credentials missing or refused for gs://nb: no token"),
            (.unauthorized("gs://nb/x: denied"), 3, "permission denied uploading to gs://nb/x: gs://nb/x: denied"),
            (.retryLimitExceeded("connection refused"), 4, "endpoint unreachable: http://127.0.0.1:9 (connection refused)"),
            (.objectNotFound("x"), 1, "no such object: gs://nb/x"),
            (.invalidArgument("bad"), 1, "uploading to gs://nb/x failed: invalid argument: bad"),
        ]
        for (error, code, message) in cases {
            // As `async` calls throw it, and as an upload task's snapshot carries it.
            for thrown in [error as any Error, StorageNSError(error) as any Error] {
                let explained = StorageFailure.explain(thrown, "uploading to gs://nb/x", bucket: "nb", endpoint: Self.endpoint)
                #expect(explained.exitCode == code && explained.description == message, "\(explained)")
                #expect(!explained.description.contains("Domain") && !explained.description.contains("-130"), "\(explained)")
            }
        }
    }

    static func writeTemporary(_ text: String) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-config-\(UUID().uuidString).json").path
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test("a config file that is not JSON: a usage error naming the file and the line and column")
    func configFileSyntax() async throws {
        let path = try Self.writeTemporary("{\n  \"stat-ttl\": 30,\n  oops\n}\n")
        defer { try? FileManager.default.removeItem(atPath: path) }
        do {
            _ = try await SettingsResolver(mountOptions: [], givenConfig: path, environment: [:])
            Issue.record("accepted")
        } catch {
            #expect(error.exitCode == 64)
            #expect(error.description.hasPrefix("config file \(path) is not JSON at line 3, column 3"), "\(error)")
            #expect(!error.description.contains("NSCocoaErrorDomain") && !error.description.contains("Code="), "\(error)")
        }
        let array = try Self.writeTemporary("[\"stat-ttl\"]")
        defer { try? FileManager.default.removeItem(atPath: array) }
        do {
            _ = try await SettingsResolver(mountOptions: [], givenConfig: array, environment: [:])
            Issue.record("accepted")
        } catch {
            #expect(error.exitCode == 64 && error.description.contains("must be one JSON object"), "\(error)")
        }
    }

    @Test("status shows only settings the docs list: hidden tuning knobs stay out")
    func statusSettingsDocumented() async throws {
        let resolver = try await SettingsResolver(mountOptions: [], givenConfig: nil, environment: [:])
        _ = try resolver.optional(Settings.listingStatWidth, nil)
        let documented = OptionTable.markdown()
        #expect(resolver.effective["listing-stat-width"] == nil)
        for setting in Settings.all where setting.inStatus {
            let listed = documented.contains("`--\(setting.name)`") || documented.contains("`--\(setting.name) ")
            #expect(listed, "status shows \(setting.name), which the docs do not list")
        }
    }
}
