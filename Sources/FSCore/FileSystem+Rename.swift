import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// rename: a server-side copy, then a delete of the source.
///
/// A file: its open handles are uploaded first if dirty; the copy carries
/// content type and custom metadata; both steps have preconditions (the
/// source's generation; the destination's, or 0 with RENAME_NOREPLACE), so
/// a file changed meanwhile by someone else is neither lost nor clobbered.
///
/// A directory: every object below it, copied (at most `renameWidth` at a
/// time) before any is deleted, so an interruption leaves every object in
/// at least one place. It is not atomic: other clients may see both trees
/// for a while.
///
/// A store without server-side copy (Firebase's v0) renames files up to
/// `renameCopyLimit` (the copy goes through this process) and answers
/// EXDEV for larger files and for directories.
extension FileSystem {
    static let renameWidth = 8

    public func rename(parent: UInt64, name: String, newParent: UInt64, newName: String, flags: RenameFlags) async throws(FSError) {
        let source = try existingEntryPath(parent: parent, name: name, "rename")
        let target = try newEntryPath(parent: newParent, name: newName, "rename")
        guard !flags.contains(.exchange) else { throw FSError(.invalid, "RENAME_EXCHANGE cannot be done on an object store") }
        guard source != target else { return }
        guard !target.hasPrefix(source + "/") else { throw FSError(.invalid, "cannot move \(source) into itself") }

        let sourceNode = try await node(source)
        guard let sourceKind = sourceNode.kind else { throw FSError(.notFound, "\(objectName(source)) does not exist") }
        // A file being written under the target name is being replaced:
        // no upload of it starts any more, and one under way (a release's)
        // ends before the target's generation is taken as precondition.
        let replaced = await writeBack.unlinkName(target).staged
        do {
            try await rename(source, sourceNode, sourceKind, to: target, flags: flags)
        } catch {
            writeBack.relink(replaced)
            throw error
        }
        touchDirectories(parent, newParent)
    }

    private func rename(
        _ source: String, _ sourceNode: MetadataCache.Node, _ sourceKind: InodeTable.Kind, to target: String, flags: RenameFlags
    ) async throws(FSError) {
        let targetNode = try await node(target)
        if flags.contains(.noReplace), targetNode.kind != nil { throw FSError(.exists, "\(objectName(target)) exists") }

        try checkCopyable(source, sourceNode)
        switch (sourceKind, targetNode) {
        case (.directory, .file):
            throw FSError(.notDirectory, "cannot replace file \(target) with a directory")
        case (.file, .directory), (.symlink, .directory):
            throw FSError(.isDirectory, "cannot replace directory \(target) with a file")
        case (.directory, .directory):
            if try await hasChildren(target) { throw FSError(.notEmpty, "\(objectName(target))/ is not empty") }
        default:
            break
        }
        if sourceKind == .directory {
            try await renameDirectory(source, to: target, replacing: targetNode)
            // A moved directory's ".." changed: its ctime moves too.
            if let moved = state.withLock({ $0.inodes.inode(forPath: target) }) { touchDirectories(moved) }
        } else {
            var expected: Int64? = flags.contains(.noReplace) ? 0 : nil
            if case .file(let info) = targetNode { expected = info.generation } else if targetNode == .absent { expected = 0 }
            try await renameFile(source, to: target, ifTargetGeneration: expected)
        }
    }

    /// On a store that copies through this process (Firebase's v0), only
    /// files up to `renameCopyLimit` are renamed here; anything else is
    /// EXDEV, on which mv(1) copies and deletes by itself, and other
    /// programs learn the rename cannot be done in one step.
    private func checkCopyable(_ source: String, _ node: MetadataCache.Node) throws(FSError) {
        guard !store.capabilities.serverSideCopy else { return }
        switch node {
        case .directory:
            throw FSError(.crossDevice, "rename of directory \(objectName(source)): the store has no server-side copy")
        case .file(let info) where info.size > options.renameCopyLimit:
            throw FSError(.crossDevice, "rename of \(objectName(source)) (\(info.size) bytes): the store has no server-side copy, and it is over the limit of \(options.renameCopyLimit) bytes")
        default:
            return
        }
    }

    /// What `path` is: the fresh cache entry, a staged new file, or a probe.
    private func node(_ path: String) async throws(FSError) -> MetadataCache.Node {
        let now = clock.now
        if let known = state.withLock({ s -> MetadataCache.Node? in
            if let inode = s.inodes.inode(forPath: path), let staged = s.staged[inode] {
                return .file(staged.state(in: s).view(objectName: objectName(path)))
            }
            return s.metadata.node(path, now: now)
        }) {
            return known
        }
        return try await probe(path)
    }

