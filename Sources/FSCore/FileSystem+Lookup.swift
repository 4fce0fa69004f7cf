import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Names to inodes: lookup, getattr and the kernel's lookup counting.
extension FileSystem {
    public func lookup(parent: UInt64, name: String) async throws(FSError) -> EntryReply {
        do {
            return try await lookupChild(parent: parent, name: name)
        } catch where error.is(.notFound) && name.utf8.count > PathRules.maximumNameLength {
            // No such name, and none this long could be created.
            throw FSError(.nameTooLong, "\(name.utf8.count) bytes, more than \(PathRules.maximumNameLength)")
        }
    }

    private func lookupChild(parent: UInt64, name: String) async throws(FSError) -> EntryReply {
        let path = try childPath(parent: parent, name: name, "lookup")
        let now = clock.now
        if let cached = try state.withLock({ s throws(FSError) -> EntryReply? in
            if let inode = s.inodes.inode(forPath: path), let staged = s.staged[inode], staged.state(in: s).visibility != .hidden {
                // Being written here: its staged state is the truth.
                s.inodes.addLookups(inode)
                return entryReply(stagedAttributes(staged, path: path, inode: inode, s))
            }
            guard let node = s.metadata.answer(path, now: now) else {
                return nil
            }
            return try countedEntry(path, node, &s)
        }) {
            return cached
        }
        let node: MetadataCache.Node
        if let listed = try await listingReader.relistedNode(path) {
            node = listed
        } else {
            node = try await probe(path)
        }
        let later = clock.now
        return try state.withLock { s throws(FSError) in
            s.metadata.apply(.stated(path, node), now: later)
            return try countedEntry(path, node, &s)
        }
    }

    public func forget(_ inode: UInt64, lookups: UInt64) {
        state.withLock { s in
            s.inodes.forget(inode, lookups)
            s.inodes.checkInvariants()
        }
    }

    public func countLookups(_ inodes: [UInt64]) {
        let unknown = state.withLock { s in inodes.filter { !s.inodes.addLookups($0) } }
        if !unknown.isEmpty {
            logger.warning("lookups counted for unknown inodes", metadata: ["inodes": "\(unknown)"])
        }
    }

    public func getattr(_ inode: UInt64) async throws(FSError) -> AttributesReply {
        let record: InodeTable.Record
        do {
            record = try self.record(inode)
        } catch {
            if let open = openButUnlinked(inode) { return AttributesReply(attributes: open, timeout: 0) }
            throw error
        }
        if inode == InodeTable.root {
            let changed = state.withLock { $0.inodes[inode]?.entriesChanged }
            return AttributesReply(attributes: mapper.directory(placeholder: nil, inode: inode, changed: changed), timeout: options.kernelTimeout)
        }
        if let attributes = state.withLock({ s in s.staged[inode].map { stagedAttributes($0, path: record.path, inode: inode, s) } }) {
            return AttributesReply(attributes: attributes, timeout: options.kernelTimeout)
        }
        let now = clock.now
        let node: MetadataCache.Node
        if let cached = state.withLock({ $0.metadata.node(record.path, now: now) }) {
            node = cached
        } else {
            node = try await refresh(record)
            let later = clock.now
            state.withLock { $0.metadata.apply(.stated(record.path, node), now: later) }
        }
        guard let attributes = state.withLock({ attributes(node, inode: inode, $0) }), node.kind == record.kind else {
            // Gone, or its name now means a directory instead of a file (or
            // the reverse): the kernel drops this inode and looks up again.
            throw FSError(.notFound, "\(record.path) is gone")
        }
        return AttributesReply(attributes: attributes, timeout: options.kernelTimeout)
    }

    /// A file unlinked (or replaced) while open stays usable through its
    /// open descriptors, as on a local disk: its last attributes, with no
    /// links left. Nil unless `inode` is unbound and still open.
    private func openButUnlinked(_ inode: UInt64) -> FileAttributes? {
        var attributes: FileAttributes? = state.withLock { s in
            guard let record = s.inodes[inode], !record.bound else { return nil }
            if let staged = s.staged[inode] { return stagedAttributes(staged, path: record.path, inode: inode, s) }
            return s.files.values.first { $0.inode == inode }?.reader.map { mapper.file($0.info, inode: inode) }
        }
        attributes?.linkCount = 0
        return attributes
    }

