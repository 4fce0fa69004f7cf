import Foundation
import Synchronization
import Transport

/// One resumable upload session of the JSON API, shared by `Uploader`
/// (whose total is known from the start) and `StreamingUpload` (whose total
/// is known only at the end).
///
/// The protocol: a POST starts the session and answers with its URI; each
/// PUT carries `Content-Range: bytes a-b/total` (`/*` while the total is
/// unknown) and is answered 308 with the server's offset in `Range`, until
/// the PUT that completes the total is answered with the object.
/// `bytes */total` (or `bytes */*`) asks for the offset without sending.
/// Every chunk but the last must be a multiple of 256 KiB.
///
/// A chunk that fails for a retryable reason (connection trouble, 408,
/// 429, 5xx) or is refused because the server's offset differs (400) is
/// handled as Google recommends: wait, ask the server for its offset, adopt
/// it and go on from there, within the transport's retry policy counted
/// from the last progress (see `send`).
final class ResumableSession: Sendable {
    static let granularity: Int64 = 256 * 1024

    private let api: ObjectAPI
    private let object: String
    private let source: UploadSource
    /// The configured chunk size, rounded down to the granularity.
    private let chunkSize: Int64

    private struct State {
        var uri: String?
        var acknowledged: Int64 = 0
        var resource: UploadResource?
    }

    private let state = Mutex(State())

    init(reference: StorageReference, source: UploadSource) {
        self.api = reference.api
        self.object = reference.fullPath
        self.source = source
        let configured = api.configuration.uploadChunkSize
        self.chunkSize = max(Self.granularity, configured / Self.granularity * Self.granularity)
    }

    /// Bytes the server has acknowledged.
    var acknowledged: Int64 { state.withLock { $0.acknowledged } }

    var isStarted: Bool { state.withLock { $0.uri != nil } }

    /// Starts the session. `declaredLength` is the total when it is known
    /// (`X-Upload-Content-Length`), nil for a streaming upload. A 412 here
    /// means the precondition already fails.
    func start(_ resource: UploadResource, ifGenerationMatch: Int64?, declaredLength: Int64?) async throws {
        let url = api.uploadURL([
            ("uploadType", "resumable"), ("name", object),
            ("ifGenerationMatch", ifGenerationMatch.map(String.init)),
        ])
        var headers = ["Content-Type": "application/json; charset=UTF-8", "X-Upload-Content-Type": resource.contentType]
        if let declaredLength { headers["X-Upload-Content-Length"] = String(declaredLength) }
        let request = HTTPRequest(method: .post, url: url, headers: headers, body: .bytes(resource.json), isIdempotent: true)
        let response = try await api.send(request, object: object)
        guard let location = response.headers["location"] else {
            throw StorageError.unknown(message: "resumable upload started without a session URI", response: ServerResponse(response))
        }
        state.withLock { $0 = State(uri: location, acknowledged: 0, resource: resource) }
    }

    /// Sends bytes [acknowledged, end) of the source in chunks, the total
    /// still unknown; returns once the server has everything below `end`.
    func append(upTo end: Int64) async throws {
        if try await send(upTo: end, total: nil, progress: { _ in }) != nil {
            throw StorageError.unknown(message: "the server finished the upload of \(object) before its end was sent", response: nil)
        }
    }

    /// Sends bytes [acknowledged, total) of the source in chunks (none, if
    /// the server has them all: then an empty `bytes */total` finalises
    /// the session) and returns the object's metadata.
    func finish(total: Int64, progress: @escaping @Sendable (Int64) -> Void = { _ in }) async throws -> StorageMetadata {
        guard let done = try await send(upTo: total, total: total, progress: progress) else {
            throw StorageError.unknown(message: "the resumable upload of \(object) ended without the object", response: nil)
        }
        return done
    }

