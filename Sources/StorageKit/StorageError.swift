import Foundation
import Transport

/// The Firebase Storage error codes (`StorageErrorCode` in the SDK), with
/// the SDK's raw values, so code written against Firebase can compare them.
public enum StorageErrorCode: Int, Sendable, CaseIterable {
    case unknown = -13000
    case objectNotFound = -13010
    case bucketNotFound = -13011
    case projectNotFound = -13012
    case quotaExceeded = -13013
    case unauthenticated = -13020
    case unauthorized = -13021
    case retryLimitExceeded = -13030
    case nonMatchingChecksum = -13031
    case downloadSizeExceeded = -13032
    case cancelled = -13040
    case invalidArgument = -13050
    /// Not in Firebase (which has no preconditions): a generation or
    /// metageneration precondition did not hold (HTTP 412).
    case preconditionFailed = -13060
}

/// What the server answered, kept for diagnosis: the status, the message of
/// its JSON error (`{"error":{"code":…,"message":…}}`) when there is one,
/// and the start of the body. Response headers are not kept, so nothing
/// credential-like can leak through an error.
public struct ServerResponse: Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    /// `error.message` of a JSON error body.
    public let message: String?
    /// `error.errors[0].reason` of a JSON error body (e.g. "notFound").
    public let reason: String?
    /// `error.errors[0].domain` of a JSON error body (e.g. "global",
    /// "usageLimits").
    public let domain: String?
    /// The body as text, cut at `maxBodyText` characters.
    public let bodyText: String

    static let maxBodyText = 2048

    public init(
        status: Int, message: String? = nil, reason: String? = nil, domain: String? = nil, bodyText: String = ""
    ) {
        self.status = status
        self.message = message
        self.reason = reason
        self.domain = domain
        self.bodyText = bodyText
    }

    public init(_ response: HTTPResponse) {
        var message: String?
        var reason: String?
        var domain: String?
        if let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any],
           let error = json["error"] as? [String: Any] {
            message = error["message"] as? String
            let first = (error["errors"] as? [[String: Any]])?.first
            reason = first?["reason"] as? String
            domain = first?["domain"] as? String
        } else if let json = try? JSONSerialization.jsonObject(with: response.body) as? [String: Any] {
            // OAuth-style errors: {"error": "invalid_grant", "error_description": "…"}
            message = (json["error_description"] as? String) ?? (json["error"] as? String)
        }
        let text = String(decoding: response.body.prefix(Self.maxBodyText * 4), as: UTF8.self)
        self.init(
            status: response.status, message: message, reason: reason, domain: domain,
            bodyText: String(text.prefix(Self.maxBodyText)))
    }

    /// The most useful single line: the JSON message, else the body, else
    /// the status.
    public var summary: String {
        if let message, !message.isEmpty { return message }
        let trimmed = bodyText.trimmingCharacters(in: .whitespacesAndNewlines)
        if !trimmed.isEmpty { return String(trimmed.prefix(200)) }
        return "HTTP \(status)"
    }

    public var description: String { "HTTP \(status): \(StorageError.redact(summary))" }
}

/// Errors of StorageKit, in the Firebase SDK's vocabulary. String payloads
/// are human-readable and include the server's message where the error came
/// from the server.
public enum StorageError: Error, Sendable {
    /// Anything else; `response` is the server's answer when there was one.
    case unknown(message: String, response: ServerResponse?)
    /// No object at the path (the payload is the object's path).
    case objectNotFound(String)
    /// No such bucket (the payload is the bucket's name).
    case bucketNotFound(String)
    /// Too many requests (HTTP 429) or a quota/rate limit (the server's message).
    case quotaExceeded(String)
    /// No credentials, or the server refused them (HTTP 401).
    case unauthenticated(String)
    /// The credentials may not do this (HTTP 403).
    case unauthorized(String)
    /// A transient failure (connection, timeout, HTTP 408/5xx) survived all retries.
    case retryLimitExceeded(String)
    /// The downloaded bytes do not match the checksum the server announced.
    case nonMatchingChecksum
    /// The object is larger than the caller's limit.
    case downloadSizeExceeded(total: Int64, maxSize: Int64)
    /// The operation was cancelled by the caller.
    case cancelled
    /// A bad path, URL, argument or request (HTTP 400).
    case invalidArgument(String)
    /// A generation/metageneration precondition did not hold (HTTP 412):
    /// the object changed underneath.
    case preconditionFailed(String)

