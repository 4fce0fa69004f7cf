import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A file open for writing, one per inode, shared by every handle: its
/// content (`StagedContent`: the sparse local copy with lazily fetched base
/// blocks), what the next upload sends besides the bytes, and its
/// lifecycle (dirty or clean, uploads, handles, the name, the journal, the
/// stream), the `WriteBack` machine. Every event goes to the machine
/// through the write-back executor, `WriteBackStore.handle`, which also
/// runs the effects.
///
/// The state lives in the registry (`StagedFiles`, `FileSystem.State.staged`),
/// under the file system's one lock, so an unlink or rename changes the inode table and
/// the write-back state in one critical section and no lock nests in
/// another (docs/architecture.md#lock-order). Code already holding that
/// lock passes its state in (`withState(in:)`); the rest goes through
/// `withState`. Once discarded, the file's state is gone from there and
/// every later event sees a retired, empty file (`State.gone`).
final class StagedFile: Sendable {
    /// Its key in the registry, `StagedFiles` (and its local file's name).
    let id: UInt64
    let content: StagedContent
    let logger: Logger
    /// The file system's state lock, which guards this file's `State`.
    private let lock: OrderedLock<FileSystem.State>

    struct State: Sendable {
        /// The object this content replaces: its generation is the upload's
        /// precondition, its metadata is kept. nil: a new file.
        var base: ObjectInfo?
        var size: Int64
        /// Metadata changes to send with the next upload (chmod on a dirty
        /// file, for example). nil values delete a key.
        var pendingMetadata: [String: String?] = [:]
        /// Standard properties to set with the next upload (only those
        /// fields of the patch; its custom keys are in `pendingMetadata`).
        var pendingProperties = MetadataPatch()
        var modificationTime: Timestamp
        /// Whether `modificationTime` was set (utimens: `touch -d`, `cp -p`,
        /// `rsync -t`) after the last write or truncation. Only then does
        /// the upload store it as `goog-reserved-file-mtime`; a written
        /// file's mtime is the stored object's `updated` (semantics.md).
        var modificationTimeWasSet = false
        /// The lifecycle: versions, handles, the name, journal, the
        /// upload and the stream, with the Tasks the executor made for them.
        var writeBack: WriteBack

        var dirty: Bool { writeBack.dirty }
        /// What the mount shows under the file's name.
        var visibility: WriteBack.Visibility { writeBack.visibility }

        /// The state of a discarded file: retired and empty, so that an
        /// event arriving after the discard (a send or fetch ending) finds
        /// nothing to do and no change is accepted.
        static var gone: State {
            var s = State(base: nil, size: 0, modificationTime: Timestamp(seconds: 0),
                          writeBack: WriteBack(streamChunk: 1, emptyAtStart: false))
            _ = s.writeBack.handle(.retire)
            return s
        }

        /// `info` becomes the base. A clean file shows the stored object's
        /// mtime from then on (`updated`, unless the key was set); one
        /// written meanwhile keeps its last write's.
        mutating func takeBase(_ info: ObjectInfo) {
            base = info
            if !dirty { modificationTime = AttributeMapper.modificationTime(info) }
        }

        /// The object this file will be once uploaded, as `stat` shows it.
        func view(objectName: String) -> ObjectInfo {
            var info = base ?? ObjectInfo(name: objectName, size: 0, generation: 0, updated: Date())
            info.name = objectName
            info.size = size
            for (key, value) in pendingMetadata { info.customMetadata[key] = value }
            pendingProperties.apply(to: &info)
            let mtime = Double(modificationTime.seconds) + Double(modificationTime.nanoseconds) / 1e9
            info.customMetadata[AttributeMapper.mtimeKey] = String(mtime)
            if dirty { info.updated = Date() }
            return info
        }
    }

