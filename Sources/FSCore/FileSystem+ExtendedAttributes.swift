import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// getxattr, listxattr, setxattr, removexattr: object metadata as extended
/// attributes (the names: `ExtendedAttributeMapping.swift`).
///
/// A file's attributes are its object's metadata; a directory's are those
/// of its `dir/` placeholder. An implicit directory (no placeholder) has
/// none, and the first setxattr on it creates the placeholder carrying the
/// attribute. The bucket root of a whole-bucket mount is no object at all:
/// it lists nothing and refuses changes (EOPNOTSUPP).
///
/// Reads cost no request while the metadata cache holds the object: listings
/// carry every item's full metadata, so `getfattr -d` over a directory that
/// was just listed asks nothing. A change is one PATCH with
/// ifMetagenerationMatch (see `changeMetadata`).
extension FileSystem {
    public func getxattr(_ inode: UInt64, name: String) async throws(FSError) -> Data {
        let attribute = ExtendedAttributeName(name)
        let record = try record(inode)
        guard attribute.isObjectMetadata else { return try ExtendedAttributeRules.value(attribute, of: nil) }
        return try ExtendedAttributeRules.value(attribute, of: try await attributeCarrier(of: inode, record))
    }

    public func listxattr(_ inode: UInt64) async throws(FSError) -> [String] {
        let record = try record(inode)
        return ExtendedAttributeRules.listedNames(try await attributeCarrier(of: inode, record))
    }

    public func setxattr(_ inode: UInt64, name: String, value: Data, flags: Int32) async throws(FSError) {
        let attribute = ExtendedAttributeName(name)
        let patch = try ExtendedAttributeRules.patch(attribute, value)
        let record = try record(inode)
        _ = try await changeMetadata(of: inode, record: record, patch) { current throws(FSError) in
            try ExtendedAttributeRules.checkFlags(flags, exists: ExtendedAttributeRules.exists(attribute, on: current))
        }
    }

    public func removexattr(_ inode: UInt64, name: String) async throws(FSError) {
        let attribute = ExtendedAttributeName(name)
        let patch = try ExtendedAttributeRules.patch(attribute, nil)
        let record = try record(inode)
        _ = try await changeMetadata(of: inode, record: record, patch) { current throws(FSError) in
            guard ExtendedAttributeRules.exists(attribute, on: current) else { throw FSError(.noAttribute, "no such attribute") }
        }
    }

    // MARK: - The one way metadata changes

    /// Applies `patch` to the object carrying `record`'s metadata and
    /// returns its new metadata. Every metadata change goes through here.
    ///
    /// `check` judges the change against the object's current metadata
    /// (nil: an implicit directory): setxattr's flags, for example. Then the
    /// service's total limit is checked locally (E2BIG), and the change is
    /// one PATCH with ifMetagenerationMatch on the metageneration the check
    /// saw (or, for an implicit directory, an upload of its placeholder
    /// with ifGenerationMatch=0, carrying the change).
    ///
    /// A lost race (412: someone else changed the metadata since the mount
    /// read it, or a stale cache) reads the object again, checks again and
    /// retries once: last writer wins per key, other keys are merged by
    /// the service, and XATTR_CREATE/REPLACE hold against what is really
    /// there. Losing twice is EAGAIN ("try again").
    ///
    /// The metadata cache (and so the cached listing) then holds the
    /// returned metadata, so the next getxattr asks nothing. It holds it even when
    /// its versions look older than what was known: a server may leave the
    /// metageneration out of its answer (fake-gcs-server does; it reads as
    /// 0), and the change must show at once. A later change whose
    /// precondition on that 0 fails takes the lost-race path above.
    func changeMetadata(
        of inode: UInt64, record: InodeTable.Record, _ patch: MetadataPatch,
        check: (ObjectInfo?) throws(FSError) -> Void = { _ in }
    ) async throws(FSError) -> ObjectInfo {
        try refuseIfReadOnly("metadata change of \(record.path)")
        guard let object = carrierName(record) else {
            throw FSError(.notSupported, "the bucket root is no object and cannot carry metadata")
        }
        // A file with unsaved writes takes the change into its coming
        // upload instead of patching the object under it.
        if let staged = state.withLock({ $0.staged[inode] }), staged.visibility == .shown(unsaved: true) {
            let view = staged.view(objectName: object)
            try check(view)
            try ExtendedAttributeRules.checkTotal(patch, on: view.customMetadata)
            if writeBack.takeAlong(staged, patch) { return staged.view(objectName: object) }
        }
        var current = try await attributeCarrier(of: inode, record)
        for attempt in 1...2 {
            try check(current)
            // The patch as sent, with the mtime key it may add
            // (`ObjectMetadataWriter`), is the one checked.
            let sent = current.map { ObjectMetadataWriter.keepingModificationTime(patch, of: $0) } ?? patch
            try ExtendedAttributeRules.checkTotal(sent, on: current?.customMetadata ?? [:])
            switch await ObjectMetadataWriter(store: store).apply(sent, to: object, current: current) {
            case .success(let updated):
                remember(updated, for: record, now: clock.now)
                state.withLock { $0.staged[inode] }?.rebase(updated)
                logger.debug("metadata changed", metadata: ["object": "\(object)", "metageneration": "\(updated.metageneration)"])
                return updated
            case .failure(let error):
                let lostRace: Bool
                switch error {
                case .preconditionFailed, .notFound: lostRace = true
                default: lostRace = false
                }
                guard lostRace else { throw failure(error, during: .metadata, "patch", record.path) }
                guard attempt == 1 else {
                    logger.warning("metadata change lost a race twice", metadata: ["object": "\(object)", "cause": "\(error)"])
                    throw FSError(.tryAgain, "\(object) was changed by someone else twice meanwhile: \(error)")
                }
                logger.debug("metadata changed meanwhile; reading it again", metadata: ["object": "\(object)", "cause": "\(error)"])
                current = try await attributeCarrier(of: inode, record, fresh: true)
            }
        }
        preconditionFailure("unreachable: the second attempt returns or throws")
    }

