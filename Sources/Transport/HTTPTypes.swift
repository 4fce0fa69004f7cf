import Foundation

/// An HTTP request as the storage layer describes it. The transport knows
/// nothing about Cloud Storage: it moves bytes, reuses connections and retries.
public struct HTTPRequest: Sendable {
    public enum Method: String, Sendable {
        case get = "GET", post = "POST", put = "PUT", patch = "PATCH", delete = "DELETE", head = "HEAD"
    }

    public var method: Method
    public var url: String
    public var headers: [String: String]
    public var body: RequestBody
    /// Whether the transport may send the request again after a retryable
    /// failure. Google's guidance: only idempotent requests, or requests made
    /// idempotent by a generation/metageneration precondition, are retried.
    public var isIdempotent: Bool
    /// Called on the transport thread with the number of body bytes sent so far.
    public var uploadProgress: (@Sendable (Int64) -> Void)?

    public init(
        method: Method, url: String, headers: [String: String] = [:],
        body: RequestBody = .none, isIdempotent: Bool,
        uploadProgress: (@Sendable (Int64) -> Void)? = nil
    ) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.isIdempotent = isIdempotent
        self.uploadProgress = uploadProgress
    }
}

/// A request body. Bodies stream from memory or from a region of a file
/// through curl's read callback, so a large upload never sits in memory.
public indirect enum RequestBody: Sendable {
    case none
    case bytes(Data)
    /// `length` bytes of the file at `path` starting at `offset`.
    case file(path: String, offset: Int64, length: Int64)
    /// The concatenation of several bodies (a multipart upload: JSON part,
    /// file region, closing boundary).
    case concatenation([RequestBody])
    /// A file still being written, from its start (`GrowingFile`): a body
    /// of unknown length, sent once only.
    case growing(GrowingFile)

    /// The length, counting a growing file as empty (`isOfUnknownLength`).
    public var length: Int64 {
        switch self {
        case .none, .growing: return 0
        case .bytes(let data): return Int64(data.count)
        case .file(_, _, let length): return length
        case .concatenation(let parts): return parts.reduce(0) { $0 + $1.length }
        }
    }

    /// The growing file in the body, if there is one.
    var growingFile: GrowingFile? {
        switch self {
        case .growing(let file): return file
        case .concatenation(let parts): return parts.lazy.compactMap(\.growingFile).first
        case .none, .bytes, .file: return nil
        }
    }

    /// Whether the length is known only once the body ends (it holds a
    /// growing file).
    public var isOfUnknownLength: Bool { growingFile != nil }
}

/// Response headers, looked up case-insensitively.
public struct HTTPHeaders: Sendable, Equatable {
    private var fields: [String: String] = [:]

    public init(_ pairs: [(String, String)] = []) {
        for (name, value) in pairs { self[name] = value }
    }

    public subscript(name: String) -> String? {
        get { fields[name.lowercased()] }
        set { fields[name.lowercased()] = newValue }
    }

    public var all: [String: String] { fields }
}

public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    /// The body, unless it was streamed to a sink (a successful streamed
    /// response has an empty body here; an error response is always buffered
    /// so that the server's message can be reported).
    public var body: Data
    /// How many times the transport sent the request to get this answer (a
    /// precondition failing on a resend may be the first attempt's doing).
    public var attempts = 1
    /// How long the answer's first byte took, counted from when the request
    /// went out on its connection (connecting excluded): one round trip
    /// plus the server's time. Nil for a request with a body (GET, HEAD
    /// and DELETE only: curl times an upload's start, not its answer) and
    /// where curl could not say.
    public var timeToFirstByte: Duration?

    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: Data = Data()) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var isSuccess: Bool { (200..<300).contains(status) }
}

/// Receives the body of a successful (2xx) response as it arrives, on the
/// transport's thread. Throwing aborts the transfer with that error.
public typealias ResponseBodySink = @Sendable (UnsafeRawBufferPointer) throws -> Void
