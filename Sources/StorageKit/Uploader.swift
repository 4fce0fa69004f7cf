import Foundation
import Synchronization
import Transport

/// Where upload bytes come from.
enum UploadSource: Sendable {
    case data(Data)
    /// A file on disk, read region by region as the requests need it (a
    /// streaming upload's file is still growing).
    case file(path: String)
    /// Bytes `range` of a file (a part of a parallel composite upload).
    case fileRegion(path: String, range: Range<Int64>)

    /// The live object `name`, if it is exactly what an upload of these
    /// `total` bytes sends (size, CRC32C, else MD5, and the custom
    /// metadata): then an earlier attempt whose answer was lost or cut
    /// stored it. Nil otherwise, or if that cannot be told (no hash).
    func storedObject(_ name: String, api: ObjectAPI, total: Int64, customMetadata: [String: String]) async -> StorageMetadata? {
        let request = HTTPRequest(method: .get, url: api.objectURL(name), isIdempotent: true)
        guard let response = try? await api.send(request, object: name),
            let live = try? StorageMetadata(resource: ObjectAPI.json(response)),
            live.size == total,
            live.customMetadata.map({ stored in customMetadata.allSatisfy { stored[$0.key] == $0.value } }) ?? customMetadata.isEmpty
        else { return nil }
        let announced = ObjectHashes(metadata: live)
        guard !announced.isEmpty, let local = try? hashes(includeMD5: live.crc32c == nil), local.matches(announced) else { return nil }
        api.storage.logger.debug("an upload attempt whose answer was lost stored the object", metadata: [
            "object": "\(name)", "generation": "\(live.generation)",
        ])
        return live
    }

