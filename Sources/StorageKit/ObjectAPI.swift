import Foundation
import Transport

/// The requests StorageKit makes, in one place: URLs, authorization, and
/// the translation of HTTP and transport failures into `StorageError`.
/// Everything above it speaks references and metadata.
///
/// Two dialects share it (the credentials choose, `StorageDialect`): the
/// Cloud Storage JSON API and the Firebase Storage REST API (v0). Their
/// URLs differ here; what else differs (uploads, preconditions, copy) is
/// in `ObjectAPI+Firebase.swift`.
struct ObjectAPI: Sendable {
    let storage: Storage
    let configuration: StorageConfiguration

    init(storage: Storage) {
        self.storage = storage
        self.configuration = storage.configuration
    }

    var transport: HTTPTransport { configuration.transport }
    var bucket: String { storage.bucket }
    var dialect: StorageDialect { configuration.dialect }

    // MARK: URLs

    private var base: String {
        let s = configuration.endpoint.absoluteString
        return s.hasSuffix("/") ? String(s.dropLast()) : s
    }

    /// Percent-encodes everything but RFC 3986 unreserved characters, so
    /// that `/`, `#`, `?`, spaces and unicode survive as one path segment.
    static func encode(_ component: String) -> String {
        component.addingPercentEncoding(withAllowedCharacters: unreserved) ?? component
    }

    private static let unreserved = CharacterSet(
        charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")

    static func query(_ items: [(String, String?)]) -> String {
        let parts = items.compactMap { key, value in value.map { "\(key)=\(encode($0))" } }
        return parts.isEmpty ? "" : "?" + parts.joined(separator: "&")
    }

    /// `/storage/v1/b/BUCKET` (JSON API) or `/v0/b/BUCKET` (Firebase).
    func bucketURL() -> String {
        switch dialect {
        case .jsonAPI: return "\(base)/storage/v1/b/\(Self.encode(bucket))"
        case .firebase: return "\(base)/v0/b/\(Self.encode(bucket))"
        }
    }

    func objectURL(_ name: String, _ query: [(String, String?)] = []) -> String {
        "\(bucketURL())/o/\(Self.encode(name))\(Self.query(query))"
    }

    func listURL(_ query: [(String, String?)]) -> String { "\(bucketURL())/o\(Self.query(query))" }

    /// The JSON API's `fields` for a listing: only what `StorageMetadata`
    /// reads of each item. A listed object resource also carries links, an
    /// id, an etag, a storage class and its time, about half of its bytes:
    /// a million of them cost seconds of JSON parsing for nothing. Nil for
    /// Firebase's v0 API, which has no partial responses.
    func listingFields(prefixes: Bool) -> String? {
        guard dialect == .jsonAPI else { return nil }
        return (prefixes ? "prefixes," : "") + "nextPageToken,items(\(StorageMetadata.resourceFields))"
    }

    /// Where uploads start: the JSON API's upload path, or (Firebase) the
    /// object collection itself.
    func uploadURL(_ query: [(String, String?)]) -> String {
        switch dialect {
        case .jsonAPI: return "\(base)/upload/storage/v1/b/\(Self.encode(bucket))/o\(Self.query(query))"
        case .firebase: return listURL(query)
        }
    }

    func rewriteURL(from source: String, to destination: String, _ query: [(String, String?)]) -> String {
        "\(bucketURL())/o/\(Self.encode(source))/rewriteTo/b/\(Self.encode(bucket))/o/\(Self.encode(destination))\(Self.query(query))"
    }

    // MARK: sending

    /// Sends with authorization; a 401 invalidates the cached token and is
    /// tried once more with a fresh one. Non-2xx answers throw the mapped
    /// `StorageError` unless `accepting` lists the status.
    func send(
        _ request: HTTPRequest, object: String?, accepting: Set<Int> = [],
        sink: ResponseBodySink? = nil
    ) async throws(StorageError) -> HTTPResponse {
        if let object { try Self.checkReachable(object, configuration) }
        var refreshed = false
        while true {
            var authorized = billed(request)
            do {
                if let header = try await configuration.credentials.authorizationHeader() {
                    authorized.headers["Authorization"] = header
                }
            } catch {
                throw StorageError.unauthenticated(String(describing: error))
            }
            let response: HTTPResponse
            do {
                if let sink {
                    response = try await transport.send(authorized, sink: sink)
                } else {
                    response = try await transport.send(authorized)
                }
            } catch {
                throw Self.map(error)
            }
            storage.noteAnswer(response)
            if response.status == 401 && !refreshed {
                refreshed = true
                await configuration.credentials.invalidate()
                continue
            }
            if response.isSuccess || accepting.contains(response.status) { return response }
            throw StorageError.from(response: response, bucket: bucket, object: object)
        }
    }

    /// The request with the projects to charge: the credentials' quota
    /// project as `x-goog-user-project`
    /// (https://cloud.google.com/apis/docs/system-parameters), and the
    /// billing project of a requester-pays bucket as `userProject` on the
    /// JSON API's URLs (https://cloud.google.com/storage/docs/requester-pays).
    /// Firebase's v0 API knows neither.
    private func billed(_ request: HTTPRequest) -> HTTPRequest {
        guard dialect == .jsonAPI else { return request }
        var billed = request
        if let project = configuration.credentials.quotaProject {
            billed.headers["x-goog-user-project"] = project
        }
        if let project = configuration.billingProject, billed.url.hasPrefix(base + "/"),
           !billed.url.contains("userProject=") {
            billed.url += (billed.url.contains("?") ? "&" : "?") + "userProject=" + Self.encode(project)
        }
        return billed
    }

    /// The Firebase Storage emulator decodes an object's path segment twice
    /// (Express decodes `req.params`, then firebase-tools calls
    /// `decodeURIComponent` on it again: src/emulator/storage/apis/firebase.ts),
    /// where production decodes once. A name with `%` in it is therefore
    /// another name there (`a%41.txt` is `aA.txt`) or a 500 (`100%.txt`,
    /// which the emulator fails on every time). Encoding such names twice
    /// would be right for the emulator only and wrong for anything else
    /// answering over http, so they are refused at once instead, before any
    /// request (uploads too, whose `?name=` is decoded once: the object
    /// could not be read back).
    static func checkReachable(_ object: String, _ configuration: StorageConfiguration) throws(StorageError) {
        guard configuration.isFirebaseEmulator, object.contains("%") else { return }
        throw StorageError.invalidArgument(
            "\(object): the Firebase Storage emulator decodes object names twice, so a name containing % cannot be used there")
    }

    /// A transport failure that survived the retry budget.
    static func map(_ error: any Error) -> StorageError {
        switch error {
        case let e as StorageError: return e
        case TransportError.cancelled: return .cancelled
        case let e as TransportError: return .retryLimitExceeded(e.description)
        default:
            if error is CancellationError { return .cancelled }
            return .unknown(message: String(describing: error), response: nil)
        }
    }

    /// Decodes a JSON object body.
    static func json(_ response: HTTPResponse) throws(StorageError) -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] else {
            throw StorageError.unknown(
                message: "the server's answer is not a JSON object",
                response: ServerResponse(response))
        }
        return object
    }

    /// A request body: keys sorted. Objects of strings, null, booleans,
    /// integers and objects of those (every upload and patch body) are
    /// written directly; JSONSerialization (slow on Linux: a third of an
    /// upload's client time for a small file went to it) takes the rest.
    static func jsonBody(_ object: [String: Any]) -> Data {
        var text = ""
        if JSONText.append(object, to: &text) { return Data(text.utf8) }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data("{}".utf8)
    }
}