    /// The loop behind `append` and `finish`: with `total` nil it returns
    /// nil once the server has everything below `end`; with `total` (then
    /// equal to `end`) it goes on until the server answers with the object.
    ///
    /// Retries: a chunk or status query that fails for a retryable reason
    /// (`isRetryableUploadFailure`), or a chunk the server refuses because
    /// its offset differs, is followed by a wait (the transport's backoff),
    /// a status query, and the next chunk from the offset the server
    /// reports. The retry budget (the transport policy's attempts and total
    /// time) counts failures since the last byte the server acknowledged:
    /// a long upload through a flaky network never gives up while it makes
    /// progress. Chunks and queries are sent once each by the transport
    /// (not idempotent there), so its retries never multiply with these.
    private func send(
        upTo end: Int64, total: Int64?, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> StorageMetadata? {
        let uri = try sessionURI()
        var budget = RetryBudget(policy: api.transport.configuration.retry)
        var queryFirst = false
        while true {
            try Task.checkCancellation()
            let before = acknowledged
            do {
                if queryFirst, let done = try await queryStatus(uri, total: total) { return done }
                queryFirst = false
                let offset = acknowledged
                if total == nil && offset >= end { return nil }
                guard offset <= end else {
                    throw StorageError.invalidArgument("the server holds \(offset) bytes of \(object), more than the \(end) to send")
                }
                let chunkEnd = min(offset + chunkSize, end)
                if let done = try await sendChunk(uri, offset..<chunkEnd, total: total, progress: progress) { return done }
                // A 308 that kept nothing would loop forever; spend the
                // retry budget on it like on any other refused chunk.
                guard acknowledged > offset else {
                    throw StorageError.invalidArgument("the server kept none of bytes \(offset)..<\(chunkEnd)")
                }
                budget.reset()
                progress(acknowledged)
            } catch StorageError.objectNotFound(let name) where total != nil {
                // Some servers forget a session once it has completed (GCS
                // answers with the object; the emulator with 404). If the
                // last chunk's answer was lost, the object is there: ours
                // if it holds exactly these bytes and metadata.
                guard let total, let done = await storedAlready(total: total) else { throw StorageError.objectNotFound(name) }
                return done
            } catch let error as StorageError where error.isRetryableUploadFailure || error.isOffsetDisagreement {
                // Either the request did not get through, or the server
                // holds a different number of bytes than we thought (a cut
                // chunk may have landed in part): ask it, go on from there.
                if acknowledged > before { budget.reset() }
                guard let delay = budget.nextDelay() else { throw error }
                api.storage.logger.debug("retrying upload chunk", metadata: [
                    "object": "\(object)", "offset": "\(acknowledged)", "failures": "\(budget.failures)",
                    "delay": "\(delay)", "error": "\(error)",
                ])
                try await Task.sleep(for: delay)
                queryFirst = true
            }
        }
    }

    /// Asks the server how many bytes of the session it has (`bytes */*`
    /// while the total is unknown); returns the object's metadata when the
    /// session is already finalised, or is finalised by this query (all of
    /// a known total arrived). Retried within the transport's policy.
    func queryStatus(total: Int64?) async throws -> StorageMetadata? {
        let uri = try sessionURI()
        var budget = RetryBudget(policy: api.transport.configuration.retry)
        while true {
            do {
                return try await queryStatus(uri, total: total)
            } catch let error as StorageError where error.isRetryableUploadFailure {
                guard let delay = budget.nextDelay() else { throw error }
                try await Task.sleep(for: delay)
            }
        }
    }

    /// One status query, sent once (its caller retries).
    private func queryStatus(_ uri: String, total: Int64?) async throws -> StorageMetadata? {
        let request = HTTPRequest(
            method: .put, url: uri, headers: ["Content-Range": "bytes */\(Self.totalLabel(total))"],
            isIdempotent: false)
        return try handleSessionResponse(await api.send(request, object: object, accepting: [308]))
    }

    /// The live object, if an earlier attempt of this session stored it.
    private func storedAlready(total: Int64) async -> StorageMetadata? {
        guard let resource = state.withLock({ $0.resource }) else { return nil }
        return await source.storedObject(object, api: api, total: total, customMetadata: resource.customMetadata)
    }

    /// Tells the server to drop the session (best effort: one attempt, as
    /// an unfinished session expires on its own after a week, and a server
    /// without DELETE on sessions, like the emulator's 501, would otherwise
    /// hold the caller through the whole retry schedule).
    func abandon() async {
        guard let uri = state.withLock({ $0.uri }) else { return }
        _ = try? await api.send(HTTPRequest(method: .delete, url: uri, isIdempotent: false), object: object, accepting: [499])
    }

    // MARK: internals

    private func sessionURI() throws -> String {
        guard let uri = state.withLock({ $0.uri }) else {
            throw StorageError.invalidArgument("the resumable upload of \(object) has not started")
        }
        return uri
    }

    private static func totalLabel(_ total: Int64?) -> String { total.map(String.init) ?? "*" }

    /// Sends one chunk (an empty one: the status query that finalises a
    /// known total); returns the object's metadata once the last byte is in.
    private func sendChunk(
        _ uri: String, _ range: Range<Int64>, total: Int64?, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> StorageMetadata? {
        let label = Self.totalLabel(total)
        let contentRange = range.isEmpty ? "bytes */\(label)" : "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(label)"
        let start = range.lowerBound
        let request = HTTPRequest(
            method: .put, url: uri, headers: ["Content-Range": contentRange],
            body: source.body(range), isIdempotent: false,
            uploadProgress: Uploader.throttled(total: range.upperBound - start) { sent in progress(start + sent) })
        return try handleSessionResponse(await api.send(request, object: object, accepting: [308]))
    }

    /// 308: the server has bytes 0...N (its `Range` header; none means
    /// none). 200/201: the object exists and this is its metadata.
    private func handleSessionResponse(_ response: HTTPResponse) throws -> StorageMetadata? {
        if response.status == 308 {
            let persisted = response.headers["range"].flatMap(Self.lastByte).map { $0 + 1 } ?? 0
            state.withLock { $0.acknowledged = persisted }
            return nil
        }
        let metadata = try StorageMetadata(resource: ObjectAPI.json(response))
        state.withLock { $0.acknowledged = metadata.size }
        return metadata
    }

    /// `bytes=0-1234` → 1234.
    static func lastByte(_ range: String) -> Int64? {
        range.split(separator: "-").last.flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
    }
}

/// What an upload sends besides the bytes: the JSON resource (name,
/// content type, metadata) and the content type on its own.
struct UploadResource: Sendable {
    let json: Data
    let contentType: String
    /// The custom metadata sent, to recognise an object an earlier attempt stored.
    let customMetadata: [String: String]

    init(metadata: StorageMetadata, name: String) {
        contentType = metadata.contentType ?? "application/octet-stream"
        customMetadata = metadata.customMetadata ?? [:]
        var resource = metadata.uploadJSON(name: name)
        resource["contentType"] = contentType
        json = ObjectAPI.jsonBody(resource)
    }
}

extension StorageError {
    /// Failures after which a resumable upload asks the server for its
    /// offset and goes on: connection trouble, timeouts, server errors and
    /// rate limits (429, which the transport hands up at once for a
    /// request it may not resend itself).
    var isRetryableUploadFailure: Bool {
        switch self {
        case .retryLimitExceeded, .quotaExceeded: return true
        default: return false
        }
    }

    /// A 400 on a chunk: the server's offset is not the one the chunk
    /// started at.
    var isOffsetDisagreement: Bool {
        if case .invalidArgument = self { return true }
        return false
    }
}
