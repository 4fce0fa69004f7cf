import Foundation
import TestSupport
import Transport

/// The log of requests a test server keeps and serves over HTTP:
/// fake_gcs.py and fault_proxy.py at `/_requests`, firebase_emulator.py's v0
/// requests at `/_firebase/requests`. A GET answers a JSON list of objects,
/// one per request, in order; a POST to `…/clear` empties it.
public struct ServerRequestLog: Sendable {
    public let url: String

    public init(_ url: String) { self.url = url }

    /// Every logged request, as the server wrote it.
    public func entries() async throws -> [[String: Any]] {
        let response = try await DirectGCS.transport.send(HTTPRequest(method: .get, url: url, isIdempotent: true))
        guard response.status == 200, let list = try JSONSerialization.jsonObject(with: response.body) as? [[String: Any]] else {
            throw HarnessError(DirectGCS.answer("GET \(url)", response))
        }
        return list
    }

    /// Every logged request, typed.
    public func requests() async throws -> [LoggedRequest] { try await entries().map(LoggedRequest.init(json:)) }

    public func clear() async throws {
        let response = try await DirectGCS.transport.send(HTTPRequest(method: .post, url: url + "/clear", isIdempotent: false))
        guard response.isSuccess else { throw HarnessError(DirectGCS.answer("POST \(url)/clear", response)) }
    }
}

/// One request a test server logged: from a `ServerRequestLog`, or a line of
/// the emulator's request log file.
public struct LoggedRequest: Sendable, CustomStringConvertible {
    public let method: String
    /// As sent (URL-encoded).
    public let path: String
    public let query: String
    /// The Range header as sent ("bytes=0-1048575"), nil if none (the
    /// emulator and fault_proxy.py).
    public var byteRange: String?
    /// fake_gcs.py only: the Authorization and x-goog-user-project headers.
    public var authorization: String?
    public var userProject: String?
    /// fault_proxy.py only: when the request arrived and when its answer was
    /// sent (nil: not yet), in seconds, and the fault applied to it.
    public var time: Double?
    public var done: Double?
    public var fault: String?
    /// fault_proxy.py only: the body came with chunked transfer encoding
    /// (its length unknown when the request started).
    public var chunked = false

    public init(
        method: String, path: String, query: String, byteRange: String? = nil, authorization: String? = nil,
        userProject: String? = nil, time: Double? = nil, done: Double? = nil, fault: String? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.byteRange = byteRange
        self.authorization = authorization
        self.userProject = userProject
        self.time = time
        self.done = done
        self.fault = fault
    }

    /// From an entry of a server's JSON log.
    public init(json: [String: Any]) {
        self.init(
            method: json["method"] as? String ?? "", path: json["path"] as? String ?? "", query: json["query"] as? String ?? "",
            byteRange: json["range"] as? String, authorization: json["authorization"] as? String,
            userProject: json["userProject"] as? String, time: json["time"] as? Double, done: json["done"] as? Double,
            fault: json["fault"] as? String)
        chunked = json["chunked"] as? Bool ?? false
    }

    public var decodedPath: String { path.removingPercentEncoding ?? path }

    public func parameter(_ key: String) -> String? {
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2, parts[0] == key else { continue }
            return String(parts[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        return nil
    }

    /// A list request (GET .../b/B/o) for exactly `prefix`.
    public func isList(prefix: String) -> Bool {
        method == "GET" && path.hasSuffix("/o") && parameter("prefix") == prefix
    }

    /// The object a metadata or media request names, if any.
    public var objectName: String? {
        guard let range = decodedPath.range(of: "/o/") else { return nil }
        return String(decodedPath[range.upperBound...])
    }

    /// A request on one object (metadata or media) strictly below `prefix`
    /// (not the `prefix` placeholder itself).
    public func touchesObject(under prefix: String) -> Bool {
        guard let name = objectName else { return false }
        return name.hasPrefix(prefix) && name.count > prefix.count
    }

    public var description: String { "\(method) \(path)?\(query)" }
}
