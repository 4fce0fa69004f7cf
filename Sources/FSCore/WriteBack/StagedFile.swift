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
/// stream), the `WriteBack` machine. Every event goes through the methods
/// here. The uploads and streams the machine asks for are run by the
/// write-back executor, `WriteBackStore`.
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
        /// The lifecycle: versions, handles, the name, journal, stream.
        var writeBack: WriteBack
        // What the executor started for the machine's actions (Tasks are
        // created here, never awaited under the lock, so that a second
        // flush finds the upload to join and an upload finds the stream
        // start to wait for):
        /// The upload in flight (`writeBack.uploading`).
        var upload: Task<Result<Void, FSError>, Never>?
        /// The open stream's session (`writeBack.stream` is `.open`).
        var stream: UploadStream?
        /// The stream's start request (`writeBack.stream` is `.starting`).
        var streamStart: Task<Void, Never>?
        /// The open stream's latest send (the uploader that takes the
        /// stream over waits for it).
        var streamSend: Task<Result<Void, StoreError>, Never>?

        var dirty: Bool { writeBack.dirty }
        /// What the mount shows under the file's name.
        var visibility: WriteBack.Visibility { writeBack.visibility }

        /// The state of a discarded file: retired and empty, so that an
        /// event arriving after the discard (a send or fetch ending) finds
        /// nothing to do and no change is accepted.
        static var gone: State {
            var s = State(base: nil, size: 0, modificationTime: Timestamp(seconds: 0),
                          writeBack: WriteBack(streamChunk: 1, emptyAtStart: false))
            _ = s.writeBack.retire()
            return s
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
        file: LocalFile, base: ObjectInfo?, baseReader: FileReader?, blockSize: Int64, streamChunk: Int64, now: Timestamp,
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
            writeBack: WriteBack(streamChunk: streamChunk, emptyAtStart: size == 0)))
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

    /// A file made by create: it must reach the bucket even if nothing
    /// is written (`touch`), with its mode when not the mount's default.
    func markCreated(metadata: [String: String]) {
        withState { s in
            s.writeBack.created()
            for (key, value) in metadata { s.pendingMetadata[key] = value }
        }
    }

    /// Created here, never uploaded, and nothing done to it since (no
    /// write, truncation or attribute change): the state right after create.
    var isUntouchedNewFile: Bool {
        withState { $0.base == nil && $0.size == 0 && $0.writeBack.untouchedSinceCreate }
    }

    /// The object this file will be once uploaded, as `stat` shows it.
    func view(objectName: String) -> ObjectInfo {
        withState { $0.view(objectName: objectName) }
    }

    /// An upload of `version` stored `info`: that is the new base, and the
    /// local file holds all of it (`fetchAll` ran first). Once clean, the
    /// journal goes, under the lock, so a write racing this re-creates it
    /// after, not before.
    func uploaded(version: UInt64, info: ObjectInfo, sentMetadata: [String: String?]) {
        adoptBase(info) { s in
            let actions = s.writeBack.uploadStored(version, hasContent: s.size > 0)
            if actions.contains(.removeJournal) { Glibc.unlink(journalPath) }
            for (key, value) in sentMetadata where s.pendingMetadata[key] == value { s.pendingMetadata[key] = nil }
            s.pendingProperties = MetadataPatch()
        }
    }

    /// The upload of `version` failed (its bytes are in the recovery folder).
    func uploadFailed(version: UInt64) {
        withState { $0.writeBack.uploadFailed(version) }
    }

    var visibility: WriteBack.Visibility { withState { $0.visibility } }

    /// Applies a change that is to ride along with the coming upload, if
    /// there is one: only while the file is dirty and not retired (else
    /// false: the caller changes the object itself). The change counts as
    /// a write, so an upload already in flight is followed by another.
    func rideAlong(_ change: (inout State) -> Void) -> Bool {
        withState { s in
            guard s.writeBack.rideAlong() else { return false }
            change(&s)
            return true
        }
    }

    /// Whether release still owes this file an upload.
    var needsFinalUpload: Bool {
        withState { $0.writeBack.owesFinalUpload }
    }

    /// A metadata change (xattrs) made while the file has unsaved writes:
    /// custom keys and standard properties go with the coming upload.
    func takeAlong(_ patch: MetadataPatch) -> Bool {
        rideAlong { s in
            for (key, value) in patch.customMetadata { s.pendingMetadata[key] = value }
            s.pendingProperties.properties.merge(patch.properties)
        }
    }

    /// Metadata changed on the object itself (a patch while this file was
    /// clean): keep it as the base, so the next upload carries it.
    func rebase(_ info: ObjectInfo) {
        withState { s in
            guard let base = s.base, base.generation == info.generation else { return }
            s.base = info
            if !s.dirty { s.modificationTime = AttributeMapper.modificationTime(info) }
        }
    }

    /// The object was copied to a new name (rename): the copy is the new
    /// base. The caller made the content local first (`fetchAll`), and
    /// performs the returned actions once the inode has its new name (the
    /// journal is rewritten for it).
    func renamed(to copy: ObjectInfo) -> [WriteBack.Action] {
        var actions: [WriteBack.Action] = []
        adoptBase(copy) { s in actions = s.writeBack.renamed() }
        return actions
    }

    /// `info` is the new base, and the local file holds all of its bytes.
    private func adoptBase(_ info: ObjectInfo, _ alsoChange: (inout State) -> Void) {
        withState { s in
            alsoChange(&s)
            s.base = info
        }
        content.holdsEverything()
    }

    // MARK: - Content

    /// Up to `count` bytes at `offset` of the current content.
    func read(at offset: Int64, count: Int) async throws(FSError) -> Data {
        let size = self.size
        guard offset < size, count > 0 else { return Data() }
        return try await content.read(offset..<min(size, offset + Int64(count)))
    }

    /// Writes `data` at `offset`, growing the file as needed. Returns the
    /// machine's actions that `launch` left for after the lock.
    func write(_ data: Data, at offset: Int64, now: Timestamp, launch: Launch) async throws(FSError) -> [WriteBack.Action] {
        guard !data.isEmpty else { return [] }
        let range = offset..<(offset + Int64(data.count))
        try await content.write(data, at: offset)
        return transition({ s in
            s.size = max(s.size, range.upperBound)
            s.modificationTime = now
            return ((), s.writeBack.wrote(range))
        }, launch: launch).actions
    }

    /// Sets the size: shrinking forgets the base bytes past it, growing
    /// adds zeros. A no-op change is not a change (`> f` on an empty file
    /// uploads nothing).
    /// Returns false, changing nothing, if the file was retired meanwhile
    /// (its last release finished: the change must go to the object).
    @discardableResult
    func truncate(to newSize: Int64, now: Timestamp, launch: Launch) async throws(FSError) -> Bool {
        // Base bytes past the new end are forgotten first, so that no fetch
        // starts past it; those in flight are waited for (they would write
        // base bytes back past the new end).
        content.forgetBase(from: newSize)
        await content.waitForFetches()
        let changed = transition({ s -> (Bool?, [WriteBack.Action]) in
            guard let actions = s.writeBack.truncated(from: s.size, to: newSize) else { return (nil, []) }
            guard s.size != newSize else { return (false, actions) }
            s.size = newSize
            s.modificationTime = now
            return (true, actions)
        }, launch: launch).result
        guard let changed else { return false }
        if changed { try file.truncate(to: newSize) }
        return true
    }

    // MARK: - Lifecycle events

    /// Launches one of the machine's actions under this file's lock,
    /// returning false to leave it for after the lock (see `transition`).
    typealias Launch = (WriteBack.Action, inout State) -> Bool

    /// Feeds the lifecycle machine one event under this file's lock. The
    /// actions whose Task a waiter must find (the stream's start and
    /// sends), or that take a resource out of the state (the stream to
    /// abandon), are launched by `launch` in the same critical section
    /// (Tasks are created there, never awaited); the rest are returned, to
    /// be performed after the lock is released.
    func transition<R: Sendable>(
        _ event: (inout State) -> (R, [WriteBack.Action]), launch: Launch
    ) -> (result: R, actions: [WriteBack.Action]) {
        lock.withLock { s in transition(in: &s, event, launch: launch) }
    }

    /// `transition` for a caller that holds the file system's lock.
    func transition<R>(
        in fileSystem: inout FileSystem.State, _ event: (inout State) -> (R, [WriteBack.Action]), launch: Launch
    ) -> (result: R, actions: [WriteBack.Action]) {
        withState(in: &fileSystem) { s in
            let (result, actions) = event(&s)
            var later: [WriteBack.Action] = []
            for action in actions where !launch(action, &s) { later.append(action) }
            return (result, later)
        }
    }

    /// An open attaches a handle; false if the file is retired and not
    /// `new` (made for this open). Under the file system's lock, with the
    /// handle's registration.
    func attach(new: Bool, in s: inout FileSystem.State) -> Bool {
        withState(in: &s) { $0.writeBack.attach(new: new) }
    }

    /// Readers of a deleted generation move onto this copy (under the
    /// file system's lock, with the handles' move).
    func adopt(handles count: Int, in s: inout FileSystem.State) {
        withState(in: &s) { $0.writeBack.adopt(handles: count) }
    }

    /// A handle was released; true if it was the last.
    func released() -> Bool {
        withState { $0.writeBack.released() }
    }

    /// After the last release, and after each upload it led to (under
    /// the file system's lock, with the unregistering of a retired file).
    func retire(in s: inout FileSystem.State) -> WriteBack.RetireStep {
        withState(in: &s) { $0.writeBack.retire() }
    }

    /// The name is unlinked (or renamed over): nothing more is uploaded.
    /// Returns the upload in flight, which the caller waits for.
    func unlink(in s: inout FileSystem.State, launch: Launch) -> Task<Result<Void, FSError>, Never>? {
        transition(in: &s, { s in
            let (inFlight, actions) = s.writeBack.unlink()
            return (inFlight ? s.upload : nil, actions)
        }, launch: launch).result
    }

    /// The unlink or rename failed: the name is the file's again.
    func relink() {
        withState { $0.writeBack.relink() }
    }

    /// A copy only for descriptors of a deleted name: never uploaded.
    func markUnlinked() {
        withState { _ = $0.writeBack.unlink() }
    }

    /// A flush, fsync or release asks for an upload: the one to wait for,
    /// and whether it is the caller's (`start` makes it, as the file's
    /// upload Task, under the lock so a second flush joins it).
    func requestUpload(start: () -> Task<Result<Void, FSError>, Never>) -> (Task<Result<Void, FSError>, Never>, mine: Bool)? {
        withState { s in
            switch s.writeBack.uploadRequested() {
            case .nothing: return nil
            case .join: return s.upload.map { ($0, false) }
            case .start:
                let task = start()
                s.upload = task
                return (task, true)
            }
        }
    }

    /// The upload is over (after `uploaded` or `uploadFailed`).
    func uploadEnded() {
        withState { s in
            s.writeBack.uploadEnded()
            s.upload = nil
        }
    }

    /// An upload takes the open stream over: waits while its start is in
    /// flight; nil if there is none.
    func takeStream() async -> TakenStream? {
        while true {
            let (step, starting, taken) = withState { s -> (WriteBack.StreamTake, Task<Void, Never>?, TakenStream?) in
                let step = s.writeBack.takeStream()
                guard case .take(let failed) = step, let stream = s.stream else { return (step, s.streamStart, nil) }
                defer {
                    s.stream = nil
                    s.streamSend = nil
                }
                return (step, nil, TakenStream(stream: stream, lastSend: s.streamSend, sendFailed: failed))
            }
            switch step {
            case .none: return nil
            case .take: return taken
            case .waitForStart:
                // Set in the same critical section as `.starting`.
                if let starting { await starting.value } else { await Task.yield() }
            }
        }
    }

    /// The send of `stream` ended; ignored if it is no longer the file's.
    func streamSent(_ stream: UploadStream, ok: Bool) {
        withState { s in
            if s.stream === stream { s.writeBack.streamSent(ok: ok) }
        }
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
