import Foundation
import Transport

/// What the server said about a resumable session.
enum ResumableAnswer: Sendable {
    /// It holds this many bytes and waits for more.
    case incomplete(Int64)
    /// The object exists.
    case done(StorageMetadata)
    /// The session is final but the answer does not carry the object: the
    /// Firebase emulator's plain `OK` to a query or a repeated finalize, or
    /// a success whose JSON was cut short. Whether the object there is the
    /// one sent is told by its metadata (`UploadSource.storedObject`).
    case finalWithoutObject
}

/// The requests of one dialect's resumable upload protocol; the loop that
/// drives them (chunking, retries, resuming from the server's offset) is
/// `ResumableSession`'s.
protocol ResumableWire: Sendable {
    /// Starts a session; returns its URI.
    func start(_ resource: UploadResource, ifGenerationMatch: Int64?, declaredLength: Int64?) async throws -> String
    /// Sends bytes `range` (`total` nil while unknown); the request that
    /// ends at a known `total` makes the object.
    func send(
        _ uri: String, _ range: Range<Int64>, total: Int64?, body: RequestBody,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> ResumableAnswer
    /// How many bytes the server holds (or the object, if it exists).
    func query(_ uri: String, total: Int64?) async throws -> ResumableAnswer
    /// Drops the session; one attempt, failures ignored.
    func cancel(_ uri: String) async
    /// Called before the request that makes the object, for a dialect
    /// that cannot carry the precondition itself.
    func checkBeforeFinalizing(ifGenerationMatch: Int64) async throws
}

/// The JSON API's protocol: a POST with `uploadType=resumable` answers the
/// session URI in `Location`; each PUT carries `Content-Range: bytes
/// a-b/total` (`/*` while the total is unknown) and is answered 308 with
/// the server's offset in `Range`, until the PUT that completes the total
/// is answered with the object. `bytes */total` asks for the offset.
/// `ifGenerationMatch` rides in the session and is checked by the server
/// at the start and when the object is made.
struct JSONResumableWire: ResumableWire {
    let api: ObjectAPI
    let object: String

    func start(_ resource: UploadResource, ifGenerationMatch: Int64?, declaredLength: Int64?) async throws -> String {
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
        return location
    }

    func send(
        _ uri: String, _ range: Range<Int64>, total: Int64?, body: RequestBody,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> ResumableAnswer {
        let label = Self.totalLabel(total)
        let contentRange = range.isEmpty ? "bytes */\(label)" : "bytes \(range.lowerBound)-\(range.upperBound - 1)/\(label)"
        let request = HTTPRequest(
            method: .put, url: uri, headers: ["Content-Range": contentRange], body: body, isIdempotent: false,
            uploadProgress: progress)
        return try answer(await api.send(request, object: object, accepting: [308]))
    }

    func query(_ uri: String, total: Int64?) async throws -> ResumableAnswer {
        let request = HTTPRequest(
            method: .put, url: uri, headers: ["Content-Range": "bytes */\(Self.totalLabel(total))"], isIdempotent: true)
        return try answer(await api.send(request, object: object, accepting: [308]))
    }

    func cancel(_ uri: String) async {
        _ = try? await api.send(HTTPRequest(method: .delete, url: uri, isIdempotent: false), object: object, accepting: [499])
    }

    /// The server checks the session's precondition itself.
    func checkBeforeFinalizing(ifGenerationMatch: Int64) async throws {}

    private static func totalLabel(_ total: Int64?) -> String { total.map(String.init) ?? "*" }

    /// 308: the server has bytes 0...N (its `Range` header; none means
    /// none). 200/201: the object exists and this is its metadata
    /// (https://cloud.google.com/storage/docs/performing-resumable-uploads#status-check);
    /// a 200/201 whose body is not the object (cut short on the way) still
    /// says the upload completed.
    private func answer(_ response: HTTPResponse) throws -> ResumableAnswer {
        if response.status == 308 {
            return .incomplete(response.headers["range"].flatMap(Self.lastByte).map { $0 + 1 } ?? 0)
        }
        guard let resource = try? ObjectAPI.json(response), let metadata = try? StorageMetadata(resource: resource) else {
            return .finalWithoutObject
        }
        return .done(metadata)
    }

    /// `bytes=0-1234` → 1234.
    static func lastByte(_ range: String) -> Int64? {
        range.split(separator: "-").last.flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }
    }
}

/// Firebase Storage's protocol (the one the Firebase SDKs speak): a POST
/// to the object collection with `X-Goog-Upload-Protocol: resumable` and
/// `X-Goog-Upload-Command: start` answers the session URI in
/// `X-Goog-Upload-URL`; each chunk is a POST to it with
/// `X-Goog-Upload-Command: upload` and `X-Goog-Upload-Offset`, the last
/// one `upload, finalize`; `query` answers `X-Goog-Upload-Status` (active
/// or final) and `X-Goog-Upload-Size-Received`; `cancel` drops it.
///
/// v0 has no preconditions: `ifGenerationMatch` is checked by reading the
/// object's metadata before the start and again before the finalizing
/// request. The object is made unconditionally after that check, so a
/// write by another client in between is overwritten (see
/// `ObjectAPI.checkPrecondition`).
struct FirebaseResumableWire: ResumableWire {
    let api: ObjectAPI
    let object: String

