import Foundation
import Synchronization
import Transport

/// Where upload bytes come from.
enum UploadSource: Sendable {
    case data(Data)
    case file(path: String, size: Int64)

    var size: Int64 {
        switch self {
        case .data(let d): return Int64(d.count)
        case .file(_, let size): return size
        }
    }

    /// The bytes in `range` as a streaming request body.
    func body(_ range: Range<Int64>) -> RequestBody {
        switch self {
        case .data(let d):
            return .bytes(d.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)))
        case .file(let path, _):
            return .file(path: path, offset: range.lowerBound, length: range.count.int64)
        }
    }
}

private extension Int {
    var int64: Int64 { Int64(self) }
}

/// Puts one object: a small one in a single multipart request, a large one
/// as a resumable upload in chunks (multiples of 256 KiB). A run interrupted
/// by pause keeps its session; the next run asks the server how much it has
/// and continues from there. A chunk that fails for a retryable reason is
/// handled the same way, within the retry budget, as Google recommends.
final class Uploader: Sendable {
    let reference: StorageReference
    let source: UploadSource
    let total: Int64
    /// The JSON resource sent with the upload (name, type, metadata).
    private let jsonMetadata: Data
    private let contentType: String
    private let ifGenerationMatch: Int64?
    private let api: ObjectAPI
    private let chunkSize: Int64
    private let useResumable: Bool

    private struct Session {
        var uri: String?
        var acknowledged: Int64 = 0
    }

    private let session = Mutex(Session())

    init(reference: StorageReference, source: UploadSource, metadata: StorageMetadata, ifGenerationMatch: Int64?) {
        self.reference = reference
        self.source = source
        self.total = source.size
        self.api = reference.api
        self.contentType = metadata.contentType ?? "application/octet-stream"
        var json = metadata.uploadJSON(name: reference.fullPath)
        json["contentType"] = contentType
        self.jsonMetadata = ObjectAPI.jsonBody(json)
        self.ifGenerationMatch = ifGenerationMatch
        let granule: Int64 = 256 * 1024
        let configured = api.configuration.uploadChunkSize
        self.chunkSize = max(granule, configured / granule * granule)
        self.useResumable = source.size > api.configuration.multipartThreshold
    }

    /// Bytes the server has acknowledged.
    var acknowledged: Int64 { session.withLock { $0.acknowledged } }

    func run(progress: @escaping @Sendable (Int64) -> Void) async throws -> StorageMetadata {
        try Task.checkCancellation()
        return useResumable ? try await resumable(progress: progress) : try await multipart(progress: progress)
    }

    /// Tells the server to drop an abandoned resumable session (best effort).
    func abandon() async {
        guard let uri = session.withLock({ $0.uri }) else { return }
        _ = try? await api.send(HTTPRequest(method: .delete, url: uri, isIdempotent: true), object: reference.fullPath, accepting: [499])
    }

    // MARK: multipart

    private func multipart(progress: @escaping @Sendable (Int64) -> Void) async throws -> StorageMetadata {
        let boundary = "bucketfs-\(UUID().uuidString)"
        let head = "--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
        let middle = "\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\n\r\n"
        let tail = "\r\n--\(boundary)--\r\n"
        let body = RequestBody.concatenation([
            .bytes(Data(head.utf8)), .bytes(jsonMetadata), .bytes(Data(middle.utf8)),
            source.body(0..<total), .bytes(Data(tail.utf8)),
        ])
        let overhead = body.length - total
        let url = api.uploadURL([
            ("uploadType", "multipart"), ("ifGenerationMatch", ifGenerationMatch.map(String.init)),
        ])
        let request = HTTPRequest(
            method: .post, url: url, headers: ["Content-Type": "multipart/related; boundary=\(boundary)"],
            body: body, isIdempotent: ifGenerationMatch != nil,
            uploadProgress: Self.throttled(total: total) { sent in progress(max(0, min(sent - overhead, self.total))) })
        let response = try await api.send(request, object: reference.fullPath)
        session.withLock { $0.acknowledged = total }
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }

    // MARK: resumable

