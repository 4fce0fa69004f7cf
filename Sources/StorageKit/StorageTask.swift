import Foundation

/// The states an observer can subscribe to, as in Firebase.
public enum StorageTaskStatus: Int, Sendable {
    case unknown, resume, progress, pause, success, failure
}

/// What an observer receives: the task, its reference, progress so far and,
/// at the end, the object's metadata or the error. `error` is a
/// `StorageNSError`, so `snapshot.error as? NSError` works as in Firebase
/// (`StorageError(snapshot.error!)` gives the typed error).
///
/// Immutable once made; the non-Sendable `Progress` and `Error` inside are
/// never mutated after init, which is why `@unchecked Sendable` is sound.
public final class StorageTaskSnapshot: @unchecked Sendable, CustomStringConvertible {
    public let task: StorageUploadTask
    public let reference: StorageReference
    public let status: StorageTaskStatus
    public let progress: Progress?
    public let metadata: StorageMetadata?
    public let error: (any Error)?

    init(
        task: StorageUploadTask, status: StorageTaskStatus, completed: Int64, total: Int64,
        metadata: StorageMetadata? = nil, error: (any Error)? = nil
    ) {
        self.task = task
        self.reference = task.reference
        self.status = status
        let progress = Progress(totalUnitCount: total)
        progress.completedUnitCount = completed
        self.progress = progress
        self.metadata = metadata
        self.error = error.map { StorageError($0).bridged }
    }

    public var description: String {
        "<StorageTaskSnapshot \(status) \(reference) \(progress?.completedUnitCount ?? 0)/\(progress?.totalUnitCount ?? 0)>"
    }
}
