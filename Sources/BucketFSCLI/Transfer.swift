import ArgumentParser
import Foundation
import StorageKit
import Synchronization

/// The uploads and downloads of `cp`, `put` and `get`: StorageKit's upload
/// task (its progress observers drive the bar; pause keeps the resumable
/// session for a later run) and its file download (a progress callback;
/// cancelling removes the partial file).
enum Transfer {
    static func upload(file: String, to url: String, _ options: TransferOptions, _ storageOptions: StorageOptions) async throws {
        var configuration = try options.configuration(storageOptions)
        configuration.uploadChunkSize = Int64(options.chunkSizeMiB) << 20
        let storage = Storage.storage(url: url, configuration: configuration)
        let reference = try storage.reference(validatingURL: url)
        let path = URL(fileURLWithPath: file).standardizedFileURL.path
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            throw ValidationError("\(file) is not a regular file")
        }
        let size = Int64(info.st_size)
        let modified = Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9
        let saved = InterruptedUploads()
        var resuming = options.resume ? saved.load(bucket: reference.bucket, object: reference.fullPath, file: path) : nil
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
            if resuming != nil {
                eprint("bucketfs: the interrupted upload could not be resumed (\(error)); run the command again to start over")
            } else {
                eprint("bucketfs: \(url): \(error)")
            }
            throw ExitCode(1)
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

    static func download(from url: String, to file: String, _ options: TransferOptions, _ storageOptions: StorageOptions) async throws {
        let storage = Storage.storage(url: url, configuration: try options.configuration(storageOptions))
        let reference = try storage.reference(validatingURL: url)
        let size: Int64
        do {
            size = try await reference.getMetadata().size
        } catch {
            eprint("bucketfs: \(url): \(error)")
            throw ExitCode(1)
        }
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
            eprint("bucketfs: \(url): \(error)")
            throw ExitCode(1)
        }
    }
}
