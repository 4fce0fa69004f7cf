import Foundation
import Synchronization
import Transport

/// A single-request upload of a file that is still being written
/// sequentially: the request starts at once and its body follows the file
/// as it grows (`GrowingFile`, chunked transfer encoding), so the object is
/// stored as soon as the last byte is written, rather than one whole upload
/// after it. For a store near enough that one connection is as fast as the
/// machine; the JSON API only. With nothing to send but the name and the
/// content type it is a media upload (`uploadType=media`, the type in the
/// Content-Type header): the bytes alone, which a server parses with less
/// work than a multipart body. Otherwise it is multipart, the object's
/// resource first.
///
///     let upload = try ref.startOneRequestStream(fromFile: staged, metadata: nil, ifGenerationMatch: 0)
///     upload.send(upTo: 16 << 20)                  // as the file grows
///     let stored = try await upload.finish(size: finalSize)
///
/// Unlike a resumable upload, nothing of it can be resumed: a request that
/// fails is over (`send` and `finish` throw), and its owner uploads the
/// file another way. A writer that pauses longer than `maxWait` fails it
/// too (the request is not held open for a file nobody writes). Abandoned
/// before its end, the request is cut mid-body, and the server stores
/// nothing. `ifGenerationMatch` is checked by the server at the end.
///
/// The CRC-32C of the bytes sent is computed as they go and compared with
/// the stored object's; a mismatch replaces the object at once with a
/// one-request upload of the file that carries its CRC-32C (the server
/// then refuses wrong bytes), guarded by the generation just stored. An
/// answer lost after the whole body went out is recognised as `Uploader`
/// does: the live object has exactly these bytes and metadata.
public final class OneRequestStream: Sendable {
    public let reference: StorageReference
    /// The file the bytes are read from.
    public let path: String
    private let file: GrowingFile
    private let resource: UploadResource
    private let metadata: StorageMetadata
    /// What the transport thread and the request's task write.
    private let progress = Progress()
    private let request: Task<Result<StorageMetadata, StorageError>, Never>

    private final class Progress: Sendable {
        let sentCRC = Mutex(CRC32C())
        /// The request's outcome once it ended (nil: in flight).
        let ended = Mutex<Result<StorageMetadata, StorageError>?>(nil)
    }

    fileprivate init(reference: StorageReference, path: String, metadata: StorageMetadata, ifGenerationMatch: Int64?, maxWait: Duration) {
        self.reference = reference
        self.path = path
        self.metadata = metadata
        let progress = self.progress
        self.file = GrowingFile(path: path, maxWait: maxWait) { bytes in progress.sentCRC.withLock { $0.update(bytes) } }
        self.resource = UploadResource(metadata: metadata, name: reference.fullPath)
        let api = reference.api
        let http: HTTPRequest
        if resource.isContentTypeOnly {
            http = HTTPRequest(
                method: .post, url: api.mediaUploadURL(name: reference.fullPath, ifGenerationMatch: ifGenerationMatch),
                headers: ["Content-Type": resource.contentType], body: .growing(file), isIdempotent: false)
        } else {
            let (body, contentType) = resource.multipart(.growing(file))
            http = HTTPRequest(
                method: .post, url: api.multipartUploadURL(ifGenerationMatch: ifGenerationMatch),
                headers: ["Content-Type": contentType], body: body, isIdempotent: false)
        }
        let name = reference.fullPath
        request = Task {
            let result: Result<StorageMetadata, StorageError>
            do {
                let response = try await api.send(http, object: name)
                result = .success(try StorageMetadata(resource: ObjectAPI.json(response)))
            } catch {
                result = .failure(ObjectAPI.map(error))
            }
            progress.ended.withLock { $0 = result }
            return result
        }
    }

    /// How far the request may read the file (the furthest `send`).
    public var handedOver: Int64 { file.available }

    /// Bytes [0, end) of the file are on disk and final: the request may
    /// send them. Throws if the request has already failed.
    public func send(upTo end: Int64) throws {
        if case .failure(let error) = progress.ended.withLock({ $0 }) { throw error }
        file.extend(to: end)
    }

    /// The file is complete at `size` bytes: sends the rest and returns
    /// the stored object.
    public func finish(size: Int64) async throws -> StorageMetadata {
        file.finish(at: size)
        switch await request.value {
        case .success(let stored):
            return try await checked(stored)
        case .failure(.retryLimitExceeded(let cause)):
            // The connection failed: after the whole body, the answer may
            // be all that was lost.
            let source = UploadSource.file(path: path)
            if let ours = await source.storedObject(
                reference.fullPath, api: reference.api, total: size, customMetadata: resource.customMetadata) {
                return ours
            }
            throw StorageError.retryLimitExceeded(cause)
        case .failure(let error):
            throw error
        }
    }

    /// Cuts the request short (best effort): the object stays as it was.
    public func abandon() {
        request.cancel()
    }

    /// `stored`, if it holds the CRC-32C of the bytes sent; else the file
    /// uploaded again over it, with its checksum for the server to check.
    private func checked(_ stored: StorageMetadata) async throws -> StorageMetadata {
        let sent = progress.sentCRC.withLock { $0.base64 }
        guard let crc32c = stored.crc32c, CRC32C.normalized(crc32c) != sent else { return stored }
        reference.api.storage.logger.error("the stored object's CRC-32C is not the one of the bytes sent; uploading the file again", metadata: [
            "object": "\(reference.fullPath)", "stored": "\(crc32c)", "sent": "\(sent)",
        ])
        let size = try StorageReference.regularFileSize(path)
        let local = try UploadSource.file(path: path).hashes(includeMD5: false)
        let again = Uploader(
            reference: reference, source: .file(path: path), size: size, metadata: metadata,
            ifGenerationMatch: stored.generation, crc32c: local.crc32c, oneRequest: true)
        return try await again.run { _ in }
    }
}

extension StorageReference {
    /// Starts a single-request upload of the file at `path`, which is being
    /// written sequentially (see `OneRequestStream`): the JSON API only. The
    /// content type defaults as `putFile`'s. `maxWait`: how long the request
    /// may wait for the file's next bytes before it fails.
    public func startOneRequestStream(
        fromFile path: String, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil, maxWait: Duration = .seconds(10)
    ) throws -> OneRequestStream {
        try self.path.validateForObject()
        guard api.dialect == .jsonAPI else {
            throw StorageError.invalidArgument("a single-request upload of a growing file needs the JSON API")
        }
        _ = try Self.regularFileSize(path)
        return OneRequestStream(
            reference: self, path: path, metadata: uploadMetadata(metadata, nameForType: typeName(forFile: path)),
            ifGenerationMatch: ifGenerationMatch, maxWait: maxWait)
    }
}
