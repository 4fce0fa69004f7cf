import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The executor's handle events and uploads: what a writable handle's
/// write, close and release, an fsync, a truncate, a rename and the unmount
/// call to change and store a staged file, the uploads it runs, and what a
/// failed upload leaves (the recovery folder, a log line, the errno). When
/// an upload starts, who waits and when a file is discarded are the
/// `WriteBack` machine's calls; the stream's side is `Stream.swift`.
extension WriteBackStore {
    // MARK: - Handle events

    /// A write through a writable handle: the bytes go to the staged file;
    /// the journal and the stream follow as the machine says.
    func write(_ data: Data, at offset: Int64, to staged: StagedFile) async throws(FSError) {
        guard !data.isEmpty else { return }
        let now = Timestamp(Date())
        let range = offset..<(offset + Int64(data.count))
        try await staged.content.write(data, at: offset)
        handle(.wrote(range), of: staged) { s, _ in
            s.size = max(s.size, range.upperBound)
            s.modificationTime = now
            s.modificationTimeWasSet = false
        }
    }

    /// Sets the size: shrinking forgets the base bytes past it, growing
    /// adds zeros. A no-op change is not a change (`> f` on an empty file
    /// uploads nothing). Returns false, changing nothing, if the file was
    /// retired meanwhile (its last release finished: the change must go to
    /// the object).
    @discardableResult
    func truncate(_ staged: StagedFile, to newSize: Int64) async throws(FSError) -> Bool {
        // Base bytes past the new end are forgotten first, so that no fetch
        // starts past it; those in flight are waited for (they would write
        // base bytes back past the new end).
        staged.content.forgetBase(from: newSize)
        await staged.content.waitForFetches()
        let now = Timestamp(Date())
        var changed = false
        let answer = handle({ s in .truncated(from: s.size, to: newSize) }, of: staged) { s, effects in
            guard effects.answer != .refused, s.size != newSize else { return }
            s.size = newSize
            s.modificationTime = now
            s.modificationTimeWasSet = false
            changed = true
        }
        guard answer != .refused else { return false }
        if changed { try staged.file.truncate(to: newSize) }
        return true
    }

    /// A file made by create: it must reach the bucket even if nothing
    /// is written (`touch`), with its mode when not the mount's default.
    /// Under the file system's lock, with its registration.
    func created(_ staged: StagedFile, metadata: [String: String], in s: inout FileSystem.State) {
        handle(.created, of: staged, in: &s) { state, _ in
            for (key, value) in metadata { state.pendingMetadata[key] = value }
        }
    }

    /// Applies a change that is to ride along with the coming upload, if
    /// there is one: only while the file is dirty and not retired (else
    /// false: the caller changes the object itself). The change counts as
    /// a write, so an upload already in flight is followed by another.
    func rideAlong(_ staged: StagedFile, _ change: (inout StagedFile.State) -> Void) -> Bool {
        handle(.rideAlong, of: staged) { s, effects in
            if effects.answer == .accepted(true) { change(&s) }
        } == .accepted(true)
    }

    /// A metadata change (xattrs) made while the file has unsaved writes:
    /// custom keys and standard properties go with the coming upload.
    func takeAlong(_ staged: StagedFile, _ patch: MetadataPatch) -> Bool {
        rideAlong(staged) { s in
            for (key, value) in patch.customMetadata { s.pendingMetadata[key] = value }
            s.pendingProperties.properties.merge(patch.properties)
        }
    }

    /// The delete or rename of the name failed: it is the file's again.
    func relink(_ staged: StagedFile?) {
        if let staged { handle(.relink, of: staged) }
    }

    /// A writable handle's close (flush) uploads, and reports a failure.
    func closed(_ staged: StagedFile, inode: UInt64, pid: Int32) async throws(FSError) {
        // A new file nothing was done to yet, closed by a process that still
        // holds another writable descriptor of it: a shell's `> f` closing
        // the original after duplicating it onto stdout. That descriptor's
        // close flushes again (at the latest when the process exits), so
        // the empty upload is left to it; every other close uploads, so
        // `touch f` has made `f` when it returns and a close still reports
        // a failed upload.
        if staged.isUntouchedNewFile, let descriptors, descriptors.holdsWritableDescriptor(pid: pid, inode: inode) {
            logger.trace("flush of a new empty file left to the closing process's other descriptor", metadata: ["inode": "\(inode)"])
            return
        }
        try await upload(staged, inode: inode, reason: "flush", interruptible: true)
    }

    /// A handle attached to `staged` was released. After the last, a file
    /// still dirty (written through mmap, or whose flush was never called)
    /// is uploaded; release has no one to report to, so a failure only
    /// leaves the bytes in the recovery folder and a log line. Then the
    /// local copy is deleted.
    func released(_ staged: StagedFile, inode: UInt64) async {
        if handle(.released, of: staged) == .accepted(true) { await retire(staged, inode: inode) }
    }

