import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The content of a file open for writing: a sparse local copy in the cache
/// directory's `staging/` folder, one per inode, shared by every handle.
///
/// An existing object is not downloaded at open: its blocks are fetched
/// (through a `FileReader` pinned to the generation that was opened, so the
/// block cache and read-ahead apply) the first time a read touches them, a
/// write touches them only in part, or an upload needs the whole file. An
/// append to a large object therefore downloads nothing until it is
/// uploaded. A block written in full is never fetched.
///
/// Truncation keeps `baseLimit`: base bytes at or past it are gone (they
/// read as zeros, as the sparse local file does), so they are never fetched.
///
/// Its lifecycle (dirty or clean, uploads, handles, the name, the journal,
/// the stream) is the `WriteBack` machine in its state; every event goes
/// through the methods here, under its lock. The uploads and streams the
/// machine asks for are run by `FileSystem`'s write-back executor.
final class StagedFile: Sendable {
    let file: LocalFile
    let blockSize: Int64
    let logger: Logger

    struct State: Sendable {
        /// The object this content replaces: its generation is the upload's
        /// precondition, its metadata is kept. nil: a new file.
        var base: ObjectInfo?
        var baseReader: FileReader?
        var baseLimit: Int64
        /// Blocks below `baseLimit` already in the local file.
        var present: Set<Int64> = []
        var fetching: [Int64: Task<Result<Void, FSError>, Never>] = [:]
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

        var dirty: Bool { writeBack.dirty }
    }

    let state: RankedLock<State>

    init(
        file: LocalFile, base: ObjectInfo?, baseReader: FileReader?, blockSize: Int64, streamChunk: Int64, now: Timestamp,
        logger: Logger
    ) {
        self.file = file
        self.blockSize = blockSize
        self.logger = logger
        let size = base?.size ?? 0
        self.state = RankedLock(.stagedFile, State(
            base: base, baseReader: baseReader, baseLimit: size, size: size,
            modificationTime: base.map(AttributeMapper.modificationTime) ?? now,
            writeBack: WriteBack(streamChunk: streamChunk, emptyAtStart: size == 0)))
    }

    var size: Int64 { state.withLock { $0.size } }
    var journalPath: String { file.path + RecoveryFolder.journalSuffix }
    var isDirty: Bool { state.withLock { $0.dirty } }

    /// A file made by create: it must reach the bucket even if nothing
    /// is written (`touch`), with its mode when not the mount's default.
    func markCreated(metadata: [String: String]) {
        state.withLock { s in
            s.writeBack.created()
            for (key, value) in metadata { s.pendingMetadata[key] = value }
        }
    }

    /// Created here, never uploaded, and nothing done to it since (no
    /// write, truncation or attribute change): the state right after create.
    var isUntouchedNewFile: Bool {
        state.withLock { $0.base == nil && $0.size == 0 && $0.writeBack.untouchedSinceCreate }
    }

    /// The object this file will be once uploaded, as `stat` shows it.
    func view(objectName: String) -> ObjectInfo {
        state.withLock { s in
            var info = s.base ?? ObjectInfo(name: objectName, size: 0, generation: 0, updated: Date())
            info.name = objectName
            info.size = s.size
            for (key, value) in s.pendingMetadata { info.customMetadata[key] = value }
            s.pendingProperties.apply(to: &info)
            let mtime = Double(s.modificationTime.seconds) + Double(s.modificationTime.nanoseconds) / 1e9
            info.customMetadata[AttributeMapper.mtimeKey] = String(mtime)
            if s.dirty { info.updated = Date() }
            return info
        }
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
        state.withLock { $0.writeBack.uploadFailed(version) }
    }

    /// The phase `bucketfs status` shows, with the size and handles.
    var snapshot: (phase: WriteBack.Phase, size: Int64, handles: Int) {
        state.withLock { ($0.writeBack.phase, $0.size, $0.writeBack.handles) }
    }

    var isUnlinked: Bool { state.withLock { $0.writeBack.name == .unlinked } }
    /// Live: neither unlinked nor retired (getattr shows its staged view).
    var isLive: Bool { state.withLock { $0.writeBack.name == .live } }
    var isJournaled: Bool { state.withLock { $0.writeBack.journaled } }
    var holdsUnsavedWrites: Bool { state.withLock { $0.writeBack.holdsUnsavedWrites } }

