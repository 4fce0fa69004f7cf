import Foundation
import Synchronization
import Testing
@testable import Transport
import TestSupport

/// The transport against the fake GCS server on loopback, with faults
/// injected at the HTTP boundary: 503 then success, dropped connections, a
/// body cut halfway, a stall.
@Suite struct TransportFaultTests {
    /// Fast retries so the suite stays quick; the schedule itself is unit-tested.
    /// The total time is generous so that checks on attempt counts hold
    /// on a machine loaded by the other suites running in parallel.
    static func makeTransport(attempts: Int = 4, stall: Duration = .seconds(30)) -> HTTPTransport {
        HTTPTransport(configuration: TransportConfiguration(
            connectTimeout: .seconds(2), stallTimeout: stall,
            retry: RetryPolicy(maxAttempts: attempts, initialBackoff: .milliseconds(10),
                               maxBackoff: .milliseconds(50), totalTimeout: .seconds(120))))
    }

    let transport = makeTransport()

    func objectURL(_ server: String, _ name: String) -> String {
        "\(server)/storage/v1/b/transport/o/\(name)?alt=media"
    }

    // Checks semantics.md#net-request-retries
    @Test func serverErrorsAreRetriedUntilSuccess() async throws {
        let server = try TestServers.fakeGCS()
        let name = "retry-\(UUID().uuidString)"
        try await TestServers.putObject(Data("hello".utf8), bucket: "transport", name: name, on: server, transport: transport)
        try await TestServers.injectFault(["method": "GET", "path_contains": name, "status": 503, "count": 2], on: server, transport: transport)
        let before = transport.statistics.retryCount
        let response = try await transport.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true))
        #expect(response.status == 200)
        #expect(String(decoding: response.body, as: UTF8.self) == "hello")
        #expect(transport.statistics.retryCount - before == 2)
    }

    // Checks semantics.md#net-request-retries
    @Test func oneRequestsBackoffNeverDelaysAnother() async throws {
        // A long backoff, so that a shared one would show: the failing
        // request waits 20 s before its one retry. Three unrelated requests
        // sent meanwhile must all be answered well inside that wait. The
        // bound is the backoff itself, not a latency figure, so a loaded
        // machine (CI runs the suites in parallel) cannot fail it: a shared
        // backoff would hold the first of them for ~19.9 s. (With a 6 s
        // backoff, a load average of 16 once took 5.6 s for the three.)
        let backoff = Duration.seconds(20)
        let slow = HTTPTransport(configuration: TransportConfiguration(
            connectTimeout: .seconds(2),
            retry: RetryPolicy(maxAttempts: 2, initialBackoff: backoff, maxBackoff: backoff, totalTimeout: .seconds(60))),
            random: { 0 })
        let server = try TestServers.fakeGCS()
        let failing = "burst-\(UUID().uuidString)", healthy = "calm-\(UUID().uuidString)"
        for name in [failing, healthy] {
            try await TestServers.putObject(Data(name.utf8), bucket: "transport", name: name, on: server, transport: transport)
        }
        try await TestServers.injectFault(["method": "GET", "path_contains": failing, "status": 503, "count": 1], on: server, transport: transport)
        let clock = ContinuousClock()
        let started = clock.now
        async let first = slow.send(HTTPRequest(method: .get, url: objectURL(server, failing), isIdempotent: true))
        // Sent while the first one is waiting out its backoff.
        try await Task.sleep(for: .milliseconds(100))
        for _ in 0..<3 {
            let response = try await slow.send(HTTPRequest(method: .get, url: objectURL(server, healthy), isIdempotent: true))
            #expect(response.status == 200)
        }
        let healthyDone = clock.now - started
        let firstResponse = try await first
        #expect(firstResponse.status == 200)
        let firstTook = clock.now - started
        #expect(firstTook >= backoff, "one retry after a \(backoff) backoff took \(firstTook)")
        #expect(healthyDone < backoff - .seconds(2),
                "three unrelated requests were answered only after \(healthyDone), inside the other request's backoff")
    }

    @Test func nonIdempotentRequestsAreNotRetried() async throws {
        let server = try TestServers.fakeGCS()
        let name = "noretry-\(UUID().uuidString)"
        try await TestServers.injectFault(["method": "POST", "path_contains": "name=\(name)", "status": 503, "count": 1], on: server, transport: transport)
        let response = try await transport.send(HTTPRequest(
            method: .post, url: "\(server)/upload/storage/v1/b/transport/o?uploadType=media&name=\(name)",
            body: .bytes(Data("x".utf8)), isIdempotent: false))
        #expect(response.status == 503)
    }

    @Test func retriesStopAtTheAttemptBudget() async throws {
        let server = try TestServers.fakeGCS()
        let name = "budget-\(UUID().uuidString)"
        try await TestServers.injectFault(["method": "GET", "path_contains": name, "status": 503, "count": 10], on: server, transport: transport)
        let before = transport.statistics.requestCount
        let response = try await transport.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true))
        #expect(response.status == 503)
        #expect(transport.statistics.requestCount - before == 4)
    }

    @Test func droppedConnectionsAreRetried() async throws {
        let server = try TestServers.fakeGCS()
        let name = "drop-\(UUID().uuidString)"
        try await TestServers.putObject(Data("still here".utf8), bucket: "transport", name: name, on: server, transport: transport)
        try await TestServers.injectFault(["method": "GET", "path_contains": name, "drop": true, "count": 1], on: server, transport: transport)
        let response = try await transport.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true))
        #expect(String(decoding: response.body, as: UTF8.self) == "still here")
    }

    @Test func aBodyCutMidwayReportsHowMuchReachedTheSink() async throws {
        let server = try TestServers.fakeGCS()
        let name = "cut-\(UUID().uuidString)"
        let payload = GeneratedBytes.data(200_000) { UInt8($0 % 251) }
        try await TestServers.putObject(payload, bucket: "transport", name: name, on: server, transport: transport)
        try await TestServers.injectFault(["method": "GET", "path_contains": name, "cut_after_bytes": 50_000, "count": 1], on: server, transport: transport)
        let received = Mutex(Data())
        do {
            _ = try await transport.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true)) { bytes in
                received.withLock { $0.append(contentsOf: bytes) }
            }
            Issue.record("a cut body must not look like success")
        } catch let TransportError.connectionLost(_, n) {
            #expect(n == 50_000)
            #expect(received.withLock { $0 } == payload.prefix(50_000))
        }
    }

    @Test func aStalledTransferTimesOut() async throws {
        let server = try TestServers.fakeGCS()
        let name = "stall-\(UUID().uuidString)"
        try await TestServers.putObject(Data("late".utf8), bucket: "transport", name: name, on: server, transport: transport)
        try await TestServers.injectFault(["method": "GET", "path_contains": name, "stall_seconds": 10, "count": 1], on: server, transport: transport)
        let impatient = Self.makeTransport(attempts: 1, stall: .seconds(1))
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: TransportError.self) {
            _ = try await impatient.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true))
        }
        // 1 s of stall timeout against a 10 s stall: the margin absorbs a loaded machine.
        #expect(clock.now - start < .seconds(6))
    }

    @Test func anUnreachableEndpointFailsAfterTheRetryBudget() async throws {
        // A port nobody listens on: bind, read the port, close.
        let port = try freePort()
        let before = transport.statistics.requestCount
        do {
            _ = try await transport.send(HTTPRequest(method: .get, url: "http://127.0.0.1:\(port)/x", isIdempotent: true))
            Issue.record("nothing listens there")
        } catch let TransportError.cannotConnect(message) {
            #expect(!message.isEmpty)
        }
        #expect(transport.statistics.requestCount - before == 4)
    }

    @Test func cancellationAbortsAnInFlightTransfer() async throws {
        let server = try TestServers.fakeGCS()
        let name = "cancel-\(UUID().uuidString)"
        try await TestServers.putObject(Data("never".utf8), bucket: "transport", name: name, on: server, transport: transport)
        try await TestServers.injectFault(["method": "GET", "path_contains": name, "stall_seconds": 10, "count": 1], on: server, transport: transport)
        let url = objectURL(server, name)
        let transport = self.transport
        let task = Task { try await transport.send(HTTPRequest(method: .get, url: url, isIdempotent: true)) }
        try await Task.sleep(for: .milliseconds(300))
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        await #expect(throws: TransportError.cancelled) { _ = try await task.value }
        // Well before the 10 s stall would have ended on its own.
        #expect(clock.now - start < .seconds(5))
    }

    @Test func connectionsAreReused() async throws {
        let server = try TestServers.fakeGCS()
        let name = "reuse-\(UUID().uuidString)"
        let fresh = Self.makeTransport()
        try await TestServers.putObject(Data("r".utf8), bucket: "transport", name: name, on: server, transport: fresh)
        for _ in 0..<5 {
            let response = try await fresh.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true))
            #expect(response.status == 200)
        }
        #expect(fresh.statistics.requestCount == 6)
        #expect(fresh.statistics.connectionsOpened == 1)
    }

    @Test func uploadsStreamFromAFileRegion() async throws {
        let server = try TestServers.fakeGCS()
        let name = "region-\(UUID().uuidString)"
        let path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        let content = GeneratedBytes.data(100_000) { UInt8($0 % 256) }
        #expect(FileManager.default.createFile(atPath: path, contents: content))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let body = RequestBody.concatenation([.bytes(Data("<".utf8)), .file(path: path, offset: 1000, length: 50_000), .bytes(Data(">".utf8))])
        #expect(body.length == 50_002)
        let put = try await transport.send(HTTPRequest(
            method: .post, url: "\(server)/upload/storage/v1/b/transport/o?uploadType=media&name=\(name)",
            body: body, isIdempotent: false))
        #expect(put.status == 200)
        let got = try await transport.send(HTTPRequest(method: .get, url: objectURL(server, name), isIdempotent: true))
        #expect(got.body == Data("<".utf8) + content[1000..<51_000] + Data(">".utf8))
    }
}