    // MARK: - Probing the store

    /// The inode of `path` as `node` says, with one kernel lookup counted.
    private func countedEntry(_ path: String, _ node: MetadataCache.Node, _ s: inout State) throws(FSError) -> EntryReply {
        guard let kind = node.kind else { throw FSError(.notFound, "\(objectName(path)) does not exist") }
        let inode = s.inodes.lookup(path, kind: kind)
        return entryReply(attributes(node, inode: inode, s)!)
    }

    /// What `path` is now. Three requests in parallel, one round trip:
    /// the object itself, its `path/` placeholder (which makes an empty
    /// directory exist and carries its metadata), and one listed name
    /// below `path/` (an implicit directory). A directory wins over a file.
    ///
    /// Under Security Rules (`accessRulesPerPath`) the store may refuse
    /// all three. At the top of the mount such a name is taken for a
    /// directory the user may not list: `users/` in a bucket where only
    /// `users/UID/` is readable must be entered to reach it (its opendir
    /// is EACCES). Deeper down a refusal is EACCES.
    func probe(_ path: String) async throws(FSError) -> MetadataCache.Node {
        let name = objectName(path)
        async let file = store.statResult(name)
        async let placeholder = store.statResult(name + "/")
        async let children = listingReader.probe(name + "/")
        let (fileResult, placeholderResult, childrenResult) = await (file, placeholder, children)

        var placeholderInfo: ObjectInfo?
        var refusal: (StoreError, String)?
        switch placeholderResult {
        case .success(let info): placeholderInfo = info
        case .failure(.notFound): placeholderInfo = nil
        case .failure(.permissionDenied(let m)): refusal = (.permissionDenied(m), path + "/")
        case .failure(let error): throw failure(error, during: .lookup, "stat", path + "/")
        }
        var hasChildren = false
        switch childrenResult {
        case .success(let page):
            hasChildren = !page.prefixes.isEmpty || !page.items.isEmpty || !page.placeholders.isEmpty || page.nextPageToken != nil
        case .failure(.permissionDenied(let m)): refusal = refusal ?? (.permissionDenied(m), path + "/")
        case .failure(let error): throw failure(error, during: .lookup, "list", path + "/")
        }
        if placeholderInfo != nil || hasChildren {
            return .directory(placeholder: placeholderInfo)
        }
        switch fileResult {
        case .success(let info): return .file(info)
        case .failure(.notFound): break
        case .failure(.permissionDenied(let m)): refusal = refusal ?? (.permissionDenied(m), path)
        case .failure(let error): throw failure(error, during: .lookup, "stat", path)
        }
        guard let (error, refusedPath) = refusal else { return .absent }
        if store.capabilities.accessRulesPerPath && !path.contains("/") {
            logger.debug("refused name at the top of the mount taken for a directory", metadata: ["object": "\(name)"])
            return .directory(placeholder: nil)
        }
        throw failure(error, during: .lookup, "stat", refusedPath)
    }

    /// A stale entry of a known inode: a file needs one stat (whether a
    /// directory has meanwhile appeared beside it is left to the next
    /// lookup or listing); a directory is probed in full.
    private func refresh(_ record: InodeTable.Record) async throws(FSError) -> MetadataCache.Node {
        guard record.kind == .file else { return try await probe(record.path) }
        switch await store.statResult(objectName(record.path)) {
        case .success(let info): return .file(info)
        case .failure(.notFound): return .absent
        case .failure(let error): throw failure(error, during: .lookup, "stat", record.path)
        }
    }
}

extension MetadataCache.Node {
    var kind: InodeTable.Kind? {
        switch self {
        case .file(let info): return info.symlinkTarget == nil ? .file : .symlink
        case .directory: return .directory
        case .absent: return nil
        }
    }
}
