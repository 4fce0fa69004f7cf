import Foundation
import Transport
import TestSupport

/// The loopback servers `scripts/test.sh` starts. A missing one is a test
/// failure with instructions, never a skip.
enum TestServers {
    struct NotConfigured: Error, CustomStringConvertible {
        let variable: String
        var description: String { "\(variable) is not set: run the tests with scripts/test.sh" }
    }

    static func url(_ variable: String) throws -> String { try TestEnvironment.endpoint(variable) }

    static func fakeGCS() throws -> String { try url("BUCKETFS_TEST_FAKE_GCS") }

    /// Queues a fault on the fake GCS server for the next matching requests.
    static func injectFault(_ fault: [String: Any], on server: String, transport: HTTPTransport) async throws {
        let body = try JSONSerialization.data(withJSONObject: fault)
        let response = try await transport.send(HTTPRequest(
            method: .post, url: "\(server)/_faults", headers: ["Content-Type": "application/json"],
            body: .bytes(body), isIdempotent: false))
        guard response.isSuccess else { throw NotConfigured(variable: "fault injection answered \(response.status)") }
    }

    /// Stores `data` as object `name` of bucket `bucket` on the fake server.
    static func putObject(_ data: Data, bucket: String, name: String, on server: String, transport: HTTPTransport) async throws {
        let encoded = name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
        let response = try await transport.send(HTTPRequest(
            method: .post, url: "\(server)/upload/storage/v1/b/\(bucket)/o?uploadType=media&name=\(encoded)",
            headers: ["Content-Type": "application/octet-stream"], body: .bytes(data), isIdempotent: false))
        guard response.isSuccess else { throw NotConfigured(variable: "upload answered \(response.status)") }
    }
}
