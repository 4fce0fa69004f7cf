import Foundation
import TestServerClient
import TestSupport
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// A `Tests/Servers/fault_proxy.py` of a test's own, between its mount and
/// the shared emulator: every request passes through unchanged until the
/// test registers faults (see the proxy's docstring for what they do).
/// Checks go to the emulator directly (`gcs`), never through the proxy.
final class FaultProxy: @unchecked Sendable {
    let endpoint: String
    /// The emulator behind the proxy, for checks.
    let gcs: DirectGCS
    private let process: Tools.Running

    /// Starts a proxy in front of `upstream` (default: the shared
    /// emulator); `gcs` addresses `bucket` there.
    init(upstream: String? = nil, bucket: String = MountEnv.bucket) async throws {
        let upstream = try upstream ?? MountEnv.emulator()
        let python = try MountEnv.variable("BUCKETFS_TEST_PYTHON")
        let script = try MountEnv.repo() + "/Tests/Servers/fault_proxy.py"
        process = try Tools.Running(python, [script, "--upstream", upstream, "--port", "0"])
        gcs = DirectGCS(base: upstream, bucket: bucket)
        let deadline = ContinuousClock.now + .seconds(20)
        var port: String?
        while port == nil {
            let out = (try? String(contentsOfFile: process.stdoutPath, encoding: .utf8)) ?? ""
            port = out.split(separator: "\n").first { $0.hasPrefix("READY ") }.map { String($0.dropFirst(6)) }
            if port != nil { break }
            guard process.isRunning, ContinuousClock.now < deadline else {
                let result = process.result()
                process.kill()
                throw HarnessError("fault_proxy.py did not become READY: \(result.summary)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        endpoint = "http://127.0.0.1:\(port!)"
    }

    /// Stops the proxy (by the PID we started). Idempotent.
    func stop() {
        if process.isRunning {
            Glibc.kill(process.pid, SIGTERM)
            if !process.waitBlocking(.seconds(3)) { process.kill() }
        }
        _ = process.result()
    }

    /// Registers faults (one object or several).
    func fault(_ specs: [[String: Any]]) async throws {
        let response = try await DirectGCS.transport.send(HTTPRequest(
            method: .post, url: endpoint + "/_faults", headers: ["Content-Type": "application/json"],
            body: .bytes(try JSONSerialization.data(withJSONObject: specs)), isIdempotent: false))
        guard response.isSuccess else { throw HarnessError("POST /_faults answered \(response.status): \(String(decoding: response.body, as: UTF8.self))") }
    }

    /// A fault (for `fault(_:)`): the next `count` object downloads
    /// (`alt=media`) get their answer's head and first `bytes` body bytes,
    /// then nothing for `seconds` on a connection left open. curl judges
    /// its speed over the last ~5 s, so a 1 s stall timeout fires ~7 s in:
    /// the stall must last longer than that (else the close ends it).
    static func stallMidBody(afterBytes bytes: Int, seconds: Double = 20, count: Int = 1) -> [String: Any] {
        ["method": "GET", "path_contains": "alt=media", "stall_body_after_bytes": bytes,
         "stall_body_seconds": seconds, "count": count]
    }

    /// Removes every pending fault.
    func clearFaults() async throws {
        _ = try await DirectGCS.transport.send(HTTPRequest(method: .delete, url: endpoint + "/_faults", isIdempotent: true))
    }

    /// The requests the proxy has seen, in order (`time`, `done` and
    /// `fault` filled in).
    var requestLog: ServerRequestLog { ServerRequestLog(endpoint + "/_requests") }

    func requests() async throws -> [LoggedRequest] { try await requestLog.requests() }

    func clearRequests() async throws { try await requestLog.clear() }
}
