import Foundation
import Synchronization
import Transport

/// Where upload bytes come from.
enum UploadSource: Sendable {
    case data(Data)
    /// A file on disk, read region by region as the requests need it (a
    /// streaming upload's file is still growing).
    case file(path: String)

    /// The bytes in `range` as a streaming request body.
    func body(_ range: Range<Int64>) -> RequestBody {
        switch self {
        case .data(let d):
            return .bytes(d.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)))
        case .file(let path):
            return .file(path: path, offset: range.lowerBound, length: range.upperBound - range.lowerBound)
        }
    }
}

/// Puts one object: a small one in a single multipart request, a large one
/// as a resumable upload (`ResumableSession`) in chunks. A run interrupted
/// by pause keeps its session; the next run asks the server how much it has
/// and continues from there.
final class Uploader: Sendable {
    let reference: StorageReference
    let source: UploadSource
    let total: Int64
    private let resource: UploadResource
    private let ifGenerationMatch: Int64?
    private let api: ObjectAPI
    private let useResumable: Bool
    private let session: ResumableSession
    private let multipartDone = Atomic<Bool>(false)

    init(reference: StorageReference, source: UploadSource, size: Int64, metadata: StorageMetadata, ifGenerationMatch: Int64?) {
        self.reference = reference
        self.source = source
        self.total = size
        self.api = reference.api
        self.resource = UploadResource(metadata: metadata, name: reference.fullPath)
        self.ifGenerationMatch = ifGenerationMatch
        self.useResumable = size > api.configuration.multipartThreshold
        self.session = ResumableSession(reference: reference, source: source)
    }

    /// Bytes the server has acknowledged.
    var acknowledged: Int64 { multipartDone.load(ordering: .acquiring) ? total : session.acknowledged }

    func run(progress: @escaping @Sendable (Int64) -> Void) async throws -> StorageMetadata {
        try Task.checkCancellation()
        return useResumable ? try await resumable(progress: progress) : try await multipart(progress: progress)
    }

    /// Tells the server to drop an abandoned resumable session (best effort).
    func abandon() async {
        await session.abandon()
    }

    // MARK: multipart

    private func multipart(progress: @escaping @Sendable (Int64) -> Void) async throws -> StorageMetadata {
        let boundary = "bucketfs-\(UUID().uuidString)"
        let head = "--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
        let middle = "\r\n--\(boundary)\r\nContent-Type: \(resource.contentType)\r\n\r\n"
        let tail = "\r\n--\(boundary)--\r\n"
        let body = RequestBody.concatenation([
            .bytes(Data(head.utf8)), .bytes(resource.json), .bytes(Data(middle.utf8)),
            source.body(0..<total), .bytes(Data(tail.utf8)),
        ])
        let overhead = body.length - total
        var headers = ["Content-Type": "multipart/related; boundary=\(boundary)"]
        let url: String
        switch api.dialect {
        case .jsonAPI:
            url = api.uploadURL([("uploadType", "multipart"), ("ifGenerationMatch", ifGenerationMatch.map(String.init))])
        case .firebase:
            try await api.checkPrecondition(of: reference.fullPath, ifGenerationMatch: ifGenerationMatch)
            url = api.uploadURL([("name", reference.fullPath)])
            headers["X-Goog-Upload-Protocol"] = "multipart"
        }
        let request = HTTPRequest(
            method: .post, url: url, headers: headers,
            body: body, isIdempotent: api.mayRetry(guardedBy: ifGenerationMatch),
            uploadProgress: Self.throttled(total: total) { sent in progress(max(0, min(sent - overhead, self.total))) })
        let response = try await api.send(request, object: reference.fullPath)
        multipartDone.store(true, ordering: .releasing)
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }

    // MARK: resumable

    private func resumable(progress: @escaping @Sendable (Int64) -> Void) async throws -> StorageMetadata {
        if session.isStarted {
            if let done = try await session.queryStatus(total: total) { return done }
        } else {
            try await session.start(resource, ifGenerationMatch: ifGenerationMatch, declaredLength: total)
        }
        return try await session.finish(total: total, progress: progress)
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