    public var code: StorageErrorCode {
        switch self {
        case .unknown: return .unknown
        case .objectNotFound: return .objectNotFound
        case .bucketNotFound: return .bucketNotFound
        case .quotaExceeded: return .quotaExceeded
        case .unauthenticated: return .unauthenticated
        case .unauthorized: return .unauthorized
        case .retryLimitExceeded: return .retryLimitExceeded
        case .nonMatchingChecksum: return .nonMatchingChecksum
        case .downloadSizeExceeded: return .downloadSizeExceeded
        case .cancelled: return .cancelled
        case .invalidArgument: return .invalidArgument
        case .preconditionFailed: return .preconditionFailed
        }
    }

    /// The server's answer, for `.unknown` errors that came from it.
    public var serverResponse: ServerResponse? {
        if case .unknown(_, let response) = self { return response }
        return nil
    }

    /// Maps a non-2xx answer of the JSON API. `object` is the object the
    /// request addressed (nil for bucket-level requests such as list).
    /// 408 and 5xx are reported as `retryLimitExceeded` because the
    /// transport only hands them up once its retries are spent.
    ///
    /// The class comes from what was asked and from the error's structure
    /// (status, reason, domain), never from words in its message: messages
    /// quote bucket and object names ("Live version of object
    /// tb-bucket/cf/ does not exist." from storage-testbench), and a name
    /// may contain any word.
    public static func from(response: HTTPResponse, bucket: String, object: String?) -> StorageError {
        let server = ServerResponse(response)
        let said = redact(server.summary)
        switch response.status {
        case 400:
            return .invalidArgument(said)
        case 401:
            return .unauthenticated(said)
        case 403:
            if server.domain == "usageLimits" { return .quotaExceeded(said) }
            if let reason = server.reason, quotaReasons.contains(reason) { return .quotaExceeded(said) }
            return .unauthorized("\(target(bucket, object)): \(said)")
        case 404:
            // A bucket call (list, bucket metadata) that is not found has
            // no bucket; an object call has no object, unless the answer is
            // the one GCS gives for an object call into a missing bucket.
            guard let object, server.message != missingBucketMessage else { return .bucketNotFound(bucket) }
            return .objectNotFound(object)
        case 412:
            return .preconditionFailed("\(target(bucket, object)): \(said)")
        case 429:
            return .quotaExceeded(said)
        case 408, 500...599:
            return .retryLimitExceeded("HTTP \(response.status): \(said)")
        default:
            return .unknown(message: "HTTP \(response.status): \(said)", response: server)
        }
    }

    /// Reasons Cloud Storage gives with a 403 when a limit, not a
    /// permission, is the problem (domain "usageLimits"; see
    /// https://cloud.google.com/storage/docs/json_api/v1/status-codes).
    private static let quotaReasons: Set<String> = [
        "rateLimitExceeded", "userRateLimitExceeded", "quotaExceeded", "dailyLimitExceeded",
    ]

    /// GCS's whole message for an object call into a missing bucket. Its
    /// reason is "notFound" as for a missing object, so this fixed sentence,
    /// which quotes no name, is the only sign; it is compared whole.
    /// Servers that say it otherwise (fake-gcs-server's "Not Found" for
    /// both) read as a missing object; `bucketfs mount` learns of a missing
    /// bucket from its preflight listing, a bucket call.
    static let missingBucketMessage = "The specified bucket does not exist."

    private static func target(_ bucket: String, _ object: String?) -> String {
        object.map { "gs://\(bucket)/\($0)" } ?? "gs://\(bucket)"
    }