    /// Applies a change that is to ride along with the coming upload, if
    /// there is one: only while the file is dirty and not retired (else
    /// false: the caller changes the object itself). The change counts as
    /// a write, so an upload already in flight is followed by another.
    func rideAlong(_ change: (inout State) -> Void) -> Bool {
        state.withLock { s in
            guard s.writeBack.rideAlong() else { return false }
            change(&s)
            return true
        }
    }

    /// Whether release still owes this file an upload.
    var needsFinalUpload: Bool {
        state.withLock { $0.writeBack.owesFinalUpload }
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
        state.withLock { s in
            guard let base = s.base, base.generation == info.generation else { return }
            s.base = info
            if !s.dirty { s.modificationTime = AttributeMapper.modificationTime(info) }
        }
    }

    /// The object was copied to a new name (rename): the copy is the new
    /// base. The caller made the content local first (`fetchAll`).
    func renamed(to copy: ObjectInfo) {
        adoptBase(copy) { _ in }
    }

    /// `info` is the new base, and the local file holds all of its bytes:
    /// nothing is left to fetch, so the reader of the old base goes.
    private func adoptBase(_ info: ObjectInfo, _ alsoChange: (inout State) -> Void) {
        let reader = state.withLock { s -> FileReader? in
            alsoChange(&s)
            s.base = info
            s.baseLimit = 0
            s.present = []
            defer { s.baseReader = nil }
            return s.baseReader
        }
        reader?.close()
    }

    // MARK: - Content

    /// Up to `count` bytes at `offset` of the current content.
    func read(at offset: Int64, count: Int) async throws(FSError) -> Data {
        let size = self.size
        guard offset < size, count > 0 else { return Data() }
        let end = min(size, offset + Int64(count))
        try await ensurePresent(offset..<end)
        return try file.read(at: offset, count: Int(end - offset))
    }