/// The small JSON writer behind `ObjectAPI.jsonBody`.
enum JSONText {
    /// Appends `value` as JSON; false (and `text` unusable) for a value it
    /// does not write.
    static func append(_ value: Any, to text: inout String) -> Bool {
        switch value {
        case let string as String:
            appendString(string, to: &text)
        case is NSNull:
            text += "null"
        case let flag as Bool:
            text += flag ? "true" : "false"
        case let number as Int:
            text += String(number)
        case let number as Int64:
            text += String(number)
        case let object as [String: String]:
            // (Before [String: Any]: a [String: Any] of strings also casts
            // to [String: String], so the other order would loop.)
            text += "{"
            for (index, key) in object.keys.sorted().enumerated() {
                if index > 0 { text += "," }
                appendString(key, to: &text)
                text += ":"
                appendString(object[key]!, to: &text)
            }
            text += "}"
        case let object as [String: Any]:
            text += "{"
            for (index, key) in object.keys.sorted().enumerated() {
                if index > 0 { text += "," }
                appendString(key, to: &text)
                text += ":"
                guard append(object[key]!, to: &text) else { return false }
            }
            text += "}"
        default:
            return false
        }
        return true
    }

    /// A JSON string literal: quotes, backslashes and control characters
    /// escaped, everything else as is (UTF-8).
    static func appendString(_ string: String, to text: inout String) {
        text += "\""
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                text.unicodeScalars.append(scalar)
            }
        }
        text += "\""
    }
}
