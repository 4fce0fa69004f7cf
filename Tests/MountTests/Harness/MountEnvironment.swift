import Foundation
import Testing
import TestServerClient
import TestSupport

/// Tests that mount the built `bucketfs` binary on a fresh directory and
/// drive it with real tools. They share the single-request-at-a-time
/// emulator and time things, so they run one after another.
@Suite(.serialized) enum MountTests {}

// MARK: - Environment

/// The servers and paths `scripts/test.sh` provides. A missing variable fails
/// the test (never skips it).
enum MountEnv {
    static let bucket = DirectGCS.emulatorBucket

    static func variable(_ name: String) throws -> String { try TestEnvironment.variable(name) }
    static func endpoint(_ name: String) throws -> String { try TestEnvironment.endpoint(name) }

    static func emulator() throws -> String { try endpoint("BUCKETFS_TEST_EMULATOR") }
    static func fake() throws -> String { try endpoint("BUCKETFS_TEST_FAKE_GCS") }
    /// fake-gcs-server, the independent Go emulator (scripts/fake_gcs_server.sh).
    static func fakeGCSServer() throws -> String { try endpoint("BUCKETFS_TEST_FAKE_GCS_SERVER") }
    /// firebase_emulator.py: Storage v0 + Auth + rules, and the JSON API.
    static func firebase() throws -> String { try endpoint("BUCKETFS_TEST_FIREBASE") }
    static func repo() throws -> String { try variable("BUCKETFS_TEST_REPO") }

    /// `BUCKETFS_TEST_EMULATOR_LOG`, else the log of test.sh's emulator.
    static func requestLogPath() throws -> String {
        if let path = ProcessInfo.processInfo.environment["BUCKETFS_TEST_EMULATOR_LOG"], !path.isEmpty { return path }
        return try repo() + "/.build/servers/emulator/requests.log"
    }

    /// The `bucketfs` executable beside the test bundle.
    static func binary() throws -> String {
        try builtExecutable("bucketfs", buildCommand: "swift build --build-tests")
    }

    static func builtExecutable(_ name: String, buildCommand: String) throws -> String {
        let exe = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let path = URL(fileURLWithPath: exe).deletingLastPathComponent().appendingPathComponent(name).path
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw TestEnvironment.NotConfigured("no \(name) executable at \(path): build it first (\(buildCommand))")
        }
        return path
    }

    static func uniquePrefix(_ label: String) -> String { "mt-\(label)-\(UUID().uuidString.prefix(8).lowercased())" }

    /// Deterministic pseudo-random bytes.
    static func pattern(_ count: Int, seed: UInt64) -> Data {
        var data = Data(count: count)
        fillPattern(&data, seed: seed, offset: 0)
        return data
    }

    /// Fills `data` with the bytes at `offset...` of the stream for `seed`
    /// (offset must be a multiple of 8).
    static func fillPattern(_ data: inout Data, seed: UInt64, offset: Int) {
        precondition(offset % 8 == 0)
        data.withUnsafeMutableBytes { raw in
            let count = raw.count
            let words = count / 8
            guard let base = raw.baseAddress else { return }
            let p = base.bindMemory(to: UInt64.self, capacity: words)
            var index = UInt64(offset / 8)
            for i in 0..<words {
                // The value at (seed, position): any chunk can be made alone.
                p[i] = SplitMix64.value(seed: seed, index: index)
                index &+= 1
            }
            for i in (words * 8)..<count { raw[i] = UInt8(truncatingIfNeeded: (offset + i) &* 31 &+ Int(seed & 0xff)) }
        }
    }
}

// MARK: - Small helpers

enum Scratch {
    /// A fresh temporary directory (removed by the caller's `defer`).
    static func directory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("bucketfs-mt-data-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static func remove(_ path: String) { try? FileManager.default.removeItem(atPath: path) }
}
