import Foundation
import Synchronization
import Transport

/// One resumable upload session, shared by `Uploader` (whose total is
/// known from the start) and `StreamingUpload` (whose total is known only
/// at the end). The wire protocol is the dialect's (`ResumableWire`):
/// the JSON API's `Content-Range` chunks answered 308, or Firebase's
/// `X-Goog-Upload-Command` chunks; the loop here is the same for both.
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
    private let wire: any ResumableWire
    /// The configured chunk size, rounded down to the granularity.
    private let chunkSize: Int64

    private struct State {
        var uri: String?
        var acknowledged: Int64 = 0
        /// The start's `ifGenerationMatch`, for a wire that must check it
        /// again itself before the object is made.
        var ifGenerationMatch: Int64?
        var resource: UploadResource?
    }

    private let state = Mutex(State())

    init(reference: StorageReference, source: UploadSource) {
        self.api = reference.api
        self.object = reference.fullPath
        self.source = source
        self.wire = api.dialect == .firebase ? FirebaseResumableWire(api: api, object: object) as any ResumableWire
            : JSONResumableWire(api: api, object: object)
        let configured = api.configuration.uploadChunkSize
        self.chunkSize = max(Self.granularity, configured / Self.granularity * Self.granularity)
    }

    /// Bytes the server has acknowledged.
    var acknowledged: Int64 { state.withLock { $0.acknowledged } }

    var isStarted: Bool { state.withLock { $0.uri != nil } }

    /// The session's URI once started: what another run needs to resume it.
    var uri: String? { state.withLock { $0.uri } }

    /// Takes over a session an earlier run started and saved the URI of;
    /// the next `queryStatus` learns how much of it the server holds.
    func resume(uri: String, resource: UploadResource, ifGenerationMatch: Int64?) {
        state.withLock { $0 = State(uri: uri, acknowledged: 0, ifGenerationMatch: ifGenerationMatch, resource: resource) }
    }

    /// Starts the session. `declaredLength` is the total when it is known,
    /// nil for a streaming upload. A failing `ifGenerationMatch` fails here
    /// already (`preconditionFailed`).
    ///
    /// The start request runs to its end even if the caller is cancelled
    /// meanwhile (a task of its own): a session the server made must be
    /// known, so that `abandon` can cancel it, rather than left active on
    /// the server with its URI lost. The caller sees the cancellation right
    /// after.
    func start(_ resource: UploadResource, ifGenerationMatch: Int64?, declaredLength: Int64?) async throws {
        let wire = self.wire
        let uri = try await Task {
            try await wire.start(resource, ifGenerationMatch: ifGenerationMatch, declaredLength: declaredLength)
        }.value
        state.withLock { $0 = State(uri: uri, acknowledged: 0, ifGenerationMatch: ifGenerationMatch, resource: resource) }
        try Task.checkCancellation()
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
    /// progress. Chunks are sent once each by the transport (it may resend
    /// a status query itself: that is idempotent).
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
                if queryFirst, let done = try await adopt(try await wire.query(uri, total: total), total: total) { return done }
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

    /// The live object, if an earlier attempt of this session stored it.
    private func storedAlready(total: Int64) async -> StorageMetadata? {
        guard let resource = state.withLock({ $0.resource }) else { return nil }
        return await source.storedObject(object, api: api, total: total, customMetadata: resource.customMetadata)
    }

    /// Asks the server how many bytes of the session it has (the total is
    /// nil while unknown); returns the object's metadata when the session
    /// is already finalised, or is finalised by this query (the JSON API
    /// does that once all of a known total arrived).
    func queryStatus(total: Int64?) async throws -> StorageMetadata? {
        try await adopt(try await wire.query(try sessionURI(), total: total), total: total)
    }

    /// Tells the server to drop the session (best effort: one attempt, as
    /// an unfinished session expires on its own after a week, and a server
    /// without a way to cancel, like the emulator's 501, would otherwise
    /// hold the caller through the whole retry schedule).
    func abandon() async {
        guard let uri = state.withLock({ $0.uri }) else { return }
        await wire.cancel(uri)
    }

    // MARK: internals

    private func sessionURI() throws -> String {
        guard let uri = state.withLock({ $0.uri }) else {
            throw StorageError.invalidArgument("the resumable upload of \(object) has not started")
        }
        return uri
    }

    /// Sends one chunk (an empty one: the request that finalises a known
    /// total); returns the object's metadata once the last byte is in.
    private func sendChunk(
        _ uri: String, _ range: Range<Int64>, total: Int64?, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> StorageMetadata? {
        let start = range.lowerBound
        let finalizes = total == range.upperBound
        if finalizes, let expected = state.withLock({ $0.ifGenerationMatch }) {
            try await wire.checkBeforeFinalizing(ifGenerationMatch: expected)
        }
        let answer = try await wire.send(
            uri, range, total: total, body: source.body(range),
            progress: Uploader.throttled(total: range.upperBound - start) { sent in progress(start + sent) })
        return try await adopt(answer, total: total)
    }

    /// Records what the server holds; the metadata once the object exists.
    /// An object made before the total was declared, or of another size
    /// than the total, is not this upload's: a failure, never a success
    /// (fake-gcs-server makes the object from the bytes it has when asked
    /// for the session's status, where GCS answers 308). A final session
    /// whose answer lacks the object is ours if the live object is exactly
    /// what was sent (size, hash, custom metadata); anything else there is
    /// an error, never a reason to upload again.
    private func adopt(_ answer: ResumableAnswer, total: Int64?) async throws -> StorageMetadata? {
        switch answer {
        case .incomplete(let persisted):
            state.withLock { $0.acknowledged = persisted }
            return nil
        case .done(let metadata):
            guard let total, metadata.size == total else {
                throw StorageError.unknown(
                    message: "the server made \(object) of \(metadata.size) bytes, but the upload has \(total.map { "\($0)" } ?? "not ended yet")",
                    response: nil)
            }
            state.withLock { $0.acknowledged = metadata.size }
            return metadata
        case .finalWithoutObject:
            guard let total else {
                throw StorageError.unknown(message: "the server finished the upload of \(object) before its end was sent", response: nil)
            }
            guard let stored = await storedAlready(total: total) else {
                throw StorageError.unknown(
                    message: "the upload session of \(object) is final, but the object there is not the \(total) bytes sent", response: nil)
            }
            state.withLock { $0.acknowledged = stored.size }
            return stored
        }
    }
}

/// What an upload sends besides the bytes: the JSON resource (name,
/// content type, metadata) and the content type on its own.
struct UploadResource: Sendable {
    let json: Data
    let contentType: String
    /// The custom metadata sent, to recognise an object an earlier attempt stored.
    let customMetadata: [String: String]
    /// Nothing to send but the name and content type: a media upload says all.
    let isContentTypeOnly: Bool

    init(metadata: StorageMetadata, name: String, crc32c: String? = nil) {
        contentType = metadata.contentType ?? "application/octet-stream"
        customMetadata = metadata.customMetadata ?? [:]
        var resource = metadata.uploadJSON(name: name)
        resource["contentType"] = contentType
        if let crc32c { resource["crc32c"] = crc32c }
        isContentTypeOnly = Set(resource.keys).isSubset(of: ["name", "contentType"])
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