    /// The hashes of all the bytes (MD5 only when asked: it is the slower one).
    func hashes(includeMD5: Bool) throws -> ChecksumAccumulator {
        var accumulator = ChecksumAccumulator(includeMD5: includeMD5)
        switch self {
        case .data(let d):
            accumulator.update(d)
        case .file(let path):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw StorageError.invalidArgument("cannot read \(path)")
            }
            defer { try? handle.close() }
            while let piece = try handle.read(upToCount: 1 << 20), !piece.isEmpty { accumulator.update(piece) }
        case .fileRegion(let path, let range):
            guard let handle = FileHandle(forReadingAtPath: path) else {
                throw StorageError.invalidArgument("cannot read \(path)")
            }
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(range.lowerBound))
            var left = range.upperBound - range.lowerBound
            while left > 0, let piece = try handle.read(upToCount: Int(min(Int64(1 << 20), left))), !piece.isEmpty {
                accumulator.update(piece)
                left -= Int64(piece.count)
            }
        }
        return accumulator
    }

    /// The bytes in `range` as a streaming request body.
    func body(_ range: Range<Int64>) -> RequestBody {
        switch self {
        case .data(let d):
            return .bytes(d.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)))
        case .file(let path):
            return .file(path: path, offset: range.lowerBound, length: range.upperBound - range.lowerBound)
        case .fileRegion(let path, let region):
            return .file(path: path, offset: region.lowerBound + range.lowerBound, length: range.upperBound - range.lowerBound)
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
    /// The custom metadata sent, to recognise an object an earlier attempt stored.
    private let customMetadata: [String: String]
    private let api: ObjectAPI
    private let useResumable: Bool
    private let session: ResumableSession
    private let multipartDone = Atomic<Bool>(false)

    /// `resumingSession`: the URI of a resumable session an interrupted run
    /// of the same upload started; the upload goes on from what the server
    /// holds of it. `crc32c` (base64), when given, goes in the object
    /// resource: the server then refuses bytes with another checksum.
    /// `oneRequest`: a multipart request whatever the size (for bytes that
    /// are cheaper to send again whole than to resume).
    init(
        reference: StorageReference, source: UploadSource, size: Int64, metadata: StorageMetadata, ifGenerationMatch: Int64?,
        resumingSession: String? = nil, crc32c: String? = nil, oneRequest: Bool = false
    ) {
        self.reference = reference
        self.source = source
        self.total = size
        self.api = reference.api
        self.resource = UploadResource(metadata: metadata, name: reference.fullPath, crc32c: crc32c)
        self.ifGenerationMatch = ifGenerationMatch
        self.customMetadata = metadata.customMetadata ?? [:]
        self.useResumable = !oneRequest && size > api.configuration.multipartThreshold
        self.session = ResumableSession(reference: reference, source: source)
        if let resumingSession, useResumable {
            session.resume(uri: resumingSession, resource: resource, ifGenerationMatch: ifGenerationMatch)
        }
    }

    /// The resumable session's URI once it started (nil for a multipart upload).
    var sessionURI: String? { session.uri }

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
        let (body, contentType) = resource.multipart(source.body(0..<total))
        let overhead = body.length - total
        var headers = ["Content-Type": contentType]
        let url: String
        switch api.dialect {
        case .jsonAPI:
            url = api.multipartUploadURL(ifGenerationMatch: ifGenerationMatch)
        case .firebase:
            try await api.checkPrecondition(of: reference.fullPath, ifGenerationMatch: ifGenerationMatch)
            url = api.uploadURL([("name", reference.fullPath)])
            headers["X-Goog-Upload-Protocol"] = "multipart"
        }
        let request = HTTPRequest(
            method: .post, url: url, headers: headers,
            body: body, isIdempotent: api.mayRetry(guardedBy: ifGenerationMatch),
            uploadProgress: Self.throttled(total: total) { sent in progress(max(0, min(sent - overhead, self.total))) })
        let response = try await api.send(request, object: reference.fullPath, accepting: [412])
        if response.status == 412 {
            // The transport resends a request guarded by a precondition when
            // its answer is lost; if the lost attempt stored the object, the
            // resend fails its precondition on our own object. A 412 on the
            // first attempt is someone else's object, whatever it holds.
            guard response.attempts > 1, let ours = await storedByAnEarlierAttempt() else {
                throw StorageError.from(response: response, bucket: api.bucket, object: reference.fullPath)
            }
            multipartDone.store(true, ordering: .releasing)
            return ours
        }
        multipartDone.store(true, ordering: .releasing)
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }

    private func storedByAnEarlierAttempt() async -> StorageMetadata? {
        await source.storedObject(reference.fullPath, api: api, total: total, customMetadata: customMetadata)
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

extension UploadResource {
    /// A multipart/related body of this resource and the object's bytes
    /// `media` (https://cloud.google.com/storage/docs/uploading-objects#uploading-an-object,
    /// JSON API multipart upload), and its Content-Type.
    func multipart(_ media: RequestBody) -> (body: RequestBody, contentType: String) {
        let boundary = "bucketfs-\(UUID().uuidString)"
        let head = "--\(boundary)\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n"
        let middle = "\r\n--\(boundary)\r\nContent-Type: \(contentType)\r\n\r\n"
        let tail = "\r\n--\(boundary)--\r\n"
        let body = RequestBody.concatenation([
            .bytes(Data(head.utf8)), .bytes(json), .bytes(Data(middle.utf8)), media, .bytes(Data(tail.utf8)),
        ])
        return (body, "multipart/related; boundary=\(boundary)")
    }
}

extension ObjectAPI {
    /// The JSON API's URL for a media upload: the body is the bytes, the
    /// name is in the query.
    func mediaUploadURL(name: String, ifGenerationMatch: Int64?) -> String {
        uploadURL([("uploadType", "media"), ("name", name), ("ifGenerationMatch", ifGenerationMatch.map(String.init))])
    }

    /// The JSON API's URL for a multipart upload.
    func multipartUploadURL(ifGenerationMatch: Int64?) -> String {
        uploadURL([("uploadType", "multipart"), ("ifGenerationMatch", ifGenerationMatch.map(String.init))])
    }
}