    /// Registers the new file and its state in `s` (the caller holds
    /// `lock`'s value: `WriteBackStore.makeStagedFile` allocates the id
    /// under it), attached to no inode yet.
    init(
        id: UInt64, lock: OrderedLock<FileSystem.State>, in s: inout FileSystem.State,
        file: LocalFile, base: ObjectInfo?, baseReader: FileReader?, blockSize: Int64, streamChunk: Int64, streamStart: Int64, now: Timestamp,
        logger: Logger
    ) {
        self.id = id
        self.lock = lock
        self.content = StagedContent(file: file, blockSize: blockSize, baseReader: baseReader, baseSize: base?.size ?? 0)
        self.logger = logger
        let size = base?.size ?? 0
        s.staged.register(self, State(
            base: base, size: size,
            modificationTime: base.map(AttributeMapper.modificationTime) ?? now,
            writeBack: WriteBack(streamChunk: streamChunk, streamStart: streamStart, emptyAtStart: size == 0)))
    }

    /// Runs `body` on this file's state under the file system's lock.
    func withState<R: Sendable>(_ body: (inout State) -> R) -> R {
        lock.withLock { s in withState(in: &s, body) }
    }

    /// Runs `body` on this file's state, for a caller that holds the file
    /// system's lock (`s` is its value).
    func withState<R>(in s: inout FileSystem.State, _ body: (inout State) -> R) -> R {
        if let result = s.staged.withState(id, body) { return result }
        var gone = State.gone
        return body(&gone)
    }

    /// This file's state as `s` (the file system's, locked) holds it.
    func state(in s: borrowing FileSystem.State) -> State {
        s.staged.state(id) ?? .gone
    }

    var size: Int64 { withState { $0.size } }
    var file: LocalFile { content.file }
    var journalPath: String { file.path + RecoveryFolder.journalSuffix }
    var isDirty: Bool { withState { $0.dirty } }

    /// Created here, never uploaded, and nothing done to it since (no
    /// write, truncation or attribute change): the state right after create.
    var isUntouchedNewFile: Bool {
        withState { $0.base == nil && $0.size == 0 && $0.writeBack.untouchedSinceCreate }
    }

    /// The object this file will be once uploaded, as `stat` shows it.
    func view(objectName: String) -> ObjectInfo {
        withState { $0.view(objectName: objectName) }
    }

    var visibility: WriteBack.Visibility { withState { $0.visibility } }

    /// Whether release still owes this file an upload.
    var needsFinalUpload: Bool {
        withState { $0.writeBack.owesFinalUpload }
    }

    /// Metadata changed on the object itself (a patch while this file was
    /// clean): keep it as the base, so the next upload carries it.
    func rebase(_ info: ObjectInfo) {
        withState { s in
            guard let base = s.base, base.generation == info.generation else { return }
            s.takeBase(info)
        }
    }

    /// `info` is the new base (an upload stored it, or a rename copied
    /// the object), and the local file holds all of its bytes (the caller
    /// ran `fetchAll`).
    func adoptBase(_ info: ObjectInfo) {
        withState { $0.base = info }
        content.holdsEverything()
    }

    // MARK: - Content

    /// Up to `count` bytes at `offset` of the current content.
    func read(at offset: Int64, count: Int) async throws(FSError) -> Data {
        let size = self.size
        guard offset < size, count > 0 else { return Data() }
        return try await content.read(offset..<min(size, offset + Int64(count)))
    }

    /// Takes the state out of the file system's (the file is discarded):
    /// what it held (the base's reader, the stream) is the caller's to end.
    func unregister() -> State? {
        lock.withLock { $0.staged.remove(id) }
    }

    var current: State { withState { $0 } }
    var base: ObjectInfo? { withState { $0.base } }

    /// What the store holds of this file as far as its state knows.
    enum Stored: Sendable, Equatable {
        /// Never stored: no object to delete.
        case never
        case object(ObjectInfo)
        /// The state is gone (the file was discarded after its last
        /// release, which may come at any time after a close): whatever
        /// it uploaded is for the caches or the store to tell.
        case unknown
    }

    var stored: Stored {
        lock.withLock { s in
            guard let state = s.staged.state(id) else { return .unknown }
            return state.base.map(Stored.object) ?? .never
        }
    }
    var handleCount: Int { withState { $0.writeBack.handles } }

    /// Fetches every base block still missing: before an upload, the local
    /// file must hold the whole content.
    func fetchAll() async throws(FSError) {
        try await content.fetchAll()
    }
}