    /// Uploads what `staged` still owes (repeating while changes that ride
    /// along keep arriving), then deletes its local copy, unless an open
    /// attached to it meanwhile. A change that comes after it is retired
    /// finds it so and goes to the object.
    private func retire(_ staged: StagedFile, inode: UInt64) async {
        while true {
            if staged.needsFinalUpload { _ = try? await upload(staged, inode: inode, reason: "release") }
            let retired = state.withLock { s -> Bool? in
                guard s.staged[inode] === staged else { return false }
                switch handle(.retire, of: staged, in: &s) {
                case .retire(.uploadFirst): return nil
                case .retire(.discard):
                    s.staged[inode] = nil
                    return true
                default: return false
                }
            }
            switch retired {
            case nil: continue
            case true?: discard(staged)
            case false?: break
            }
            return
        }
    }

    /// Uploads every dirty file (unmount, SIGTERM); returns how many failed.
    func flushAll() async -> Int {
        let all = state.withLock { Array($0.staged) }
        var failed = 0
        for (inode, staged) in all where staged.isDirty {
            do {
                try await upload(staged, inode: inode, reason: "unmount")
            } catch {
                failed += 1
            }
        }
        return failed
    }

    /// Sets the size of `staged` (see `StagedFile.truncate`); false if it
    /// was retired meanwhile (the change must go to the object).
    /// The inode of `staged` has a new name (a rename, after the copy
    /// became its base, `StagedFile.adoptBase`): the journal follows it.
    func renamed(_ staged: StagedFile) {
        handle(.renamed, of: staged)
    }

    // MARK: - Upload

    /// Uploads `staged` if it is dirty. Uploads of one file never overlap:
    /// a flush that finds one in flight waits for it, then uploads again
    /// only if writes came after its snapshot. The upload is the file's,
    /// not the caller's: an `interruptible` caller (close, fsync: what the
    /// kernel lets a signal interrupt) that is cancelled stops waiting
    /// (EINTR); the upload does not stop. The others (release, rename, a
    /// truncate by path) go on with the uploaded file, so they wait.
    func upload(_ staged: StagedFile, inode: UInt64, reason: String, interruptible: Bool = false) async throws(FSError) {
        while true {
            // The upload is the file's Task, made under the lock so that a
            // second flush joins it.
            var task: Task<Result<Void, FSError>, Never>?
            var mine = false
            handle(.uploadRequested, of: staged) { s, effects in
                switch effects.answer {
                case .upload(.start):
                    let made = Task { await self.performUpload(staged, inode: inode, reason: reason) }
                    _ = s.writeBack.handle(.launched(.upload(made)))
                    mine = true
                case .upload(.join): break
                default: return
                }
                task = s.writeBack.upload?.task
            }
            guard let task else { return }
            // An interrupted close or fsync answers EINTR at once; the
            // upload goes on (and, past its window, leaves the bytes in the
            // recovery folder), so the interruption loses nothing.
            let answered: Result<Void, FSError>? = if interruptible { await task.valueUnlessCancelled() } else { await task.value }
            guard let result = answered else {
                throw FSError.interrupted("\(reason) of inode \(inode) while its upload goes on")
            }
            // Someone else's upload failing fails ours too (same bytes); if
            // it succeeded, look again: writes may have come after it.
            if case .failure(let error) = result { throw error }
            if mine { return }
        }
    }

    private func performUpload(_ staged: StagedFile, inode: UInt64, reason: String) async -> Result<Void, FSError> {
        defer {
            handle(.uploadEnded, of: staged)
        }
        let snapshot = staged.current
        guard let path = state.withLock({ $0.inodes[inode]?.path }) else {
            return .failure(FSError(.ioError, "inode \(inode) unknown at \(reason)"))
        }
        let name = objectName(path)
        let options = Self.uploadOptions(snapshot)
        do throws(FSError) {
            try await staged.fetchAll()
        } catch {
            // The base could not be read (gone: ESTALE; network: EIO); the
            // bytes written so far are still worth keeping.
            let cause: StoreError = error.is(.stale) ? .preconditionFailed(error.message) : .other(error.message)
            return .failure(await uploadFailed(staged, path: path, version: snapshot.writeBack.version, options: options, cause, reason))
        }
        let plan = ObjectUploader.Plan(
            name: name, localPath: staged.file.path, options: options, size: snapshot.size,
            stream: await takeStream(of: staged), streamCarriesContent: snapshot.writeBack.streamCarries(size: snapshot.size), reason: reason)
        let info: ObjectInfo
        switch await uploader.upload(plan) {
        case .success(let stored): info = stored
        case .failure(let error):
            return .failure(await uploadFailed(staged, path: path, version: snapshot.writeBack.version, options: options, error, reason))
        }
        // The new base; the local file holds all of it (`fetchAll` ran).
        // Once clean, the journal goes, under the lock.
        handle({ s in .uploadStored(snapshot.writeBack.version, hasContent: s.size > 0) }, of: staged) { s, _ in
            for (key, value) in snapshot.pendingMetadata where s.pendingMetadata[key] == value { s.pendingMetadata[key] = nil }
            s.pendingProperties = MetadataPatch()
            s.takeBase(info)
        }
        staged.content.holdsEverything()
        recovery?.remove(objectName: name)
        // Only while the name is still this file's: an upload that ends
        // after the name was unlinked or renamed over must not bring its
        // old attributes back under that name.
        if state.withLock({ $0.inodes.inode(forPath: path) == inode }) { served?.noteUploaded(path, info) }
        logger.debug("uploaded", metadata: ["object": "\(name)", "size": "\(info.size)", "generation": "\(info.generation)", "on": "\(reason)"])
        return .success(())
    }

