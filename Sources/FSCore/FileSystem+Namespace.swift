import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// mkdir, rmdir, unlink, rename, symlink, readlink.
extension FileSystem {
    /// A `dir/` placeholder object, so the empty directory exists in the
    /// bucket (and survives a remount). Its mode is stored when it is not
    /// the mount's default.
    public func mkdir(parent: UInt64, name: String, mode: UInt32) async throws(FSError) -> EntryReply {
        let path = try newEntryPath(parent: parent, name: name, "mkdir")
        var metadata = await newEntryMetadata(parent: parent, type: UInt32(S_IFDIR), mode: mode)
        metadata[AttributeMapper.mtimeKey] = Self.secondsText(Timestamp(Date()))
        do {
            let info = try await store.put(objectName(path) + "/", from: nil, options: PutOptions(customMetadata: metadata, ifGenerationMatch: 0))
            touchDirectories(parent)
            return noteCreated(path, .directory(placeholder: info))
        } catch .preconditionFailed {
            throw FSError(.exists, "\(objectName(path))/ already exists")
        } catch {
            throw failure(error, during: .create, "mkdir", path)
        }
    }

    /// Deletes the object, always with its generation as precondition (from
    /// the cache, else from a stat first): a newer version someone else
    /// wrote is not deleted (ESTALE), and the delete is safe to retry, so a
    /// burst of server errors costs time, not the file. Already gone
    /// (someone else, or a retried attempt whose answer was lost, deleted
    /// it): done. A file created here and not uploaded yet only stops being
    /// uploaded. Descriptors still open on the file keep its bytes
    /// (`keepOpenContent`).
    public func unlink(parent: UInt64, name: String) async throws(FSError) {
        let path = try existingEntryPath(parent: parent, name: name, "unlink")
        let (kind, staged) = await writeBack.unlinkName(path)
        if kind == .directory { throw FSError(.isDirectory, "unlink of directory \(path)") }
        try await deleteUnlinked(path, parent: parent, staged: staged)
    }

    /// Unlink's second step, once the name is unlinked (`unlinkName`):
    /// deletes the object. The last release of a file just closed may
    /// discard `staged` at any point of it (FUSE release is asynchronous).
    func deleteUnlinked(_ path: String, parent: UInt64, staged: StagedFile?) async throws(FSError) {
        var generation: Int64?
        switch staged?.stored {
        case .never?:
            touchDirectories(parent)
            forgetName(path)
            return
        case .object(let base)?:
            generation = base.generation
        case .unknown?, nil:
            // Not staged, or discarded since (the last release of a file
            // just closed races the unlink): its upload, if any, is in the
            // metadata cache, or the store says.
            let now = clock.now
            if case .file(let info)? = state.withLock({ $0.metadata.node(path, now: now) }) { generation = info.generation }
        }
        // Descriptors still open on it go on reading and writing it.
        var kept = staged
        do {
            if generation == nil { generation = try await store.stat(objectName(path)).generation }
            if let generation { kept = try await writeBack.keepOpenContent(of: path, staged: staged, generation: generation) }
            try await store.delete(objectName(path), ifGenerationMatch: generation)
        } catch .notFound {
            logger.debug("unlink: already gone", metadata: ["object": "\(objectName(path))"])
        } catch {
            let now = clock.now
            state.withLock { $0.metadata.apply(.forgotten(path, listing: false), now: now) }
            writeBack.relink(kept)
            throw failure(error, during: .delete, "delete", path)
        }
        touchDirectories(parent)
        forgetName(path)
    }

    /// Deletes the `dir/` placeholder (with its generation as precondition,
    /// so the delete can be retried); ENOTEMPTY while anything is below.
    public func rmdir(parent: UInt64, name: String) async throws(FSError) {
        let path = try existingEntryPath(parent: parent, name: name, "rmdir")
        if let kind = known(path).kind, kind != .directory {
            throw FSError(.notDirectory, "rmdir of file \(path)")
        }
        if try await hasChildren(path) { throw FSError(.notEmpty, "\(objectName(path))/ is not empty") }
        let placeholder = objectName(path) + "/"
        var generation: Int64?
        let now = clock.now
        if case .directory(let info?)? = state.withLock({ $0.metadata.node(path, now: now) }) { generation = info.generation }
        do {
            if generation == nil { generation = try await store.stat(placeholder).generation }
            try await store.delete(placeholder, ifGenerationMatch: generation)
        } catch .notFound {
            // An implicit directory with nothing below is already gone.
        } catch {
            throw failure(error, during: .delete, "rmdir", path)
        }
        touchDirectories(parent)
        forgetName(path, directory: true)
    }

    public func symlink(target: String, parent: UInt64, name: String) async throws(FSError) -> EntryReply {
        let path = try newEntryPath(parent: parent, name: name, "symlink")
        var metadata = await newEntryMetadata(parent: parent, type: UInt32(S_IFLNK), mode: 0o777)
        metadata[AttributeMapper.symlinkKey] = target
        metadata[AttributeMapper.mtimeKey] = Self.secondsText(Timestamp(Date()))
        do {
            let info = try await store.put(objectName(path), from: nil, options: PutOptions(customMetadata: metadata, ifGenerationMatch: 0))
            touchDirectories(parent)
            return noteCreated(path, .file(info))
        } catch .preconditionFailed {
            throw FSError(.exists, "\(objectName(path)) already exists")
        } catch {
            throw failure(error, during: .create, "symlink", path)
        }
    }

    public func readlink(_ inode: UInt64) async throws(FSError) -> String {
        let link = try record(inode)
        guard link.kind == .symlink else { throw FSError(.invalid, "\(link.path) is not a symbolic link") }
        guard let target = try await currentInfo(link.path).symlinkTarget else {
            throw FSError(.invalid, "\(link.path) is no longer a symbolic link")
        }
        return target
    }

    // MARK: - Helpers

    func existingEntryPath(parent: UInt64, name: String, _ operation: String) throws(FSError) -> String {
        try refuseIfReadOnly("\(operation) of \(name)")
        return try childPath(parent: parent, name: name, operation)
    }

    /// The kind of the inode bound to `path` and its staged file, if known.
    func known(_ path: String) -> (kind: InodeTable.Kind?, staged: StagedFile?) {
        state.withLock { s in
            guard let inode = s.inodes.inode(forPath: path) else { return (nil, nil) }
            return (s.inodes[inode]?.kind, s.staged[inode])
        }
    }

    /// Whether anything (object, placeholder, or a file created here and
    /// not uploaded yet) is below directory `path`.
    func hasChildren(_ path: String) async throws(FSError) -> Bool {
        let below = path + "/"
        let local = state.withLock { s in
            s.staged.contains { inode, staged in
                guard let p = s.inodes[inode]?.path else { return false }
                return p.hasPrefix(below) && staged.state(in: s).visibility != .hidden
            }
        }
        if local { return true }
        return try await listingReader.listsNames(below: path)
    }

    /// `path` is gone: cached as absent, its inode unbound, its entry taken
    /// out of its directory's cached listing (and, for a directory, what
    /// was cached below it dropped).
    func forgetName(_ path: String, directory: Bool = false) {
        let now = clock.now
        state.withLock { s in
            s.inodes.unbind(path)
            s.metadata.apply(.removed(path, directory: directory), now: now)
        }
    }
}
