import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// An open file handle. Reads go to the inode's staged file when it has
/// one (read-your-writes, for every handle), else to `reader`.
struct OpenFile: Sendable {
    let inode: UInt64
    /// The generation pinned at open, for read-only handles.
    let reader: FileReader?
    let writable: Bool
}

/// The operations on a file handle: open, read, write, flush, fsync,
/// release. Those of a handle open for writing are forwards to the
/// write-back executor (`WriteBack/Uploads.swift`).
extension FileSystem {
    /// Opens a file. A read-only open pins the generation that is live now
    /// (from a fresh-enough stat; a stale one is refreshed first), so every
    /// read of this handle returns bytes of that one generation. An open
    /// for writing (or with O_TRUNC, which atomic O_TRUNC delivers here)
    /// attaches to the inode's staged file, creating it from that
    /// generation if needed.
    ///
    /// A write-only handle bypasses the kernel's page cache (`directIO`):
    /// its writes come here straight from the writer's buffer, not through
    /// pages the kernel fills and keeps for bytes that nothing through
    /// this handle can read back. Keeping them cost a `cp` of 256 MiB a
    /// copy and 256 MiB of new page cache besides the staged file's
    /// (docs/performance.md). Handles that can read keep the page cache;
    /// they may map the file, which a direct-I/O handle cannot. The
    /// kernel drops any page another handle cached for a range a direct
    /// write covers, so those readers see the new bytes.
    public func open(_ inode: UInt64, flags: Int32) async throws(FSError) -> OpenReply {
        let file = try record(inode)
        guard file.kind != .directory else { throw FSError(.isDirectory, "open of directory \(file.path)") }
        let writing = flags & O_ACCMODE != O_RDONLY || flags & O_TRUNC != 0
        let writeOnly = flags & O_ACCMODE == O_WRONLY
        if writing { try refuseIfReadOnly("open for writing of \(file.path)") }

        if let staged = state.withLock({ $0.staged[inode] }),
           let reply = try await attach(
               inode, staged, fresh: false, writable: writing, directIO: writeOnly, truncate: flags & O_TRUNC != 0) {
            return reply
        }
        let info = try await currentInfo(file.path)
        if writing {
            let staged = try writeBack.makeStagedFile(path: file.path, base: info, truncated: flags & O_TRUNC != 0)
            guard let reply = try await attach(
                inode, staged, fresh: true, writable: true, directIO: writeOnly, truncate: flags & O_TRUNC != 0) else {
                throw FSError(.ioError, "open of \(file.path): a new staged file was refused")
            }
            return reply
        }
        let reader = makeReader(file.path, info)
        return try state.withLock { s throws(FSError) in
            guard s.inodes[inode] != nil else { throw FSError(.notFound, "inode \(inode) forgotten during open") }
            let unchanged = s.inodes.noteOpen(inode, generation: info.generation)
            return newHandle(OpenFile(inode: inode, reader: reader, writable: false), &s, keepCache: unchanged, directIO: false)
        }
    }

    /// The object's metadata, from the metadata cache while fresh, else a stat.
    func currentInfo(_ path: String) async throws(FSError) -> ObjectInfo {
        let now = clock.now
        if case .file(let cached)? = state.withLock({ $0.metadata.node(path, now: now) }) {
            return cached
        }
        let result = await store.statResult(objectName(path))
        let later = clock.now
        switch result {
        case .success(let fresh):
            state.withLock { $0.metadata.apply(.stated(path, .file(fresh)), now: later) }
            return fresh
        case .failure(.notFound):
            state.withLock { $0.metadata.apply(.stated(path, .absent), now: later) }
            throw failure(.notFound(objectName(path)), during: .lookup, "open", path)
        case .failure(let error):
            throw failure(error, during: .lookup, "stat", path)
        }
    }

    func makeReader(_ path: String, _ info: ObjectInfo) -> FileReader {
        FileReader(objectName: objectName(path), info: info, store: store, cache: blockCache, budget: budget,
                   readAhead: readAhead, logger: logger)
    }

