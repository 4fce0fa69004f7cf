import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An open file. Writes will add a staged file here; for now it reads.
struct OpenFile: Sendable {
    let inode: UInt64
    let reader: FileReader
}

/// open, read, release.
extension FileSystem {
    /// Opens a file for reading, pinning the generation that is live now
    /// (from a fresh-enough stat; a stale one is refreshed first), so every
    /// read of this handle returns bytes of that one generation.
    public func open(_ inode: UInt64, flags: Int32) async throws(FSError) -> OpenReply {
        let file = try record(inode)
        guard file.kind == .file else { throw FSError(EISDIR, "open of directory \(file.path)") }
        // Writes are not implemented yet: any open that could modify the
        // file is refused as on a read-only filesystem.
        if flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0 {
            throw FSError(EROFS, "open for writing of \(file.path)")
        }
        let now = clock.now
        var info: ObjectInfo?
        if case .file(let cached)? = state.withLock({ $0.stats.lookup(file.path, now: now) }) {
            info = cached
        }
        if info == nil {
            let result = await statResult(objectName(file.path))
            let later = clock.now
            switch result {
            case .success(let fresh):
                state.withLock { $0.stats.insert(file.path, .file(fresh), now: later) }
                info = fresh
            case .failure(.notFound):
                state.withLock { $0.stats.insert(file.path, .absent, now: later) }
                throw failure(.notFound(objectName(file.path)), "open", file.path)
            case .failure(let error):
                throw failure(error, "stat", file.path)
            }
        }
        guard let info else { throw FSError(EIO, "no metadata for \(file.path)") }
        let reader = FileReader(
            objectName: objectName(file.path), info: info, store: store, cache: blockCache, budget: budget,
            readAhead: readAhead, logger: logger)
        return try state.withLock { s throws(FSError) in
            guard s.inodes[inode] != nil else { throw FSError(ENOENT, "inode \(inode) forgotten during open") }
            let unchanged = s.inodes.noteOpen(inode, generation: info.generation)
            s.inodes.pin(inode)
            let handle = s.nextHandle
            s.nextHandle += 1
            s.files[handle] = OpenFile(inode: inode, reader: reader)
            return OpenReply(handle: handle, directIO: false, keepCache: unchanged)
        }
    }

    /// Bytes of the generation pinned at open; empty at or past its end.
    /// If that generation is gone (replaced or deleted), ESTALE: never
    /// bytes of another generation.
    public func read(_ inode: UInt64, handle: UInt64, offset: Int64, size: Int) async throws(FSError) -> Data {
        guard let reader = state.withLock({ $0.files[handle]?.reader }) else {
            throw FSError(EBADF, "no file handle \(handle)")
        }
        guard offset >= 0, size >= 0 else { throw FSError(EINVAL, "read of \(size) bytes at \(offset)") }
        do {
            return try await reader.read(offset: offset, size: size)
        } catch .notFound(let message) {
            let stale = FSError(ESTALE, "generation \(reader.info.generation) of \(reader.objectName) is gone: \(message)")
            logger.warning("read of a replaced or deleted object", metadata: [
                "object": "\(reader.objectName)", "generation": "\(reader.info.generation)", "errno": "\(ESTALE)"])
            throw stale
        } catch {
            throw failure(error, "read", String(reader.objectName.dropFirst(objectPrefix.count)))
        }
    }

    public func release(_ inode: UInt64, handle: UInt64) async throws(FSError) {
        let reader = state.withLock { s -> FileReader? in
            guard let file = s.files.removeValue(forKey: handle) else { return nil }
            s.inodes.unpin(file.inode)
            s.inodes.checkInvariants()
            return file.reader
        }
        reader?.close()
    }
}
