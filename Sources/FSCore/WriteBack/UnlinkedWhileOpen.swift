import Foundation

/// A file unlinked while open keeps working through the descriptors still
/// open on it, as on a local disk: they read (and, if writable, write) its
/// bytes until the last close, and then nothing is uploaded and nothing is
/// left behind. The object is deleted at unlink, so its bytes must be local
/// first: the inode's staged file, holding every base block (fetched now if
/// missing), is that local copy; read-only handles, which read the object
/// itself, move onto a staged copy of the generation they pinned. The
/// staged file is marked unlinked by the caller, so it is never uploaded;
/// the last release deletes it.
extension WriteBackStore {
    /// The name `path` is going away (unlink, or a rename over it): its
    /// staged file, found and unlinked in one critical section, uploads
    /// nothing from now on; an upload already under way (a release's) is
    /// waited for, so that what it stores is deleted or replaced too.
    /// Returns the kind bound to `path` and the staged file (which the
    /// caller relinks if the delete or rename fails).
    func unlinkName(_ path: String) async -> (kind: InodeTable.Kind?, staged: StagedFile?) {
        let (kind, staged, inFlight) = state.withLock { s -> (InodeTable.Kind?, StagedFile?, Task<Result<Void, FSError>, Never>?) in
            guard let inode = s.inodes.inode(forPath: path) else { return (nil, nil, nil) }
            let kind = s.inodes[inode]?.kind
            guard kind != .directory, let staged = s.staged[inode] else { return (kind, nil, nil) }
            var inFlight: Task<Result<Void, FSError>, Never>?
            handle(.unlink, of: staged, in: &s) { state, effects in
                if effects.answer == .unlinked(uploadInFlight: true) { inFlight = state.writeBack.upload?.task }
            }
            return (kind, staged, inFlight)
        }
        if let inFlight { _ = await inFlight.value }
        return (kind, staged)
    }

    /// Makes the content of `path`'s inode local for the descriptors still
    /// open on it, before generation `generation` is deleted. Returns the
    /// staged file that holds it (nil: nothing open that needs one). A
    /// failure is the download's, as the store reported it.
    func keepOpenContent(of path: String, staged: StagedFile?, generation: Int64) async throws(StoreError) -> StagedFile? {
        do throws(FSError) {
            if let staged {
                if staged.handleCount > 0 { try await staged.fetchAll() }
                return staged
            }
            return try await copyForReaders(of: path, generation: generation)
        } catch {
            // Gone meanwhile (stale) is a lost race with another writer,
            // as a failed precondition is; anything else is the download's.
            throw error.is(.stale) ? StoreError.preconditionFailed(error.message) : StoreError.other(error.message)
        }
    }

    /// A staged copy of `generation` for the read-only handles pinned to
    /// it, which then read from the copy; nil if there are none. Marked
    /// unlinked from the start: it is never uploaded.
    private func copyForReaders(of path: String, generation: Int64) async throws(FSError) -> StagedFile? {
        let pinned = state.withLock { s -> (UInt64, ObjectInfo)? in
            guard let inode = s.inodes.inode(forPath: path),
                  let reader = s.files.values.first(where: { $0.inode == inode && $0.reader?.info.generation == generation })?.reader
            else { return nil }
            return (inode, reader.info)
        }
        guard let (inode, info) = pinned else { return nil }
        let copy = try makeStagedFile(path: path, base: info, truncated: false)
        handle(.unlink, of: copy)
        do {
            try await copy.fetchAll()
        } catch {
            discard(copy)
            throw error
        }
        let moved = state.withLock { s -> [FileReader]? in
            // A writer that opened meanwhile has its own staged file: the
            // readers stay on the object (as before this existed).
            guard s.staged[inode] == nil else { return nil }
            var readers: [FileReader] = []
            for (handle, file) in s.files where file.inode == inode && file.reader?.info.generation == generation {
                s.files[handle] = OpenFile(inode: inode, reader: nil, writable: false)
                readers.append(file.reader!)
            }
            guard !readers.isEmpty else { return nil }
            handle(.adopt(handles: readers.count), of: copy, in: &s)
            s.staged[inode] = copy
            return readers
        }
        guard let moved else {
            discard(copy)
            return nil
        }
        for reader in moved { reader.close() }
        return copy
    }
}
