import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Uploads, with the Firebase SDK's signatures: `putData`/`putFile` return
/// the running task, `putDataAsync`/`putFileAsync` await its end.
///
/// `ifGenerationMatch` (not in Firebase) makes the write conditional: it
/// succeeds only if the object's live generation is that number, or, with
/// 0, only if there is no object yet; otherwise the task fails with
/// `StorageError.preconditionFailed` and nothing is overwritten.
extension StorageReference {
    /// Uploads `data`. Data cannot be uploaded to the root reference.
    @discardableResult
    public func putData(_ data: Data, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil) -> StorageUploadTask {
        makeTask(source: .data(data), size: Int64(data.count), metadata: metadata, nameForType: name, ifGenerationMatch: ifGenerationMatch)
    }

    /// Uploads the file at `fileURL`, streaming it from disk. `contentType`
    /// defaults to the one its extension implies (else this reference's
    /// name's, else application/octet-stream).
    @discardableResult
    public func putFile(from fileURL: URL, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil) -> StorageUploadTask {
        putFile(from: fileURL, metadata: metadata, ifGenerationMatch: ifGenerationMatch, resumingSession: nil)
    }

    /// `putFile`, going on with the resumable session `resumingSession`
    /// (a `StorageUploadTask.resumableSessionURI` saved by an earlier,
    /// interrupted upload of the same file): the server is asked how much it
    /// holds and only the rest is sent. The file must not have changed.
    public func putFile(
        from fileURL: URL, metadata: StorageMetadata?, ifGenerationMatch: Int64?, resumingSession: String?
    ) -> StorageUploadTask {
        let size: Int64
        do {
            size = try Self.regularFileSize(fileURL.path)
        } catch {
            return failedTask(error)
        }
        return makeTask(
            source: .file(path: fileURL.path), size: size, metadata: metadata, nameForType: typeName(forFile: fileURL.path),
            ifGenerationMatch: ifGenerationMatch, resumingSession: resumingSession)
    }

    /// Uploads the file at `url` in one multipart request whatever its size
    /// (https://cloud.google.com/storage/docs/uploads-downloads#uploads:
    /// a single-request upload, for bytes cheaper to send again whole than
    /// to resume, as over a short fast link); otherwise as `putFileAsync`.
    @discardableResult
    public func putFileInOneRequest(
        from url: URL, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil
    ) async throws -> StorageMetadata {
        let size = try Self.regularFileSize(url.path)
        let task = makeTask(
            source: .file(path: url.path), size: size, metadata: metadata, nameForType: typeName(forFile: url.path),
            ifGenerationMatch: ifGenerationMatch, oneRequest: true)
        return try await task.completion()
    }

    /// Uploads `data` and returns the stored object's metadata.
    @discardableResult
    public func putDataAsync(
        _ data: Data, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil,
        onProgress: (@Sendable (Progress?) -> Void)? = nil
    ) async throws -> StorageMetadata {
        try await awaitCompletion(putData(data, metadata: metadata, ifGenerationMatch: ifGenerationMatch), onProgress)
    }

    /// Uploads the file at `url` and returns the stored object's metadata.
    @discardableResult
    public func putFileAsync(
        from url: URL, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil,
        onProgress: (@Sendable (Progress?) -> Void)? = nil
    ) async throws -> StorageMetadata {
        try await awaitCompletion(putFile(from: url, metadata: metadata, ifGenerationMatch: ifGenerationMatch), onProgress)
    }

    private func awaitCompletion(
        _ task: StorageUploadTask, _ onProgress: (@Sendable (Progress?) -> Void)?
    ) async throws -> StorageMetadata {
        if let onProgress {
            task.observe(.progress) { onProgress($0.progress) }
        }
        return try await task.completion()
    }

    private func makeTask(
        source: UploadSource, size: Int64, metadata: StorageMetadata?, nameForType: String, ifGenerationMatch: Int64?,
        resumingSession: String? = nil, oneRequest: Bool = false
    ) -> StorageUploadTask {
        do {
            try path.validateForObject()
        } catch {
            return failedTask(error)
        }
        let uploader = Uploader(
            reference: self, source: source, size: size, metadata: uploadMetadata(metadata, nameForType: nameForType),
            ifGenerationMatch: ifGenerationMatch, resumingSession: resumingSession, oneRequest: oneRequest)
        let task = StorageUploadTask(reference: self, uploader: uploader)
        task.start()
        return task
    }

    /// A task that fails at once (invalid path, unreadable file), so the
    /// error reaches observers the way every other failure does.
    private func failedTask(_ error: any Error) -> StorageUploadTask {
        let uploader = Uploader(reference: self, source: .data(Data()), size: 0, metadata: StorageMetadata(), ifGenerationMatch: nil)
        let task = StorageUploadTask(reference: self, uploader: uploader)
        task.fail(error)
        return task
    }

    // MARK: shared with streaming uploads

    /// The size of the regular file at `path`; `invalidArgument` for
    /// anything else.
    static func regularFileSize(_ path: String) throws(StorageError) -> Int64 {
        // stat(2) itself: FileManager.attributesOfItem also resolves the
        // owner's and group's names (reading /etc/passwd and /etc/group),
        // which cost more than a small upload's round trip.
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw StorageError.invalidArgument("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw StorageError.invalidArgument("\(path) is not a regular file") }
        return Int64(info.st_size)
    }

    /// The name whose extension gives an upload of the file at `path` its
    /// default content type: the file's when that implies a type, else
    /// this reference's.
    func typeName(forFile path: String) -> String {
        let fileName = URL(fileURLWithPath: path).lastPathComponent
        return ContentType.infer(forFileName: fileName) == ContentType.fallback ? name : fileName
    }

    /// A copy of `metadata` with the content type `nameForType` implies
    /// when it has none.
    func uploadMetadata(_ metadata: StorageMetadata?, nameForType: String) -> StorageMetadata {
        let effective = metadata?.copy() ?? StorageMetadata()
        if effective.contentType == nil {
            effective.contentType = ContentType.infer(forFileName: nameForType)
        }
        return effective
    }
}