    /// Stores staged bytes as objects (see `ObjectUploader`).
    var uploader: ObjectUploader {
        ObjectUploader(store: store, parallel: parallelUploads, retryWindow: Duration(seconds: options.uploadRetryWindow), logger: logger)
    }

    /// What an upload sends besides the bytes: the replaced object's
    /// properties and metadata with the pending changes, and the
    /// precondition (the generation it replaces, 0 for a new file).
    static func uploadOptions(_ s: StagedFile.State) -> PutOptions {
        var base = s.base ?? ObjectInfo(name: "", size: 0, generation: 0, updated: Date())
        s.pendingProperties.apply(to: &base)
        return PutOptions(keeping: base, customMetadata: uploadMetadata(s), ifGenerationMatch: s.base?.generation ?? 0)
    }

    /// The custom metadata an upload sends: the replaced object's, with the
    /// pending changes. `goog-reserved-file-mtime` only if the mtime was set
    /// since the last write: a written file's mtime is the new object's
    /// `updated`, the time its upload ended, as for an object any other
    /// tool uploads. So an upload with no metadata to keep is a plain media
    /// request, and a stream that outlasts a second needs no PATCH after it.
    static func uploadMetadata(_ s: StagedFile.State) -> [String: String] {
        var metadata = s.base?.customMetadata ?? [:]
        for (key, value) in s.pendingMetadata { metadata[key] = value }
        metadata[AttributeMapper.mtimeKey] = s.modificationTimeWasSet ? String(s.modificationTime.seconds) : nil
        return metadata
    }

    /// Keeps the bytes in the recovery folder and says where; the errno is
    /// the upload row of `ErrnoMapping.errno(for:during:)`. After a conflict what was
    /// cached about the object is forgotten, so the mount shows the other
    /// writer's object at once.
    private func uploadFailed(
        _ staged: StagedFile, path: String, version: UInt64, options: PutOptions, _ error: StoreError, _ reason: String
    ) async -> FSError {
        let name = objectName(path)
        handle(.uploadFailed(version), of: staged)
        // Only a transient failure is retried in the background; the entry
        // says so from the start, as `bucketfs status` reports it.
        let notRetried: String? = if !error.isTransient {
            "not a transient failure: \(error)"
        } else if retrier == nil {
            "this mount retries nothing in the background"
        } else {
            nil
        }
        let saved = recovery?.save(staged.file.path, objectName: name, options: options, reason: "\(error)", notRetried: notRetried)
        let failure = FSError(error, during: .upload, "upload of \(name) on \(reason)")
        let retried = saved != nil && notRetried == nil
        logger.error("upload failed; the written bytes are kept in the recovery folder", metadata: [
            "object": "\(name)", "on": "\(reason)", "cause": "\(error)", "errno": "\(failure.errno)",
            "recovery": "\(saved ?? "none (no cache directory)")",
            "background retries": "\(retried ? "yes, while mounted" : "no (\(notRetried ?? "no recovery entry"))")",
        ])
        if retried { retrier?.track([name]) }
        if case .preconditionFailed = error { await served?.forgetReplaced(path, pages: true) }
        return failure
    }

    /// Records where the staged bytes of `inode` are going, beside them,
    /// so that if this process dies before uploading them the next mount
    /// moves them into the recovery folder (`RecoveryFolder.adoptLeftovers`).
    func writeJournal(_ staged: StagedFile, inode: UInt64) {
        guard let path = state.withLock({ $0.inodes[inode]?.path }) else { return }
        let options = Self.uploadOptions(staged.current)
        let entry = RecoveryFolder.Entry(
            bucket: self.options.bucket, object: objectName(path), ifGenerationMatch: options.ifGenerationMatch,
            properties: options.properties, metadata: options.customMetadata, size: staged.size, savedAt: Date(),
            reason: "written through a mount that ended before uploading it")
        do {
            try RecoveryFolder.write(entry, to: staged.journalPath)
        } catch {
            logger.warning("cannot write the journal of a staged file", metadata: ["path": "\(staged.journalPath)", "cause": "\(error)"])
        }
    }
}
