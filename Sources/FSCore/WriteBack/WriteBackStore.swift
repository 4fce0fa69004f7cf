import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// What the write-back executor asks of the file system it serves: a
/// reader of a staged file's base object, and what the mount shows once an
/// upload stored an object or found it replaced behind the mount.
protocol WriteBackHost: AnyObject, Sendable {
    func makeReader(_ path: String, _ info: ObjectInfo) -> FileReader
    func noteUploaded(_ path: String, _ info: ObjectInfo)
    func forgetReplaced(_ path: String, pages: Bool) async
}

/// The write-back executor: it makes, changes, uploads and discards staged
/// files (`StagedFile`), runs the uploads and streams their `WriteBack`
/// machines ask for, and keeps what a failed upload leaves (the recovery
/// store). The registry of staged files and their states is
/// `FileSystem.State.staged` (`StagedFiles`), under the file system's lock
/// that this executor shares: an unlink or rename changes the inode table
/// and the write-back state in one critical section. `FileSystem` holds one
/// and forwards its write, close, fsync, release, truncate and unlink to it
/// (`FileSystem+WriteBack.swift`).
///
/// The handle events and uploads are `Uploads.swift`, the streamed upload
/// of a file written in order is `Stream.swift`, a file unlinked while open
/// is `UnlinkedWhileOpen.swift`.
final class WriteBackStore: Sendable {
    let store: any ObjectStore
    let options: MountOptions
    let logger: Logger
    /// The file system's state lock, which guards the registry.
    let state: OrderedLock<FileSystem.State>
    /// Where staged files live: `cacheDirectory/staging`, or a temporary
    /// directory of this process without a cache directory.
    let stagingDirectory: String
    /// Failed uploads' bytes, leftovers and retries (nil without a cache
    /// directory: then a failed upload's bytes stay only until release).
    let recoveryStore: RecoveryStore?
    /// Asked by flush whether the closing process holds the file open
    /// elsewhere (nil: every flush of a dirty file uploads).
    let descriptors: (any DescriptorProbe)?
    /// Large files' uploads in parts side by side, and their leftovers.
    let parallelUploads: ParallelUploads
    /// Bytes of a staged file's base fetched at a time.
    let blockSize: Int64
    /// Set once, by `connect` (a leaf lock held only to read or set it).
    private let host = OrderedLock<WeakHost>("write-back host", WeakHost())

    private struct WeakHost: Sendable {
        weak var host: (any WriteBackHost)?
    }

    /// - recovery: the mount's recovery store if the caller made it (see
    ///   `FileSystem.init`); otherwise one is made here when there is a
    ///   cache directory.
    init(
        store: any ObjectStore, options: MountOptions, logger: Logger, state: OrderedLock<FileSystem.State>,
        recovery: RecoveryStore?, descriptors: (any DescriptorProbe)?, blockSize: Int64
    ) {
        self.store = store
        self.options = options
        self.logger = logger
        self.state = state
        self.descriptors = descriptors
        self.blockSize = blockSize
        let recoveryStore = recovery ?? options.cacheDirectory.map {
            RecoveryStore(cacheDirectory: $0, store: store, options: options, logger: logger)
        }
        self.recoveryStore = recoveryStore
        self.parallelUploads = ParallelUploads(store: store, options: options, logger: logger)
        if let recoveryStore {
            self.stagingDirectory = recoveryStore.stagingDirectory
        } else {
            // A fresh directory of this process: nothing to scan.
            let staging = FileManager.default.temporaryDirectory.path + "/bucketfs-staging-\(getpid())-\(UUID().uuidString.prefix(8))"
            self.stagingDirectory = staging
            RecoveryFolder.makeStagingDirectory(staging, logger: logger)
        }
    }

    /// The file system this executor serves (held weakly: it holds this).
    func connect(_ host: any WriteBackHost) {
        self.host.withLock { $0.host = host }
        retrier?.attach(
            isBeingWritten: { [weak self] object in self?.isBeingWritten(object) ?? false },
            uploaded: { [weak self] object, info in self?.noteRecovered(object, info) })
    }

    var served: (any WriteBackHost)? { host.withLock { $0.host } }

    /// Where the bytes of failed uploads are kept.
    var recovery: RecoveryFolder? { recoveryStore?.folder }
    /// Uploads the recovery folder's entries again while mounted (nil
    /// without a recovery folder or with `recoveryRetryInterval` 0).
    var retrier: RecoveryRetrier? { recoveryStore?.retrier }

    /// The object name of mount path `path`.
    func objectName(_ path: String) -> String { options.objectPrefix + path }

    /// The path `inode` is bound to now (nil: forgotten).
    func path(of inode: UInt64) -> String? {
        state.withLock { $0.inodes[inode]?.path }
    }

    /// A new staged file for `path`, registered and attached to no inode:
    /// with `base`, its content is that object's (fetched lazily), unless
    /// `truncated`.
    func makeStagedFile(path: String, base: ObjectInfo?, truncated: Bool) throws(FSError) -> StagedFile {
        let id = state.withLock { $0.staged.newID() }
        let local = try LocalFile.create("\(stagingDirectory)/\(id)")
        let keepsBase = base.map { !truncated && $0.size > 0 } ?? false
        do {
            if keepsBase, let base { try local.truncate(to: base.size) }
        } catch {
            local.close()
            Glibc.unlink(local.path)
            throw error
        }
        let baseReader = keepsBase ? base.flatMap { base in served?.makeReader(path, base) } : nil
        let now = Timestamp(Date())
        let streamStart = parallelUploads.streamStart(chunk: options.streamChunkSize)
        // Its state is registered in `state`, discarded with it (`discard`).
        return state.withLock { s in
            StagedFile(
                id: id, lock: state, in: &s, file: local, base: base, baseReader: baseReader,
                blockSize: blockSize, streamChunk: options.streamChunkSize, streamStart: streamStart, now: now, logger: logger)
        }
    }

    /// Deletes a staged file: its state, stream, local copy and journal.
    func discard(_ staged: StagedFile) {
        if let session = staged.unregister()?.writeBack.streamSession { Task { await session.put.abandon() } }
        staged.content.delete(journal: staged.journalPath)
    }

    /// Whether a file of this mount holds unsaved writes for `object`.
    func isBeingWritten(_ object: String) -> Bool {
        guard object.hasPrefix(options.objectPrefix) else { return false }
        let path = String(object.dropFirst(options.objectPrefix.count))
        return state.withLock { s in
            guard let inode = s.inodes.inode(forPath: path), let staged = s.staged[inode] else { return false }
            return staged.state(in: s).writeBack.holdsUnsavedWrites
        }
    }

    /// A recovery entry was uploaded in the background: the mount shows it.
    func noteRecovered(_ object: String, _ info: ObjectInfo) {
        guard object.hasPrefix(options.objectPrefix) else { return }
        served?.noteUploaded(String(object.dropFirst(options.objectPrefix.count)), info)
    }
}
