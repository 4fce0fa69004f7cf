import Foundation

/// The completion-handler forms of the Firebase SDK, beside the `async`
/// ones, so that code written for Firebase compiles as it is:
///
///     let uploadTask = riversRef.putData(data, metadata: nil) { metadata, error in ... }
///     forestRef.getMetadata { metadata, error in ... }
///     ref.listAll { result, error in ... }
///
/// Each handler runs exactly once, on `storage.callbackQueue` (read when
/// the call is made; by default a serial queue that needs no run loop, see
/// `Storage.callbackQueue`). Exactly one of its arguments is non-nil. The
/// error is a `StorageNSError`, so `error as? NSError` and
/// `StorageErrorCode(rawValue: error.code)` work as in Firebase, and
/// `StorageError(error)` gives the typed error.
///
/// Handlers are `@Sendable`: they run on another thread than the caller's.
/// That also keeps a closure written in `@MainActor` code (such as
/// top-level code) from being treated as main-actor isolated, which would
/// trap when the handler runs elsewhere.
extension StorageReference {
    public typealias MetadataCompletion = @Sendable (StorageMetadata?, (any Error)?) -> Void
    public typealias ListCompletion = @Sendable (StorageListResult?, (any Error)?) -> Void

    // MARK: uploads

    /// Uploads `data`; `completion` receives the stored object's metadata.
    /// Returns the running task (observe, pause, resume, cancel it).
    @discardableResult
    public func putData(_ data: Data, metadata: StorageMetadata? = nil, completion: MetadataCompletion?) -> StorageUploadTask {
        deliverOutcome(of: putData(data, metadata: metadata), to: completion)
    }

    /// Uploads the file at `fileURL`; `completion` receives the stored
    /// object's metadata. Returns the running task.
    @discardableResult
    public func putFile(from fileURL: URL, metadata: StorageMetadata? = nil, completion: MetadataCompletion?) -> StorageUploadTask {
        deliverOutcome(of: putFile(from: fileURL, metadata: metadata), to: completion)
    }

    private func deliverOutcome(of task: StorageUploadTask, to completion: MetadataCompletion?) -> StorageUploadTask {
        guard let completion else { return task }
        let queue = storage.callbackQueue
        // Exactly one of success and failure happens, and observers see it
        // even when it happened before they were attached.
        task.observe(.success) { snapshot in queue.async { completion(snapshot.metadata, nil) } }
        task.observe(.failure) { snapshot in queue.async { completion(nil, snapshot.error) } }
        return task
    }

    // MARK: downloads

    /// The whole object, at most `maxSize` bytes (else `downloadSizeExceeded`).
    /// Firebase's name for the completion form of `data(maxSize:)`.
    public func getData(maxSize: Int64, completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        storage.complete(completion) { try await self.data(maxSize: maxSize) }
    }

    /// The same as `getData(maxSize:completion:)`.
    public func data(maxSize: Int64, completion: @escaping @Sendable (Data?, (any Error)?) -> Void) {
        getData(maxSize: maxSize, completion: completion)
    }

    /// Downloads the object to `fileURL`; `completion` receives `fileURL`.
    public func write(toFile fileURL: URL, completion: (@Sendable (URL?, (any Error)?) -> Void)?) {
        storage.complete(completion) { try await self.write(toFile: fileURL) }
    }

    /// The object's Firebase download URL (see `downloadURL()`).
    public func downloadURL(completion: @escaping @Sendable (URL?, (any Error)?) -> Void) {
        storage.complete(completion) { try await self.downloadURL() }
    }

    // MARK: metadata, listing, deletion

    public func getMetadata(completion: @escaping MetadataCompletion) {
        storage.complete(completion) { try await self.getMetadata() }
    }

    /// Changes only the properties set on `metadata` (nil deletes one).
    public func updateMetadata(_ metadata: StorageMetadata, completion: MetadataCompletion?) {
        storage.complete(completion) { try await self.updateMetadata(metadata) }
    }

    public func delete(completion: (@Sendable ((any Error)?) -> Void)?) {
        storage.complete({ (_: Bool?, error) in completion?(error) }) {
            try await self.delete()
            return true
        }
    }

    /// Every prefix and item below this reference, all pages.
    public func listAll(completion: @escaping ListCompletion) {
        storage.complete(completion) { try await self.listAll() }
    }

    /// The first page of at most `maxResults` (1–1000) entries.
    public func list(maxResults: Int64, completion: @escaping ListCompletion) {
        storage.complete(completion) { try await self.list(maxResults: maxResults) }
    }

    /// The page after the one that returned `pageToken`.
    public func list(maxResults: Int64, pageToken: String, completion: @escaping ListCompletion) {
        storage.complete(completion) { try await self.list(maxResults: maxResults, pageToken: pageToken) }
    }
}

extension Storage {
    /// Runs `work` on a new task and hands its outcome to `completion` on
    /// `callbackQueue` (as read now); errors as `StorageNSError`.
    func complete<Value: Sendable>(
        _ completion: (@Sendable (Value?, (any Error)?) -> Void)?,
        _ work: @escaping @Sendable () async throws -> Value
    ) {
        let queue = callbackQueue
        Task {
            do {
                let value = try await work()
                queue.async { completion?(value, nil) }
            } catch {
                let bridged = StorageError(error).bridged
                queue.async { completion?(nil, bridged) }
            }
        }
    }
}
