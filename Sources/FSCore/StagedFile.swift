import Foundation
import Logging
import Synchronization

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
/// Every change bumps `version`; a file is dirty while `version` is not the
/// uploaded one. Uploads themselves are run by `FileSystem`.
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
        var version: UInt64 = 0
        var uploadedVersion: UInt64 = 0
        /// The version whose upload failed: release does not try it again
        /// (its bytes are in the recovery folder already).
        var failedVersion: UInt64?
        /// Metadata changes to send with the next upload (chmod on a dirty
        /// file, for example). nil values delete a key.
        var pendingMetadata: [String: String?] = [:]
        /// Standard properties to set with the next upload (only those
        /// fields of the patch; its custom keys are in `pendingMetadata`).
        var pendingProperties = MetadataPatch()
        var modificationTime: Timestamp
        /// Handles open on this file.
        var handles = 0
        /// The name was unlinked: nothing more is uploaded.
        var unlinked = false
        /// The last handle is gone and the local copy deleted: a change that
        /// finds this must go to the object instead.
        var retired = false
        /// A journal beside the local file says where its bytes go (written
        /// at the first write after each upload; see `adoptLeftovers`).
        var journaled = false
        /// Bytes [0, sequentialEnd) were written in order from an empty
        /// file, and nothing else: such a file can stream its upload.
        var sequentialEnd: Int64?
        /// The upload in flight, so two flushes never upload at once.
        var upload: Task<Result<Void, FSError>, Never>?
        /// The upload started while writing in order (see `UploadStream`).
        var stream: UploadStream?
        /// The stream's start request in flight: an upload waits for it, so
        /// a close right after the first chunk's worth of writes finishes
        /// that stream instead of racing it with a second, whole upload.
        var streamStart: Task<Void, Never>?

        var dirty: Bool { version != uploadedVersion }
    }

    let state: Mutex<State>

    init(file: LocalFile, base: ObjectInfo?, baseReader: FileReader?, blockSize: Int64, now: Timestamp, logger: Logger) {
        self.file = file
        self.blockSize = blockSize
        self.logger = logger
        let size = base?.size ?? 0
        var initial = State(base: base, baseReader: baseReader, baseLimit: size, size: size,
                            modificationTime: base.map(AttributeMapper.modificationTime) ?? now)
        initial.sequentialEnd = size == 0 ? 0 : nil
        self.state = Mutex(initial)
    }

    var size: Int64 { state.withLock { $0.size } }
    var journalPath: String { file.path + RecoveryFolder.journalSuffix }
    var isDirty: Bool { state.withLock { $0.dirty } }

    /// A file made by create: it must reach the bucket even if nothing
    /// is written (`touch`), with its mode when not the mount's default.
    func markCreated(metadata: [String: String]) {
        state.withLock { s in
            s.version += 1
            for (key, value) in metadata { s.pendingMetadata[key] = value }
        }
    }

    /// Created here, never uploaded, and nothing done to it since (no
    /// write, truncation or attribute change): the state right after create.
    var isUntouchedNewFile: Bool {
        state.withLock { $0.base == nil && $0.version == 1 && $0.uploadedVersion == 0 && $0.size == 0 && !$0.unlinked }
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
    /// local file holds all of it (`fetchAll` ran first).
    func uploaded(version: UInt64, info: ObjectInfo, sentMetadata: [String: String?]) {
        adoptBase(info) { s in
            s.uploadedVersion = max(s.uploadedVersion, version)
            s.failedVersion = nil
            // Appends after an upload cannot continue its session.
            if s.size > 0 { s.sequentialEnd = nil }
            for (key, value) in sentMetadata where s.pendingMetadata[key] == value { s.pendingMetadata[key] = nil }
            s.pendingProperties = MetadataPatch()
        }
    }

    /// Applies a change that is to ride along with the coming upload, if
    /// there is one: only while the file is dirty and not retired (else
    /// false: the caller changes the object itself). The change counts as
    /// a write, so an upload already in flight is followed by another.
    func rideAlong(_ change: (inout State) -> Void) -> Bool {
        state.withLock { s in
            guard s.dirty, !s.retired, !s.unlinked else { return false }
            change(&s)
            s.version += 1
            return true
        }
    }

    /// Whether release still owes this file an upload.
    var needsFinalUpload: Bool {
        state.withLock { $0.dirty && $0.failedVersion != $0.version && !$0.unlinked }
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

    /// Writes `data` at `offset`, growing the file as needed.
    func write(_ data: Data, at offset: Int64, now: Timestamp) async throws(FSError) {
        guard !data.isEmpty else { return }
        let range = offset..<(offset + Int64(data.count))
        try await ensurePresent(range, partialOnly: true)
        try file.write(data, at: offset)
        state.withLock { s in
            s.size = max(s.size, range.upperBound)
            s.version += 1
            s.modificationTime = now
            // In order means exactly at the end; anything else (a rewrite,
            // a hole) ends streaming for this content.
            if let end = s.sequentialEnd { s.sequentialEnd = offset == end ? range.upperBound : nil }
        }
    }

    /// Sets the size: shrinking forgets the base bytes past it, growing
    /// adds zeros. A no-op change is not a change (`> f` on an empty file
    /// uploads nothing).
    /// Returns false, changing nothing, if the file was retired meanwhile
    /// (its last release finished: the change must go to the object).
    @discardableResult
    func truncate(to newSize: Int64, now: Timestamp) async throws(FSError) -> Bool {
        // Fetches in flight would write base bytes back past the new end.
        await waitForFetches()
        let (changed, dropped) = state.withLock { s -> (Bool?, UploadStream?) in
            guard !s.retired else { return (nil, nil) }
            // The stream carries bytes that are no longer the content.
            let dropped = s.stream
            s.stream = nil
            guard s.size != newSize else { return (false, dropped) }
            s.baseLimit = min(s.baseLimit, newSize)
            s.present = s.present.filter { $0 * blockSize < s.baseLimit }
            s.size = newSize
            s.version += 1
            s.modificationTime = now
            if newSize == 0 { s.sequentialEnd = 0 } else if let end = s.sequentialEnd, newSize != end { s.sequentialEnd = nil }
            return (true, dropped)
        }
        if let dropped { Task { await dropped.put.abandon() } }
        guard let changed else { return false }
        if changed { try file.truncate(to: newSize) }
        return true
    }

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
