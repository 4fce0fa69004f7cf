import Foundation
import Synchronization
import Testing
@testable import Transport
import TestSupport

/// A request body that follows a file as it is written (`GrowingFile`),
/// against the fake GCS server on loopback (Tests/Servers/fake_gcs.py,
/// which decodes chunked bodies as Cloud Storage takes them): the bytes
/// arrive whole and in order across pauses, a writer that stops ends the
/// request, and a request cut short stores nothing.
@Suite struct GrowingBodyTests {
    let transport = TransportFaultTests.makeTransport(attempts: 1)

    /// A file of `count` patterned bytes, written in `pieces` equal steps.
    final class Writer: Sendable {
        let path: String
        let content: Data
        init(_ name: String, count: Int) {
            path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
            content = GeneratedBytes.data(count) { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 251) }
            FileManager.default.createFile(atPath: path, contents: nil)
        }
        /// Appends bytes [from, to) of `content`.
        func write(_ range: Range<Int>) throws {
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: content[range])
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    func upload(_ name: String, _ file: GrowingFile, on server: String) -> HTTPRequest {
        HTTPRequest(
            method: .post, url: "\(server)/upload/storage/v1/b/transport/o?uploadType=media&name=\(name)",
            body: .concatenation([.bytes(Data("<".utf8)), .growing(file), .bytes(Data(">".utf8))]), isIdempotent: true)
    }

    func object(_ server: String, _ name: String) async throws -> HTTPResponse {
        try await transport.send(HTTPRequest(method: .get, url: "\(server)/storage/v1/b/transport/o/\(name)?alt=media", isIdempotent: true))
    }

    // Checks semantics.md#parallel-uploads
    @Test func aRequestFollowsTheFileAcrossPausesAndEndsWhereTheFileEnds() async throws {
        let server = try TestServers.fakeGCS()
        let name = "growing-\(UUID().uuidString)"
        let writer = Writer(name, count: 3_000_000)
        let seen = Mutex(0)
        let file = GrowingFile(path: writer.path, maxWait: .seconds(10)) { bytes in seen.withLock { $0 += bytes.count } }
        #expect(upload(name, file, on: server).body.isOfUnknownLength)
        let request = Task { try await transport.send(upload(name, file, on: server)) }
        // Pieces with pauses between them: the transfer waits for each.
        let cuts = [0, 1, 700_000, 1_500_000, 2_999_999, 3_000_000]
        for (start, end) in zip(cuts, cuts.dropFirst()) {
            try writer.write(start..<end)
            file.extend(to: Int64(end))
            try await Task.sleep(for: .milliseconds(150))
        }
        file.finish(at: 3_000_000)
        let answer = try await request.value
        #expect(answer.status == 200, "\(String(decoding: answer.body, as: UTF8.self))")
        #expect(seen.withLock { $0 } == 3_000_000, "the observer saw every byte of the file once")
        let stored = try await object(server, name)
        #expect(stored.body == Data("<".utf8) + writer.content + Data(">".utf8))
    }

    // Checks semantics.md#parallel-uploads
    @Test func aWriterThatStopsEndsTheRequestAndNothingIsStored() async throws {
        let server = try TestServers.fakeGCS()
        let name = "stopped-\(UUID().uuidString)"
        let writer = Writer(name, count: 100_000)
        try writer.write(0..<50_000)
        let file = GrowingFile(path: writer.path, maxWait: .seconds(1))
        file.extend(to: 50_000)
        let clock = ContinuousClock()
        let start = clock.now
        // Retries allowed: a growing body is still sent once only.
        let patient = TransportFaultTests.makeTransport(attempts: 4)
        do {
            _ = try await patient.send(upload(name, file, on: server))
            Issue.record("a request whose file stopped growing succeeded")
        } catch let error as TransportError {
            // The body's own bound, not curl's 30 s low-speed limit.
            guard case .stalled(let message) = error, message.contains("waited longer than 1.00 s") else {
                Issue.record("not the body's wait: \(error)")
                return
            }
        }
        // 1 s of waiting (the engine looks at least once a second), with
        // room for a machine loaded by the suites running beside this one.
        #expect(clock.now - start < .seconds(25))
        #expect(patient.statistics.requestCount == 1, "sent once only")
        #expect(try await object(server, name).status == 404)
    }

    // Checks semantics.md#parallel-uploads
    @Test func aRequestCancelledMidBodyStoresNothing() async throws {
        let server = try TestServers.fakeGCS()
        let name = "cancelled-\(UUID().uuidString)"
        let writer = Writer(name, count: 1_000_000)
        try writer.write(0..<400_000)
        let file = GrowingFile(path: writer.path, maxWait: .seconds(30))
        file.extend(to: 400_000)
        let request = Task { try await transport.send(upload(name, file, on: server)) }
        try await Task.sleep(for: .milliseconds(300))
        request.cancel()
        await #expect(throws: TransportError.cancelled) { _ = try await request.value }
        #expect(try await object(server, name).status == 404)
    }
}
