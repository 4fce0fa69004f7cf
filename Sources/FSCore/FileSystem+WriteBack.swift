import Foundation

/// The file system's side of write-back: it holds the executor
/// (`WriteBackStore`) and calls it for every staged file's event; here are
/// what the executor asks back (`WriteBackHost`) and the forwards the rest
/// of the mount (status, the CLI, tests) uses.
extension FileSystem: WriteBackHost {
    /// Where the bytes of failed uploads are kept.
    var recovery: RecoveryFolder? { writeBack.recovery }
    /// Uploads the recovery folder's entries again while mounted.
    var retrier: RecoveryRetrier? { writeBack.retrier }
    /// Large files' uploads in parts side by side, and their leftovers.
    var parallelUploads: ParallelUploads { writeBack.parallelUploads }

    /// Uploads every dirty file (unmount, SIGTERM); returns how many failed.
    public func flushAll() async -> Int {
        await writeBack.flushAll()
    }

    /// See `WriteBackStore.unlinkName`.
    func unlinkName(_ path: String) async -> (kind: InodeTable.Kind?, staged: StagedFile?) {
        await writeBack.unlinkName(path)
    }

    /// An upload stored `info` at `path`: the mount shows it.
    func noteUploaded(_ path: String, _ info: ObjectInfo) {
        let now = clock.now
        state.withLock { $0.metadata.apply(.patched(path, .file(info)), now: now) }
    }
}
