import Foundation
import TestSupport
import Transport

/// Plain HTTP access to a GCS-like test server, bypassing StorageKit: uploads
/// test data and reads back what the server holds, so that a test checks
/// the server's state, never the code under test reporting on itself.
public struct DirectGCS: Sendable {
    /// Without a trailing slash.
    public let base: String
    public let bucket: String

    /// The bucket scripts/test.sh creates on the emulator.
    public static let emulatorBucket = "bucketfs-test"

    public static let transport = HTTPTransport(configuration: TransportConfiguration(
        connectTimeout: .seconds(5), stallTimeout: .seconds(60),
        retry: RetryPolicy(maxAttempts: 4, initialBackoff: .milliseconds(50), maxBackoff: .milliseconds(500), totalTimeout: .seconds(120))))

    public init(base: String, bucket: String) {
        self.base = base.hasSuffix("/") ? String(base.dropLast()) : base
        self.bucket = bucket
    }

    /// `bucket` on the server whose URL scripts/test.sh exports in `variable`.
    public init(_ variable: String, bucket: String) throws {
        self.init(base: try TestEnvironment.endpoint(variable), bucket: bucket)
    }

    public static func emulator() throws -> DirectGCS { try DirectGCS("BUCKETFS_TEST_EMULATOR", bucket: emulatorBucket) }
    public static func fake(bucket: String) throws -> DirectGCS { try DirectGCS("BUCKETFS_TEST_FAKE_GCS", bucket: bucket) }

    /// A new bucket on fake-gcs-server, which (unlike fake_gcs.py) creates
    /// buckets only when asked: `POST /storage/v1/b` with `{"name": …}`.
    public static func fakeGCSServer(newBucket bucket: String) async throws -> DirectGCS {
        let gcs = try DirectGCS("BUCKETFS_TEST_FAKE_GCS_SERVER", bucket: bucket)
        try await gcs.post("/storage/v1/b", json: ["name": bucket])
        return gcs
    }

    public static func encode(_ name: String) -> String {
        name.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? name
    }

    public func objectURL(_ name: String) -> String { "\(base)/storage/v1/b/\(bucket)/o/\(Self.encode(name))" }

    /// The start of an error message: what was asked, what came back.
    static func answer(_ request: String, _ response: HTTPResponse) -> String {
        "\(request) answered \(response.status): \(String(decoding: response.body.prefix(500), as: UTF8.self))"
    }

    /// Multipart upload with optional custom metadata, content type and
    /// content encoding.
    public func put(
        _ name: String, _ data: Data, metadata: [String: String] = [:], contentType: String = "application/octet-stream",
        contentEncoding: String? = nil
    ) async throws {
        let boundary = "directboundary\(UUID().uuidString.prefix(8))"
        var resource: [String: Any] = ["name": name, "contentType": contentType]
        if !metadata.isEmpty { resource["metadata"] = metadata }
        if let contentEncoding { resource["contentEncoding"] = contentEncoding }
        var body = Data("--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n".utf8)
        body += try JSONSerialization.data(withJSONObject: resource)
        body += Data("\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\n\r\n".utf8)
        body += data
        body += Data("\r\n--\(boundary)--\r\n".utf8)
        let response = try await Self.transport.send(HTTPRequest(
            method: .post, url: "\(base)/upload/storage/v1/b/\(bucket)/o?uploadType=multipart",
            headers: ["Content-Type": "multipart/related; boundary=\(boundary)"], body: .bytes(body), isIdempotent: false))
        guard response.status == 200 else { throw HarnessError(Self.answer("direct upload of \(name)", response)) }
    }

    /// Many small uploads, `width` at a time.
    public func putAll(_ objects: [(String, Data)], width: Int = 8) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            var iterator = objects.makeIterator()
            for _ in 0..<width {
                guard let (name, data) = iterator.next() else { break }
                group.addTask { try await put(name, data) }
            }
            while try await group.next() != nil {
                if let (name, data) = iterator.next() { group.addTask { try await put(name, data) } }
            }
        }
    }

    /// The object resource, or nil on 404.
    public func resource(_ name: String) async throws -> [String: Any]? {
        let response = try await Self.transport.send(HTTPRequest(method: .get, url: objectURL(name), isIdempotent: true))
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw HarnessError(Self.answer("GET \(name)", response)) }
        return try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
    }

    /// The object's bytes (`?alt=media`), or nil on 404.
    public func media(_ name: String) async throws -> Data? {
        let response = try await Self.transport.send(HTTPRequest(
            method: .get, url: objectURL(name) + "?alt=media", isIdempotent: true))
        if response.status == 404 { return nil }
        guard response.status == 200 else { throw HarnessError(Self.answer("GET \(name)?alt=media", response)) }
        return response.body
    }

    /// The object's bytes; throws on 404 too.
    public func download(_ name: String) async throws -> Data {
        guard let data = try await media(name) else { throw HarnessError("GET \(name)?alt=media answered 404") }
        return data
    }

    /// Names of every object whose name starts with `prefix` (no delimiter,
    /// so placeholders `dir/` and everything below are included), all pages.
    public func list(prefix: String) async throws -> [String] {
        try await listPages(prefix: prefix, delimiter: nil).items
    }

    /// Item names and prefixes directly below `prefix` (delimiter `/`), all pages.
    public func listFolder(prefix: String) async throws -> (items: [String], prefixes: [String]) {
        try await listPages(prefix: prefix, delimiter: "/")
    }

    private func listPages(prefix: String, delimiter: String?) async throws -> (items: [String], prefixes: [String]) {
        var items: [String] = []
        var prefixes: [String] = []
        var pageToken: String?
        repeat {
            var url = "\(base)/storage/v1/b/\(bucket)/o?prefix=\(Self.encode(prefix))&maxResults=1000"
            if let delimiter { url += "&delimiter=\(Self.encode(delimiter))" }
            if let pageToken { url += "&pageToken=\(Self.encode(pageToken))" }
            let response = try await Self.transport.send(HTTPRequest(method: .get, url: url, isIdempotent: true))
            guard response.status == 200,
                let page = try JSONSerialization.jsonObject(with: response.body) as? [String: Any]
            else { throw HarnessError(Self.answer("list of \(prefix)", response)) }
            items += (page["items"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String }
            prefixes += page["prefixes"] as? [String] ?? []
            pageToken = page["nextPageToken"] as? String
        } while pageToken != nil
        return (items.sorted(), prefixes.sorted())
    }

    /// A JSON POST to `path` on the server (a bucket to create, or a test
    /// server's control endpoint: `/_faults`, `/_retention`, …); throws
    /// unless it succeeds.
    public func post(_ path: String, json: [String: Any]) async throws {
        let response = try await Self.transport.send(HTTPRequest(
            method: .post, url: base + path, headers: ["Content-Type": "application/json"],
            body: .bytes(try JSONSerialization.data(withJSONObject: json)), isIdempotent: false))
        guard response.isSuccess else { throw HarnessError(Self.answer("POST \(path)", response)) }
    }

    /// fake_gcs.py only: registers a fault.
    public func fault(_ spec: [String: Any]) async throws { try await post("/_faults", json: spec) }

    /// fake_gcs.py only: the requests it has seen.
    public var requestLog: ServerRequestLog { ServerRequestLog(base + "/_requests") }

    /// fake_gcs.py only: every request it has seen, in order.
    public func requests() async throws -> [LoggedRequest] { try await requestLog.requests() }
}