    private func resumable(progress: @escaping @Sendable (Int64) -> Void) async throws -> StorageMetadata {
        var uri: String
        if let existing = session.withLock({ $0.uri }) {
            uri = existing
            if let done = try await queryStatus(uri) { return done }
        } else {
            uri = try await startSession()
        }
        let policy = api.transport.configuration.retry
        var failures = 0
        while true {
            try Task.checkCancellation()
            let offset = acknowledged
            let end = min(offset + chunkSize, total)
            do {
                if let done = try await sendChunk(uri, offset..<end, progress: progress) { return done }
                failures = 0
                progress(acknowledged)
            } catch let error as StorageError where error.isRetryableUploadFailure || error.isOffsetDisagreement {
                // Either the chunk did not get through, or the server holds
                // a different number of bytes than we thought (a chunk cut by
                // pause may still have landed): ask it, and go on from there.
                failures += 1
                guard failures < policy.maxAttempts else { throw error }
                let delay = policy.delay(beforeRetry: failures - 1, jitter: Double.random(in: 0..<1))
                api.storage.logger.debug("retrying upload chunk", metadata: [
                    "object": "\(reference.fullPath)", "offset": "\(offset)", "error": "\(error)",
                ])
                try await Task.sleep(for: delay)
                if let done = try await queryStatus(uri) { return done }
            }
        }
    }

    private func startSession() async throws -> String {
        let url = api.uploadURL([
            ("uploadType", "resumable"), ("name", reference.fullPath),
            ("ifGenerationMatch", ifGenerationMatch.map(String.init)),
        ])
        let request = HTTPRequest(
            method: .post, url: url,
            headers: [
                "Content-Type": "application/json; charset=UTF-8",
                "X-Upload-Content-Type": contentType, "X-Upload-Content-Length": String(total),
            ],
            body: .bytes(jsonMetadata), isIdempotent: true)
        let response = try await api.send(request, object: reference.fullPath)
        guard let location = response.headers["location"] else {
            throw StorageError.unknown(message: "resumable upload started without a session URI", response: ServerResponse(response))
        }
        session.withLock { $0 = Session(uri: location, acknowledged: 0) }
        return location
    }

    /// Sends one chunk; returns the object's metadata once the last byte is in.
    private func sendChunk(
        _ uri: String, _ range: Range<Int64>, progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> StorageMetadata? {
        let contentRange = range.isEmpty ? "bytes */\(total)" : "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(total)"
        let start = range.lowerBound
        let request = HTTPRequest(
            method: .put, url: uri, headers: ["Content-Range": contentRange],
            body: source.body(range), isIdempotent: false,
            uploadProgress: Self.throttled(total: range.count.int64) { sent in progress(start + sent) })
        return try await handleSessionResponse(api.send(request, object: reference.fullPath, accepting: [308]))
    }

    /// Asks the server how many bytes of the session it has.
    private func queryStatus(_ uri: String) async throws -> StorageMetadata? {
        let request = HTTPRequest(
            method: .put, url: uri, headers: ["Content-Range": "bytes */\(total)"], isIdempotent: true)
        return try await handleSessionResponse(api.send(request, object: reference.fullPath, accepting: [308]))
    }

    /// 308: the server has bytes 0...N (its `Range` header; none means
    /// none). 200/201: the object exists and this is its metadata.
    private func handleSessionResponse(_ response: HTTPResponse) throws -> StorageMetadata? {
        if response.status == 308 {
            let persisted = response.headers["range"].flatMap(Self.lastByte).map { $0 + 1 } ?? 0
            session.withLock { $0.acknowledged = persisted }
            return nil
        }
        session.withLock { $0.acknowledged = total }
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }

    /// `bytes=0-1234` → 1234.
    static func lastByte(_ range: String) -> Int64? {
        range.split(separator: "-").last.flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
    }

    /// Progress callbacks at most every 256 KiB (and at the end), so
    /// observers are not called for every curl buffer.
    static func throttled(total: Int64, _ report: @escaping @Sendable (Int64) -> Void) -> @Sendable (Int64) -> Void {
        let last = Atomic<Int64>(-1)
        return { sent in
            let previous = last.load(ordering: .relaxed)
            guard sent == total || previous < 0 || sent - previous >= 256 * 1024 else { return }
            last.store(sent, ordering: .relaxed)
            report(sent)
        }
    }
}

extension StorageError {
    /// Failures after which a resumable upload asks the server for its
    /// offset and goes on: connection trouble and server errors.
    var isRetryableUploadFailure: Bool {
        if case .retryLimitExceeded = self { return true }
        return false
    }

    /// A 400 on a chunk: the server's offset is not the one the chunk
    /// started at.
    var isOffsetDisagreement: Bool {
        if case .invalidArgument = self { return true }
        return false
    }
}