    private func renameFile(_ source: String, to target: String, ifTargetGeneration: Int64?) async throws(FSError) {
        let inode = state.withLock { $0.inodes.inode(forPath: source) }
        let staged = inode.flatMap { i in state.withLock { $0.staged[i] } }
        if let staged, let inode {
            // The copy must carry the written bytes, and later uploads go
            // to the new name, so the whole content has to be local.
            try await writeBack.upload(staged, inode: inode, reason: "rename")
            try await staged.fetchAll()
        }
        let info = try await currentInfo(source)
        var copied: ObjectInfo
        do {
            copied = try await store.copy(
                objectName(source), to: objectName(target), ifSourceGenerationMatch: info.generation, ifGenerationMatch: ifTargetGeneration)
            copied = await keepModificationTime(of: info, on: copied)
        } catch .preconditionFailed(let message) {
            let now = clock.now
            state.withLock { s in
                s.metadata.apply(.forgotten(source, listing: false), now: now)
                s.metadata.apply(.forgotten(target, listing: false), now: now)
            }
            throw FSError(.stale, "rename of \(objectName(source)): changed meanwhile (\(message))")
        } catch {
            throw failure(error, during: .copy, "copy", source)
        }
        if inode != nil { moveReaders([(info, copied)]) }
        do {
            try await store.delete(objectName(source), ifGenerationMatch: info.generation)
        } catch .notFound {
            // Someone else deleted it meanwhile: the rename still happened.
        } catch {
            // The copy exists: report, leaving both names in the bucket.
            throw failure(error, during: .delete, "delete after copy", source)
        }
        staged?.adoptBase(copied)
        let now = clock.now
        state.withLock { s in
            s.inodes.rename(from: source, to: target)
            s.metadata.apply(.renamed(from: source, to: target, file: copied), now: now)
        }
        if let staged { writeBack.renamed(staged) }
    }

    private func renameDirectory(_ source: String, to target: String, replacing targetNode: MetadataCache.Node) async throws(FSError) {
        // Files being written below go first, so their bytes move too.
        let below = source + "/"
        let pending = state.withLock { s in
            s.staged.compactMap { inode, staged in (s.inodes[inode]?.path.hasPrefix(below) ?? false) ? (inode, staged) : nil }
        }
        for (inode, staged) in pending {
            try await writeBack.upload(staged, inode: inode, reason: "rename of \(source)")
            try await staged.fetchAll()
        }
        let objects = try await listingReader.objectsBelow(source)
        let sourceName = objectName(source), targetName = objectName(target)
        let copies = try await forEach(objects, "copy") { (object: ObjectInfo) async throws(StoreError) -> (ObjectInfo, ObjectInfo) in
            let destination = targetName + object.name.dropFirst(sourceName.count)
            let copied = try await self.store.copy(object.name, to: destination, ifSourceGenerationMatch: object.generation, ifGenerationMatch: nil)
            return (object, await self.keepModificationTime(of: object, on: copied))
        }
        moveReaders(copies)
        _ = try await forEach(objects, "delete") { (object: ObjectInfo) async throws(StoreError) in
            do throws(StoreError) {
                try await self.store.delete(object.name, ifGenerationMatch: object.generation)
            } catch {
                if case .notFound = error { return }
                throw error
            }
        }
        if case .directory(let placeholder?) = targetNode, !objects.contains(where: { $0.name == sourceName + "/" }) {
            // An empty directory was replaced; its placeholder goes too.
            _ = try? await store.delete(placeholder.name, ifGenerationMatch: placeholder.generation)
        }
        let renamed = Dictionary(uniqueKeysWithValues: copies.map { ($0.0.name, $0.1) })
        for (inode, staged) in pending {
            if let path = state.withLock({ $0.inodes[inode]?.path }), let copied = renamed[objectName(path)] {
                staged.adoptBase(copied)
            }
        }
        let now = clock.now
        state.withLock { s in
            s.inodes.rename(from: source, to: target)
            s.metadata.apply(.renamed(from: source, to: target, file: nil), now: now)
        }
        for (_, staged) in pending { writeBack.renamed(staged) }
    }

    /// `copy` with `source`'s mtime (`ObjectMetadataWriter.keepModificationTime`);
    /// if that PATCH fails the rename stands, with only the mtime moved.
    private func keepModificationTime(of source: ObjectInfo, on copy: ObjectInfo) async -> ObjectInfo {
        switch await ObjectMetadataWriter(store: store).keepModificationTime(of: source, on: copy) {
        case .success(let pinned): return pinned
        case .failure(let error):
            logger.warning("renamed, but the copy's mtime is the rename's", metadata: ["object": "\(copy.name)", "cause": "\(error)"])
            return copy
        }
    }

    /// Descriptors open for reading follow a renamed file, as on a local
    /// disk: before the sources' generations are deleted, each handle
    /// pinned to one of them moves onto its copy (the same bytes under the
    /// new name), with a reader of its own. Before, their next read was
    /// ESTALE. One pass over the open handles, whatever the number of
    /// objects renamed.
    private func moveReaders(_ copies: [(source: ObjectInfo, copy: ObjectInfo)]) {
        let copyOf = Dictionary(copies.map { ($0.source.name, $0) }, uniquingKeysWith: { first, _ in first })
        let replaced = state.withLock { s -> [FileReader] in
            var old: [FileReader] = []
            for (handle, file) in s.files {
                guard let reader = file.reader, let (source, copy) = copyOf[reader.objectName],
                    reader.info.generation == source.generation
                else { continue }
                let path = String(copy.name.dropFirst(objectPrefix.count))
                s.files[handle] = OpenFile(inode: file.inode, reader: makeReader(path, copy), writable: false)
                old.append(reader)
            }
            return old
        }
        for reader in replaced { reader.close() }
    }

    /// Runs `body` on every element, `renameWidth` at a time; the first
    /// failure is thrown once all started work has ended.
    private func forEach<T: Sendable>(
        _ objects: [ObjectInfo], _ what: String, _ body: @escaping @Sendable (ObjectInfo) async throws(StoreError) -> T
    ) async throws(FSError) -> [T] {
        var values: [T] = []
        for result in await boundedConcurrently(objects, width: Self.renameWidth, body) {
            switch result {
            case .success(let value): values.append(value)
            case .failure(let error): throw FSError(error, during: .directoryRename, "directory rename, \(what)")
            }
        }
        return values
    }
}