    func start(_ resource: UploadResource, ifGenerationMatch: Int64?, declaredLength: Int64?) async throws -> String {
        try await api.checkPrecondition(of: object, ifGenerationMatch: ifGenerationMatch)
        var headers = [
            "X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
            "X-Goog-Upload-Header-Content-Type": resource.contentType,
            "Content-Type": "application/json; charset=utf-8",
        ]
        if let declaredLength { headers["X-Goog-Upload-Header-Content-Length"] = String(declaredLength) }
        let request = HTTPRequest(
            method: .post, url: api.uploadURL([("name", object)]), headers: headers, body: .bytes(resource.json),
            isIdempotent: true)
        let response = try await api.send(request, object: object)
        guard let url = response.headers["x-goog-upload-url"], !url.isEmpty else {
            throw StorageError.unknown(message: "resumable upload started without X-Goog-Upload-URL", response: ServerResponse(response))
        }
        return url
    }

    func send(
        _ uri: String, _ range: Range<Int64>, total: Int64?, body: RequestBody,
        progress: @escaping @Sendable (Int64) -> Void
    ) async throws -> ResumableAnswer {
        let finalizes = total == range.upperBound
        let request = HTTPRequest(
            method: .post, url: uri,
            headers: [
                "X-Goog-Upload-Command": finalizes ? "upload, finalize" : "upload",
                "X-Goog-Upload-Offset": String(range.lowerBound),
            ],
            body: body, isIdempotent: false, uploadProgress: progress)
        // An accepted chunk's answer need not say how much arrived.
        return try answer(await api.send(request, object: object), received: range.upperBound)
    }

    func query(_ uri: String, total: Int64?) async throws -> ResumableAnswer {
        let request = HTTPRequest(method: .post, url: uri, headers: ["X-Goog-Upload-Command": "query"], isIdempotent: true)
        return try answer(await api.send(request, object: object))
    }

    func cancel(_ uri: String) async {
        _ = try? await api.send(
            HTTPRequest(method: .post, url: uri, headers: ["X-Goog-Upload-Command": "cancel"], isIdempotent: false),
            object: object)
    }

    func checkBeforeFinalizing(ifGenerationMatch: Int64) async throws {
        try await api.checkPrecondition(of: object, ifGenerationMatch: ifGenerationMatch)
    }

    /// `X-Goog-Upload-Status: final` carries the object, or (the
    /// emulator's answer to a query or a repeated finalize: the text `OK`,
    /// firebase-tools src/emulator/storage/apis/firebase.ts) does not;
    /// `active` the bytes received (`X-Goog-Upload-Size-Received`, else
    /// `received`).
    private func answer(_ response: HTTPResponse, received assumed: Int64? = nil) throws -> ResumableAnswer {
        let status = response.headers["x-goog-upload-status"]?.lowercased()
        if status == "final" {
            guard let resource = try? ObjectAPI.json(response), let metadata = try? StorageMetadata(resource: resource) else {
                return .finalWithoutObject
            }
            return .done(metadata)
        }
        if status == nil && !response.body.isEmpty {
            return .done(try StorageMetadata(resource: ObjectAPI.json(response)))
        }
        guard status == "active" || status == nil else {
            throw StorageError.unknown(message: "the upload session of \(object) is \(status ?? "")", response: ServerResponse(response))
        }
        guard let received = response.headers["x-goog-upload-size-received"].flatMap({ Int64($0) }) ?? assumed else {
            throw StorageError.unknown(
                message: "the server did not say how much of \(object) it received", response: ServerResponse(response))
        }
        return .incomplete(received)
    }
}