    /// A handle on the staged file registered for `inode`, else on
    /// `candidate` (then registered), truncated if asked; `directIO` for a
    /// write-only handle (`open`).
    ///
    /// `fresh`: `candidate` was just made for this open, and is discarded
    /// if another open registered one first. Otherwise it is the one this
    /// open found registered a moment ago; if the last release of its
    /// handles retired it meanwhile (local copy deleted, descriptor
    /// closed), nothing is attached and nil says so: the caller opens
    /// afresh. Re-registering a retired staged file would write through a
    /// closed descriptor whose number another file may have by then, and
    /// discarding it again would close that other file.
    func attach(
        _ inode: UInt64, _ candidate: StagedFile, fresh: Bool, writable: Bool, directIO: Bool, truncate: Bool
    ) async throws(FSError) -> OpenReply? {
        let attached = try state.withLock { s throws(FSError) -> (OpenReply, StagedFile)? in
            guard s.inodes[inode] != nil else { throw FSError(.notFound, "inode \(inode) forgotten during open") }
            // A registered file is never retired (retiring unregisters it).
            let staged = s.staged[inode] ?? candidate
            guard writeBack.handle(.attach(new: fresh || staged !== candidate), of: staged, in: &s) == .accepted(true) else { return nil }
            s.staged[inode] = staged
            // The kernel's cached pages may predate writes: drop them.
            let file = OpenFile(inode: inode, reader: nil, writable: writable)
            return (newHandle(file, &s, keepCache: false, directIO: directIO), staged)
        }
        guard let (reply, staged) = attached else { return nil }
        if fresh, staged !== candidate { writeBack.discard(candidate) }
        if truncate {
            do {
                try await writeBack.truncate(staged, to: 0)
            } catch {
                try? await release(inode, handle: reply.handle)
                throw error
            }
        }
        return reply
    }

    /// The open file behind `handle`, and its inode's staged file if any.
    func openFile(_ handle: UInt64) -> (OpenFile, StagedFile?)? {
        state.withLock { s in s.files[handle].map { ($0, s.staged[$0.inode]) } }
    }

    private func newHandle(_ file: OpenFile, _ s: inout State, keepCache: Bool, directIO: Bool) -> OpenReply {
        s.inodes.pin(file.inode)
        let handle = s.nextHandle
        s.nextHandle += 1
        s.files[handle] = file
        return OpenReply(handle: handle, directIO: directIO, keepCache: keepCache)
    }

    /// Bytes of the staged file if the inode has one; else of the
    /// generation pinned at open. If that generation is gone (replaced or
    /// deleted), ESTALE: never bytes of another generation.
    public func read(_ inode: UInt64, handle: UInt64, offset: Int64, size: Int) async throws(FSError) -> Data {
        let data = try await readBytes(handle: handle, offset: offset, size: size)
        FileSystemMetrics.readBytes.increment(by: Int64(data.count))
        return data
    }

    private func readBytes(handle: UInt64, offset: Int64, size: Int) async throws(FSError) -> Data {
        guard let (file, staged) = openFile(handle) else { throw FSError(.badHandle, "no file handle \(handle)") }
        guard offset >= 0, size >= 0 else { throw FSError(.invalid, "read of \(size) bytes at \(offset)") }
        if let staged { return try await staged.read(at: offset, count: size) }
        guard let reader = file.reader else { throw FSError(.badHandle, "handle \(handle) has nothing to read") }
        do {
            return try await reader.read(offset: offset, size: size)
        } catch .notFound(let message) {
            let stale = FSError(.stale, "generation \(reader.info.generation) of \(reader.objectName) is gone: \(message)")
            logger.warning("read of a replaced or deleted object", metadata: [
                "object": "\(reader.objectName)", "generation": "\(reader.info.generation)", "errno": "\(stale.errno)"])
            // Attributes only: this read holds the kernel's lock on the page
            // it reads, which a page invalidation would wait for.
            await forgetReplaced(String(reader.objectName.dropFirst(objectPrefix.count)), pages: false)
            throw stale
        } catch {
            throw failure(error, during: .read, "read", String(reader.objectName.dropFirst(objectPrefix.count)))
        }
    }



