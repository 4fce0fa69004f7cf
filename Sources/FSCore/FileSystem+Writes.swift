import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// create, mknod, the staged files they make, and unmount's uploads.
///
/// Only flush (every close), fsync and release upload, and only a dirty
/// file: `put` of the whole staged file with the generation it replaces as
/// `ifGenerationMatch` (0 for a new file), its content type and custom
/// metadata kept, `goog-reserved-file-mtime` only if the mtime was set after
/// the last write (`WriteBackStore.uploadMetadata`). If the
/// precondition fails, ESTALE and nothing is overwritten; if the store
/// refuses the write (credentials, IAM, Security Rules), EACCES; any other
/// failure is EIO. Either way the bytes are copied to the recovery folder
/// first.
extension FileSystem {
    func refuseIfReadOnly(_ what: @autoclosure () -> String) throws(FSError) {
        if options.readOnly { throw FSError(.readOnly, "read-only mount: \(what())") }
    }

    public func create(parent: UInt64, name: String, mode: UInt32, flags: Int32) async throws(FSError) -> (EntryReply, OpenReply) {
        let path = try newEntryPath(parent: parent, name: name, "create")
        guard mode & UInt32(S_IFMT) == 0 || mode & UInt32(S_IFMT) == UInt32(S_IFREG) else {
            throw FSError(.notPermitted, "only regular files can be created: \(path)")
        }
        let metadata = await newEntryMetadata(parent: parent, type: UInt32(S_IFREG), mode: mode)
        let staged = try writeBack.makeStagedFile(path: path, base: nil, truncated: false)
        let now = clock.now
        let (inode, entry) = state.withLock { s -> (UInt64, EntryReply) in
            let inode = s.inodes.lookup(path, kind: .file)
            s.metadata.apply(.forgotten(path, listing: false), now: now)
            if s.staged[inode] == nil {
                s.staged[inode] = staged
                writeBack.created(staged, metadata: metadata, in: &s)
            }
            return (inode, entryReply(stagedAttributes(s.staged[inode]!, path: path, inode: inode, s)))
        }
        do {
            let open = try await self.open(inode, flags: flags & ~O_TRUNC)
            if state.withLock({ $0.staged[inode] }) !== staged { writeBack.discard(staged) }
            touchDirectories(parent)
            return (entry, open)
        } catch {
            forget(inode, lookups: 1)
            throw error
        }
    }

    /// An empty object, uploaded at once (there is no handle whose close
    /// would upload it): a regular file, or a FIFO, socket or device file,
    /// whose type (and device number) its metadata keeps. The kernel gives
    /// FIFOs and sockets their behaviour locally; the mount is nodev, so a
    /// device file opens nothing.
    public func mknod(parent: UInt64, name: String, mode: UInt32, rdev: UInt64) async throws(FSError) -> EntryReply {
        let path = try newEntryPath(parent: parent, name: name, "mknod")
        var type = mode & UInt32(S_IFMT)
        if type == 0 { type = UInt32(S_IFREG) }
        guard type == UInt32(S_IFREG) || AttributeMapper.specialTypes.contains(type) else {
            throw FSError(.invalid, "mknod of type 0o\(String(type, radix: 8)): \(path)")
        }
        var metadata = await newEntryMetadata(parent: parent, type: type, mode: mode)
        metadata[AttributeMapper.mtimeKey] = Self.secondsText(Timestamp(Date()))
        if type == UInt32(S_IFCHR) || type == UInt32(S_IFBLK) { metadata[AttributeMapper.rdevKey] = String(rdev) }
        let info: ObjectInfo
        do {
            info = try await store.put(objectName(path), from: nil, options: PutOptions(customMetadata: metadata, ifGenerationMatch: 0))
        } catch .preconditionFailed {
            throw FSError(.exists, "\(objectName(path)) already exists")
        } catch {
            throw failure(error, during: .create, "mknod", path)
        }
        touchDirectories(parent)
        return noteCreated(path, .file(info))
    }

    /// Waits until the blocks downloaded by this mount are on disk in the
    /// block cache (at unmount). They are written by background tasks of
    /// low priority; a process that exits first loses them, and the next
    /// mount on the same cache directory downloads them again. The wait is
    /// short: the write queue holds at most `BlockCache.maxPendingBytes`.
    public func finishCacheWrites() async {
        await blockCache?.waitForPendingWrites()
    }

    // MARK: - Helpers

    /// The path for a new entry `name` in directory `parent`, checked.
    func newEntryPath(parent: UInt64, name: String, _ operation: String) throws(FSError) -> String {
        try refuseIfReadOnly("\(operation) of \(name)")
        // One byte kept for the `/` a directory's placeholder adds.
        return try childPath(parent: parent, name: name, operation, invalidName: .invalid, reserve: 1, isNew: true)
    }

    /// What `stat` shows for a staged file.
    /// `s`: the state, locked by the caller.
    func stagedAttributes(_ staged: StagedFile, path: String, inode: UInt64, _ s: borrowing State) -> FileAttributes {
        mapper.file(staged.state(in: s).view(objectName: objectName(path)), inode: inode)
    }

    /// A new object at `path` (mknod, mkdir, symlink): cached, in its
    /// directory's listing, one lookup counted.
    func noteCreated(_ path: String, _ node: MetadataCache.Node) -> EntryReply {
        let now = clock.now
        return state.withLock { s in
            s.metadata.apply(.created(path, node), now: now)
            let inode = s.inodes.lookup(path, kind: node.kind!)
            return entryReply(attributes(node, inode: inode, s)!)
        }
    }

    /// Keeps retrying every entry of this bucket in the recovery folder in
    /// the background, including those earlier mounts left
    /// (`--retry-pending`); entries of this mount's own failed uploads are
    /// retried anyway. Returns how many are tracked.
    @discardableResult
    public func retryRecoveryEntriesInBackground() -> Int {
        guard let recovery, let retrier else { return 0 }
        let objects = recovery.pending().filter { $0.entry.bucket == options.bucket && $0.entry.retryStopped == nil }.map(\.entry.object)
        retrier.track(objects)
        return objects.count
    }
}