    /// Removes anything that looks like a credential from text that may be
    /// shown or logged: the value of an Authorization header, token-shaped
    /// values after `Bearer`/`Firebase`, JWTs, OAuth access tokens
    /// (`ya29.`), API keys, and `access_token=…` style parameters and JSON
    /// fields. Ordinary prose is kept: "Firebase Storage has no
    /// preconditions" names a product, not a credential, so only a value
    /// shaped like a token (`tokenShape`) counts after those words.
    static func redact(_ text: String) -> String {
        guard text.range(of: "bearer", options: .caseInsensitive) != nil
            || text.range(of: "token", options: .caseInsensitive) != nil
            || text.range(of: "authorization", options: .caseInsensitive) != nil
            || text.range(of: "signature", options: .caseInsensitive) != nil
            || text.range(of: "firebase", options: .caseInsensitive) != nil
            || text.range(of: "key=", options: .caseInsensitive) != nil
            || text.contains("eyJ") || text.contains("AIza") || text.contains("ya29.")
        else { return text }
        var result = text
        for pattern in redactions {
            result = result.replacingOccurrences(
                of: pattern.pattern, with: pattern.template, options: [.regularExpression, .caseInsensitive])
        }
        return result
    }

    /// A value that can be a bearer credential: at least 20 characters of
    /// the RFC 6750 `b64token` alphabet with a digit or a sign among them
    /// (tokens are random; words are letters). Google's access tokens are
    /// well over 100, Firebase ID tokens are JWTs of several hundred.
    private static let tokenShape = #"(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{20,}"#

    private static let redactions: [(pattern: String, template: String)] = [
        (#"(authorization\s*[:=]\s*)[^\r\n,;]+"#, "$1<redacted>"),
        (#"(\b(?:bearer|firebase)\s+)"# + tokenShape, "$1<redacted>"),
        // JWTs (Firebase ID and custom tokens), wherever they stand.
        (#"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"#, "<redacted>"),
        // Google OAuth 2.0 access tokens, wherever they stand.
        (#"\bya29\.[A-Za-z0-9._~+/=-]+"#, "<redacted>"),
        // API keys: a `key=` query parameter, and Google's key format.
        (#"([?&]key=)[^&\s"']+"#, "$1<redacted>"),
        (#"AIza[0-9A-Za-z_-]{35}"#, "<redacted>"),
        (#"((?:access_token|id_token|refresh_token|token|x-goog-signature|signature)["']?\s*[:=]\s*["']?)[^"'&\s,}]+"#, "$1<redacted>"),
    ]
}

extension StorageError: CustomStringConvertible, LocalizedError, CustomNSError {
    public var description: String {
        switch self {
        case .unknown(let message, _): return "unknown error: \(Self.redact(message))"
        case .objectNotFound(let path): return "object \(path) does not exist"
        case .bucketNotFound(let bucket): return "bucket \(bucket) does not exist"
        case .quotaExceeded(let m): return "quota exceeded: \(Self.redact(m))"
        case .unauthenticated(let m): return "not authenticated: \(Self.redact(m))"
        case .unauthorized(let m): return "permission denied: \(Self.redact(m))"
        case .retryLimitExceeded(let m): return "retry limit exceeded: \(Self.redact(m))"
        case .nonMatchingChecksum: return "the downloaded data does not match the object's checksum"
        case .downloadSizeExceeded(let total, let maxSize):
            return "the object is \(total) bytes, more than the limit of \(maxSize) bytes"
        case .cancelled: return "cancelled"
        case .invalidArgument(let m): return "invalid argument: \(Self.redact(m))"
        case .preconditionFailed(let m): return "precondition failed (changed by someone else): \(Self.redact(m))"
        }
    }

    public var errorDescription: String? { description }

    public static var errorDomain: String { "FIRStorageErrorDomain" }

    /// The Firebase numeric code (`StorageErrorCode.rawValue`).
    public var errorCode: Int { code.rawValue }

    public var errorUserInfo: [String: Any] { [NSLocalizedDescriptionKey: description] }
}