    public func write(_ inode: UInt64, handle: UInt64, offset: Int64, data: Data) async throws(FSError) -> Int {
        guard let (file, staged) = openFile(handle) else { throw FSError(.badHandle, "no file handle \(handle)") }
        guard file.writable, let staged else { throw FSError(.badHandle, "handle \(handle) is not open for writing") }
        guard offset >= 0 else { throw FSError(.invalid, "write at \(offset)") }
        guard offset + Int64(data.count) <= Self.maximumFileSize else { throw FSError(.tooLarge, "write past 5 TiB") }
        try await clearSetIDBitsBeforeWrite(inode, handle: handle)
        try await writeBack.write(data, at: offset, to: staged)
        FileSystemMetrics.writtenBytes.increment(by: Int64(data.count))
        return data.count
    }

    /// Cloud Storage's object size limit.
    static let maximumFileSize: Int64 = 5 << 40

    /// A write by anyone but root clears the file's setuid bit, and its
    /// setgid bit if group execute is set, as on a local disk (the
    /// kernel's `should_remove_suid`; root stands for CAP_FSETID, which a
    /// FUSE request does not carry). The kernel does it itself, with a
    /// setattr, before a write through the page cache; before a
    /// direct-I/O write (a write-only handle, `open`) it leaves it to the
    /// filesystem with FUSE_WRITE_KILL_SUIDGID, a flag libfuse 3.14 does
    /// not pass on. So the core does it for every write; after the
    /// kernel's setattr there is nothing left to clear.
    func clearSetIDBitsBeforeWrite(_ inode: UInt64, handle: UInt64) async throws(FSError) {
        guard let caller = Caller.current, caller.uid != 0 else { return }
        let mode = try await getattr(inode).attributes.mode
        let setID = UInt32(S_ISUID) | (mode & UInt32(S_IXGRP) != 0 ? UInt32(S_ISGID) : 0)
        guard mode & setID != 0 else { return }
        _ = try await setattr(inode, handle: handle, changes: AttributeChanges(mode: mode & 0o7777 & ~setID))
    }

    /// Every close; only a writable handle's uploads (a reader's close does
    /// not upload another handle's writes).
    public func flush(_ inode: UInt64, handle: UInt64, pid: Int32) async throws(FSError) {
        guard let (file, staged) = openFile(handle), file.writable, let staged else { return }
        try await writeBack.closed(staged, inode: inode, pid: pid)
    }

    /// Every close uploads (no process to ask about its other descriptors).
    public func flush(_ inode: UInt64, handle: UInt64) async throws(FSError) {
        try await flush(inode, handle: handle, pid: 0)
    }

    public func fsync(_ inode: UInt64, handle: UInt64) async throws(FSError) {
        guard let staged = openFile(handle)?.1 else { return }
        try await writeBack.upload(staged, inode: inode, reason: "fsync", interruptible: true)
    }

    /// The last close of a file descriptor: its handle goes; one attached
    /// to a staged file is released from it (the write-back executor's
    /// `released`).
    public func release(_ inode: UInt64, handle: UInt64) async throws(FSError) {
        let closing = state.withLock { s -> (OpenFile, StagedFile?)? in
            guard let file = s.files.removeValue(forKey: handle) else { return nil }
            return (file, s.staged[file.inode])
        }
        guard let (file, staged) = closing else { return }
        file.reader?.close()
        // Only handles attached to the staged file (those without a reader
        // of their own) count among its handles.
        if let staged, file.reader == nil { await writeBack.released(staged, inode: inode) }
        state.withLock { s in
            s.inodes.unpin(file.inode)
            s.inodes.checkInvariants()
        }
    }
}