    /// Writes `data` at `offset`, growing the file as needed. Returns the
    /// machine's actions that `launch` left for after the lock.
    func write(_ data: Data, at offset: Int64, now: Timestamp, launch: Launch) async throws(FSError) -> [WriteBack.Action] {
        guard !data.isEmpty else { return [] }
        let range = offset..<(offset + Int64(data.count))
        try await ensurePresent(range, partialOnly: true)
        try file.write(data, at: offset)
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
        // Fetches in flight would write base bytes back past the new end.
        await waitForFetches()
        let changed = transition({ s -> (Bool?, [WriteBack.Action]) in
            guard let actions = s.writeBack.truncated(from: s.size, to: newSize) else { return (nil, []) }
            guard s.size != newSize else { return (false, actions) }
            s.baseLimit = min(s.baseLimit, newSize)
            s.present = s.present.filter { $0 * blockSize < s.baseLimit }
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
        state.withLock { s in
            let (result, actions) = event(&s)
            var later: [WriteBack.Action] = []
            for action in actions where !launch(action, &s) { later.append(action) }
            return (result, later)
        }
    }

    /// An open attaches a handle; false if the file is retired and not
    /// `new` (made for this open).
    func attach(new: Bool) -> Bool {
        state.withLock { $0.writeBack.attach(new: new) }
    }

    /// Readers of a deleted generation move onto this copy.
    func adopt(handles count: Int) {
        state.withLock { $0.writeBack.adopt(handles: count) }
    }

    /// A handle was released; true if it was the last.
    func released() -> Bool {
        state.withLock { $0.writeBack.released() }
    }

    /// After the last release, and after each upload it led to.
    func retire() -> WriteBack.RetireStep {
        state.withLock { $0.writeBack.retire() }
    }

    /// The name is unlinked (or renamed over): nothing more is uploaded.
    /// Returns the upload in flight, which the caller waits for.
    func unlink(launch: Launch) -> Task<Result<Void, FSError>, Never>? {
        transition({ s in
            let (inFlight, actions) = s.writeBack.unlink()
            return (inFlight ? s.upload : nil, actions)
        }, launch: launch).result
    }

    /// The unlink or rename failed: the name is the file's again.
    func relink() {
        state.withLock { $0.writeBack.relink() }
    }

    /// A copy only for descriptors of a deleted name: never uploaded.
    func markUnlinked() {
        state.withLock { $0.writeBack.markUnlinked() }
    }

    /// A flush, fsync or release asks for an upload: the one to wait for,
    /// and whether it is the caller's (`start` makes it, as the file's
    /// upload Task, under the lock so a second flush joins it).
    func requestUpload(start: () -> Task<Result<Void, FSError>, Never>) -> (Task<Result<Void, FSError>, Never>, mine: Bool)? {
        state.withLock { s in
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
        state.withLock { s in
            s.writeBack.uploadEnded()
            s.upload = nil
        }
    }

    /// An upload takes the open stream over: waits while its start is in
    /// flight; nil if there is none.
    func takeStream() async -> UploadStream? {
        while true {
            let (step, starting, stream) = state.withLock { s -> (WriteBack.StreamTake, Task<Void, Never>?, UploadStream?) in
                let step = s.writeBack.takeStream()
                defer { if step == .take { s.stream = nil } }
                return (step, s.streamStart, s.stream)
            }
            switch step {
            case .none: return nil
            case .take: return stream
            case .waitForStart:
                // Set in the same critical section as `.starting`.
                if let starting { await starting.value } else { await Task.yield() }
            }
        }
    }

    /// The send of `stream` ended; ignored if it is no longer the file's.
    func streamSent(_ stream: UploadStream, ok: Bool) {
        state.withLock { s in
            if s.stream === stream { s.writeBack.streamSent(ok: ok) }
        }
    }

    /// The resources a discarded file leaves: the base's reader and the
    /// stream, taken out of the state.
    func takeResources() -> (FileReader?, UploadStream?) {
        state.withLock { s in
            defer {
                s.baseReader = nil
                s.stream = nil
            }
            return (s.baseReader, s.stream)
        }
    }

    var current: State { state.withLock { $0 } }
    var base: ObjectInfo? { state.withLock { $0.base } }
    var handleCount: Int { state.withLock { $0.writeBack.handles } }

    /// Fetches every base block still missing: before an upload, the local
    /// file must hold the whole content.
    func fetchAll() async throws(FSError) {
        let limit = state.withLock { $0.baseLimit }
        guard limit > 0 else { return }
        try await ensurePresent(0..<limit)
    }

    // MARK: - Fetching base blocks

    /// Makes the blocks under `range` present. With `partialOnly`, a block
    /// the range covers completely (or up to `baseLimit`) is about to be
    /// overwritten whole and is marked present without a download.
    private func ensurePresent(_ range: Range<Int64>, partialOnly: Bool = false) async throws(FSError) {
        guard !range.isEmpty else { return }
        var waits: [Task<Result<Void, FSError>, Never>] = []
        state.withLock { s in
            guard range.lowerBound < s.baseLimit else { return }
            let last = (min(range.upperBound, s.baseLimit) - 1) / blockSize
            for block in (range.lowerBound / blockSize)...last where !s.present.contains(block) {
                if let task = s.fetching[block] {
                    waits.append(task)
                    continue
                }
                let blockRange = (block * blockSize)..<min((block + 1) * blockSize, s.baseLimit)
                if partialOnly, range.lowerBound <= blockRange.lowerBound, range.upperBound >= blockRange.upperBound {
                    s.present.insert(block)
                    continue
                }
                let task = Task { await self.fetch(block, blockRange) }
                s.fetching[block] = task
                waits.append(task)
            }
        }
        for task in waits {
            if case .failure(let error) = await task.value { throw error }
        }
    }

    private func fetch(_ block: Int64, _ range: Range<Int64>) async -> Result<Void, FSError> {
        let reader = state.withLock { $0.baseReader }
        let result: Result<Void, FSError>
        do throws(FSError) {
            guard let reader else { throw FSError(.ioError, "no reader for the base of \(file.path)") }
            let data: Data
            do {
                data = try await reader.read(offset: range.lowerBound, size: range.count)
            } catch .notFound {
                throw FSError(.stale, "generation \(reader.info.generation) of \(reader.objectName) is gone")
            } catch {
                throw FSError(error, during: .read, "read of \(reader.objectName)")
            }
            try file.write(data, at: range.lowerBound)
            result = .success(())
        } catch {
            result = .failure(error)
        }
        state.withLock { s in
            s.fetching[block] = nil
            if case .success = result, block * blockSize < s.baseLimit { s.present.insert(block) }
        }
        return result
    }

    private func waitForFetches() async {
        let tasks = state.withLock { Array($0.fetching.values) }
        for task in tasks { _ = await task.value }
    }
}
