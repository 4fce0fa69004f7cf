import ArgumentParser
import Foundation
import StorageKit
import Synchronization

/// The uploads and downloads of `cp`, `put` and `get`: StorageKit's upload
/// task (its progress observers drive the bar; pause keeps the resumable
/// session for a later run) and its file download (a progress callback;
/// cancelling removes the partial file).
enum Transfer {
    static func upload(
        file: String, to url: BucketURL, _ options: TransferOptions, _ upload: UploadOptions, _ storageOptions: StorageOptions
    ) async throws {
        var configuration = try options.configuration(storageOptions)
        configuration.uploadChunkSize = Int64(upload.chunkSizeMiB) << 20
        let storage = Storage(bucket: url.bucket, configuration: configuration)
        let reference = storage.reference().child(url.path)
        let path = URL(fileURLWithPath: file).standardizedFileURL.path
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw CLIError.bucket("cannot read \(file): \(String(cString: strerror(errno)))", exitCode: 1)
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw CLIError.bucket("\(file) is not a regular file", exitCode: 1) }
        let size = Int64(info.st_size)
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        let saved = InterruptedUploads()
        var resuming = upload.resume ? saved.load(bucket: reference.bucket, object: reference.fullPath, file: path) : nil
        if let entry = resuming, entry.size != size || entry.modified != modified {
            eprint("bucketfs: \(file) changed since its upload was interrupted; starting over")
            resuming = nil
        }
        saved.remove(bucket: reference.bucket, object: reference.fullPath, file: path)
        if let resuming { eprint("bucketfs: resuming the interrupted upload of \(file) (saved \(resuming.savedAt.formatted(.iso8601)))") }

        let task = reference.putFile(
            from: URL(fileURLWithPath: path), metadata: nil, ifGenerationMatch: nil, resumingSession: resuming?.sessionURI)
        let bar = ProgressBar(total: size, force: options.progress)
        task.observe(.progress) { snapshot in bar.update(snapshot.progress?.completedUnitCount ?? 0) }
        let outcome = await Self.end(of: task)
        switch outcome {
        case .success(let stored):
            bar.finish(size)
            print("\(stored.fullPath)\t\(stored.size) bytes\tgeneration \(stored.generation)")
        case .paused:
            bar.finish()
            guard let uri = task.resumableSessionURI else {
                task.cancel()
                eprint("bucketfs: interrupted before anything was stored; nothing to resume")
                throw ExitCode(130)
            }
            try saved.save(InterruptedUploads.Entry(
                bucket: reference.bucket, object: reference.fullPath, file: path, size: size, modified: modified,
                sessionURI: uri, savedAt: Date()))
            let stored = task.snapshot.progress?.completedUnitCount ?? 0
            eprint("bucketfs: interrupted; \(stored) of \(size) bytes stored. Run the same command again to resume (--no-resume starts over).")
            throw ExitCode(130)
        case .failure(let error):
            bar.finish()
            let failure = await explain(error, "uploading to \(url)", storage: storage)
            guard resuming != nil else { throw failure }
            throw CLIError.bucket(
                "the interrupted upload could not be resumed (\(failure)); run the command again to start over",
                exitCode: failure.exitCode)
        }
    }

    enum UploadEnd: Sendable {
        case success(StorageMetadata)
        case paused
        case failure(any Error)
    }

    /// Waits for success, failure, or (after Ctrl-C) the pause that keeps
    /// the session. A Ctrl-C pauses rather than cancels: cancel would drop
    /// the session on the server.
    static func end(of task: StorageUploadTask) async -> UploadEnd {
        let interrupt = InterruptWatch { task.pause() }
        defer { interrupt.cancel() }
        return await withCheckedContinuation { (continuation: CheckedContinuation<UploadEnd, Never>) in
            let once = Mutex<CheckedContinuation<UploadEnd, Never>?>(continuation)
            let resume: @Sendable (UploadEnd) -> Void = { end in once.withLock { $0.take() }?.resume(returning: end) }
            task.observe(.success) { snapshot in
                if let metadata = snapshot.metadata { resume(.success(metadata)) }
            }
            task.observe(.failure) { snapshot in resume(.failure(snapshot.error ?? StorageError.cancelled)) }
            task.observe(.pause) { _ in resume(.paused) }
        }
    }

    /// The object's storage, reference and metadata; a failure explained.
    private static func object(
        _ url: BucketURL, _ options: TransferOptions, _ storageOptions: StorageOptions
    ) async throws -> (Storage, StorageReference, StorageMetadata) {
        let storage = Storage(bucket: url.bucket, configuration: try options.configuration(storageOptions))
        let reference = storage.reference().child(url.path)
        do {
            return (storage, reference, try await reference.getMetadata())
        } catch {
            throw await explain(error, "reading \(url)", storage: storage)
        }
    }

    static func download(from url: BucketURL, to file: String, _ options: TransferOptions, _ storageOptions: StorageOptions) async throws {
        let (storage, reference, metadata) = try await object(url, options, storageOptions)
        let size = metadata.size
        let bar = ProgressBar(total: size, force: options.progress)
        let download = Task {
            try await reference.write(toFile: URL(fileURLWithPath: file)) { written in bar.update(written) }
        }
        let interrupt = InterruptWatch { download.cancel() }
        defer { interrupt.cancel() }
        do {
            _ = try await download.value
            bar.finish(size)
            print("\(file)\t\(size) bytes")
        } catch {
            bar.finish()
            if interrupt.interrupted {
                eprint("bucketfs: interrupted; the partial \(file) was removed")
                throw ExitCode(130)
            }
            throw await explain(error, "downloading \(url) to \(file)", storage: storage)
        }
    }

    /// Bytes `range` of the object, read as one request pinned to the
    /// generation its metadata names (so a replaced object cannot mix).
    static func download(
        from url: BucketURL, range: Range<Int64>, to file: String, _ options: TransferOptions, _ storageOptions: StorageOptions
    ) async throws {
        let (storage, reference, metadata) = try await object(url, options, storageOptions)
        guard FileManager.default.createFile(atPath: file, contents: nil), let handle = FileHandle(forWritingAtPath: file) else {
            throw CLIError.bucket("cannot create \(file)", exitCode: 1)
        }
        defer { try? handle.close() }
        do {
            let received = try await reference.read(range: range, generation: metadata.generation) { bytes in
                try handle.write(contentsOf: bytes)
            }
            print("\(received) bytes")
        } catch {
            throw await explain(error, "reading \(url)", storage: storage)
        }
    }

    /// `StorageFailure`'s explanation of a failed transfer. A 404 of an
    /// object request does not say whether the object or the whole bucket
    /// is missing (fake-gcs-server answers "Not Found" for both), so the
    /// bucket is listed once to tell: a missing bucket is exit 2.
    static func explain(_ error: any Error, _ action: String, storage: Storage) async -> CLIError {
        let endpoint = storage.configuration.endpoint
        if case .objectNotFound = StorageError(error) {
            let probe = await Preflight.outcome(by: .now + Preflight.patience) {
                try await storage.reference().listPage(maxResults: 1, pageToken: nil)
            }
            if case .failure(let listing)? = probe, case .bucketNotFound = StorageError(listing) {
                return StorageFailure.explain(listing, action, bucket: storage.bucket, endpoint: endpoint)
            }
        }
        return StorageFailure.explain(error, action, bucket: storage.bucket, endpoint: endpoint)
    }
}
