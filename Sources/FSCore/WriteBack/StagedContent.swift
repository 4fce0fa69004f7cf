import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The bytes of a staged file, and nothing of its lifecycle: a sparse local
/// copy in the cache directory's `staging/` folder of the object it
/// replaces, whose blocks are fetched lazily.
///
/// An existing object is not downloaded at open: its blocks are fetched
/// (through a `FileReader` pinned to the generation that was opened, so the
/// block cache and read-ahead apply) the first time a read touches them, a
/// write touches them only in part, or an upload needs the whole file. An
/// append to a large object therefore downloads nothing until it is
/// uploaded. A block written in full is never fetched.
///
/// Truncation lowers `limit`: base bytes at or past it are gone (they read
/// as zeros, as the sparse local file does), so they are never fetched.
///
/// The size of the content, and whether it is dirty, uploaded or retired,
/// are the owning `StagedFile`'s (under the file system's lock); this type
/// keeps which base blocks are local under a leaf lock of its own, taken
/// apart from that one.
final class StagedContent: Sendable {
    let file: LocalFile
    let blockSize: Int64

    struct Blocks: Sendable {
        /// Reads the base (nil: a new file, or every base byte is local).
        var reader: FileReader?
        /// Base bytes at or past it are not the content's.
        var limit: Int64
        /// Blocks below `limit` already in the local file.
        var present: Set<Int64> = []
        var fetching: [Int64: Task<Result<Void, FSError>, Never>] = [:]
    }

    private let blocks: OrderedLock<Blocks>

    /// `baseReader` reads the object whose `baseSize` bytes the content
    /// starts with (nil: it starts empty).
    init(file: LocalFile, blockSize: Int64, baseReader: FileReader?, baseSize: Int64) {
        self.file = file
        self.blockSize = blockSize
        self.blocks = OrderedLock("staged content blocks", Blocks(reader: baseReader, limit: baseReader == nil ? 0 : baseSize))
    }

    var path: String { file.path }

    /// The bytes `range` of the content (fetching base blocks it lacks).
    func read(_ range: Range<Int64>) async throws(FSError) -> Data {
        try await ensurePresent(range)
        return try file.read(at: range.lowerBound, count: range.count)
    }

    /// Writes `data` at `offset` (first fetching the base blocks it covers
    /// only in part).
    func write(_ data: Data, at offset: Int64) async throws(FSError) {
        try await ensurePresent(offset..<(offset + Int64(data.count)), partialOnly: true)
        try file.write(data, at: offset)
    }

    /// Fetches every base block still missing: before an upload, the local
    /// file must hold the whole content.
    func fetchAll() async throws(FSError) {
        let limit = blocks.withLock { $0.limit }
        guard limit > 0 else { return }
        try await ensurePresent(0..<limit)
    }

    /// Waits for the fetches in flight (they would write base bytes back
    /// past a new end).
    func waitForFetches() async {
        let tasks = blocks.withLock { Array($0.fetching.values) }
        for task in tasks { _ = await task.value }
    }

    /// The content is about to be cut to `size`: base bytes at or past it
    /// are no longer the content's and are never fetched (the caller waits
    /// for the fetches in flight, then truncates the file).
    func forgetBase(from size: Int64) {
        blocks.withLock { b in
            b.limit = min(b.limit, size)
            b.present = b.present.filter { $0 * blockSize < b.limit }
        }
    }

    /// Every byte is local (an upload or a copy stored it as the new base):
    /// nothing is left to fetch, so the reader of the old base goes.
    func holdsEverything() {
        let reader = blocks.withLock { b -> FileReader? in
            b.limit = 0
            b.present = []
            defer { b.reader = nil }
            return b.reader
        }
        reader?.close()
    }

    /// Deletes the local copy (the staged file is discarded).
    func delete(journal: String) {
        holdsEverything()
        file.close()
        Glibc.unlink(file.path)
        Glibc.unlink(journal)
    }

    // MARK: - Fetching base blocks

    /// Makes the blocks under `range` present. With `partialOnly`, a block
    /// the range covers completely (or up to `limit`) is about to be
    /// overwritten whole and is marked present without a download.
    private func ensurePresent(_ range: Range<Int64>, partialOnly: Bool = false) async throws(FSError) {
        guard !range.isEmpty else { return }
        let waits = blocks.withLock { b -> [Task<Result<Void, FSError>, Never>] in
            guard range.lowerBound < b.limit else { return [] }
            var waits: [Task<Result<Void, FSError>, Never>] = []
            let last = (min(range.upperBound, b.limit) - 1) / blockSize
            for block in (range.lowerBound / blockSize)...last where !b.present.contains(block) {
                if let task = b.fetching[block] {
                    waits.append(task)
                    continue
                }
                let blockRange = (block * blockSize)..<min((block + 1) * blockSize, b.limit)
                if partialOnly, range.lowerBound <= blockRange.lowerBound, range.upperBound >= blockRange.upperBound {
                    b.present.insert(block)
                    continue
                }
                let task = Task { await self.fetch(block, blockRange) }
                b.fetching[block] = task
                waits.append(task)
            }
            return waits
        }
        for task in waits {
            if case .failure(let error) = await task.value { throw error }
        }
    }

    private func fetch(_ block: Int64, _ range: Range<Int64>) async -> Result<Void, FSError> {
        let reader = blocks.withLock { $0.reader }
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
        blocks.withLock { b in
            b.fetching[block] = nil
            if case .success = result, block * blockSize < b.limit { b.present.insert(block) }
        }
        return result
    }
}
