import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// setattr: truncate, chmod, chown, utimes.
///
/// Mode, owner and times live in the object's custom metadata under the
/// keys `gcloud storage` uses (`AttributeMapper`), so `cp -p` and `rsync -a`
/// survive a remount and other tools read them. On a clean file a change
/// is one metadata patch (`changeMetadata`, shared with setxattr: with
/// `ifMetagenerationMatch`, retried once on a lost race), never a
/// re-upload; on a file with unsaved writes it rides along with the coming
/// upload. A directory keeps them on its `dir/` placeholder, created if it
/// was implicit.
extension FileSystem {
    public func setattr(_ inode: UInt64, handle: UInt64?, changes: AttributeChanges) async throws(FSError) -> AttributesReply {
        let target = try record(inode)
        try refuseIfReadOnly("setattr of \(target.path)")
        guard inode != InodeTable.root else { throw FSError(.notPermitted, "the mount's root takes its attributes from the mount options") }
        if let size = changes.size {
            guard target.kind == .file else { throw FSError(target.kind == .directory ? .isDirectory : .invalid, "truncate of \(target.path)") }
            guard size >= 0 else { throw FSError(.invalid, "negative size") }
            guard size <= Self.maximumFileSize else { throw FSError(.tooLarge, "truncate past 5 TiB") }
            try await truncate(inode, target.path, to: size)
        }
        if changes.changesMetadata {
            var keys = Self.metadataKeys(changes)
            if let mode = changes.mode, target.kind == .file {
                // A FIFO, socket or device keeps its type in the stored mode.
                let type = try await getattr(inode).attributes.mode & UInt32(S_IFMT)
                if AttributeMapper.specialTypes.contains(type) {
                    keys[AttributeMapper.modeKey] = String(type | (mode & 0o7777), radix: 8)
                }
            }
            if target.kind != .directory, let staged = state.withLock({ $0.staged[inode] }), writeBack.rideAlong(staged, { s in
                for (key, value) in keys where key != AttributeMapper.mtimeKey { s.pendingMetadata[key] = value }
                if let mtime = changes.modificationTime {
                    s.modificationTime = Self.timestamp(mtime)
                    s.modificationTimeWasSet = true
                }
            }) {
                // Goes with the coming upload.
            } else {
                var patch = MetadataPatch()
                patch.customMetadata = keys
                _ = try await changeMetadata(of: inode, record: target, patch)
            }
        }
        return try await getattr(inode)
    }

    /// A truncate through a handle changes the staged file (uploaded at
    /// close); one by path stages, truncates and uploads at once.
    private func truncate(_ inode: UInt64, _ path: String, to size: Int64) async throws(FSError) {
        // A staged file whose last release is uploading it takes the change
        // into another upload; one retired meanwhile does not.
        if let staged = state.withLock({ $0.staged[inode] }),
           try await writeBack.truncate(staged, to: size) {
            return
        }
        let info = try await currentInfo(path)
        guard info.size != size else { return }
        let staged = try writeBack.makeStagedFile(path: path, base: info, truncated: size == 0)
        defer { writeBack.discard(staged) }
        try await writeBack.truncate(staged, to: size)
        try await writeBack.upload(staged, inode: inode, reason: "truncate")
    }

    static func metadataKeys(_ changes: AttributeChanges) -> [String: String] {
        var keys: [String: String] = [:]
        if let mode = changes.mode { keys[AttributeMapper.modeKey] = String(mode & 0o7777, radix: 8) }
        if let uid = changes.uid { keys[AttributeMapper.uidKey] = String(uid) }
        if let gid = changes.gid { keys[AttributeMapper.gidKey] = String(gid) }
        if let mtime = changes.modificationTime { keys[AttributeMapper.mtimeKey] = secondsText(timestamp(mtime)) }
        if let atime = changes.accessTime { keys[AttributeMapper.atimeKey] = secondsText(timestamp(atime)) }
        return keys
    }

    static func timestamp(_ time: AttributeChanges.Time) -> Timestamp {
        switch time {
        case .now: return Timestamp(Date())
        case .at(let t): return t
        }
    }

    /// Whole seconds, as `gcloud storage` writes them.
    static func secondsText(_ t: Timestamp) -> String { String(t.seconds) }
}