    // MARK: - Where the metadata comes from

    /// The object that carries `record`'s metadata: the file's object, or
    /// a directory's placeholder; nil for the root of a whole-bucket mount.
    func carrierName(_ record: InodeTable.Record) -> String? {
        switch record.kind {
        case .file, .symlink: return objectName(record.path)
        case .directory:
            let placeholder = PathRules.listingPrefix(objectPrefix, record.path)
            return placeholder.isEmpty ? nil : placeholder
        }
    }

    /// The metadata of `record`'s carrier object: from the metadata cache while
    /// it is fresh (unless `fresh`), else one stat, remembered. nil: there
    /// is no such object (an implicit directory, the bucket root).
    func attributeCarrier(of inode: UInt64, _ record: InodeTable.Record, fresh: Bool = false) async throws(FSError) -> ObjectInfo? {
        guard let object = carrierName(record) else { return nil }
        // A file being written: what it will be once uploaded, as getattr
        // shows it (it may not be in the bucket yet).
        if !fresh, let staged = state.withLock({ $0.staged[inode] }), staged.visibility != .hidden {
            return staged.view(objectName: object)
        }
        let now = clock.now
        if !fresh, let node = state.withLock({ $0.metadata.node(record.path, now: now) }) {
            switch (record.kind, node) {
            case (.file, .file(let info)), (.symlink, .file(let info)): return info
            case (.directory, .directory(let placeholder?)): return placeholder
            case (.directory, .directory(nil)): break  // listings do not say whether a placeholder exists
            default: throw FSError(.notFound, "\(objectName(record.path)) is gone or no longer a \(record.kind)")
            }
        }
        let result = await store.statResult(object)
        let later = clock.now
        switch result {
        case .success(let info):
            remember(info, for: record, now: later)
            return info
        case .failure(.notFound) where record.kind == .directory:
            return nil
        case .failure(.notFound):
            state.withLock { $0.metadata.apply(.stated(record.path, .absent), now: later) }
            throw failure(.notFound(object), during: .lookup, "stat", record.path)
        case .failure(let error):
            throw failure(error, during: .lookup, "stat", record.path)
        }
    }

    /// Keeps `info`, just read or just accepted by the store, as what
    /// `record` is now: its entry and its directory's cached listing (which
    /// a later opendir within the TTL reuses) show it.
    private func remember(_ info: ObjectInfo, for record: InodeTable.Record, now: Duration) {
        let node: MetadataCache.Node = record.kind == .directory ? .directory(placeholder: info) : .file(info)
        state.withLock { $0.metadata.apply(.patched(record.path, node), now: now) }
    }
}
