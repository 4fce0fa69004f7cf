import Foundation

/// What a running mount reports to `bucketfs status`: uploads still owed to
/// the bucket, the recovery folder, and what the caches hold. Codable so the
/// CLI can send it over the control socket as JSON.
public struct FileSystemStatus: Codable, Sendable, Equatable {
    /// A file with changes the bucket does not have yet.
    public struct PendingUpload: Codable, Sendable, Equatable {
        public var path: String
        public var size: Int64
        public enum State: String, Codable, Sendable {
            /// Open, changed since the last upload.
            case writing
            /// An upload is in flight.
            case uploading
            /// The last upload failed; the bytes are in the recovery folder
            /// and are retried.
            case failed
        }
        public var state: State
        public var openHandles: Int
    }

    /// A file whose upload failed, kept in the recovery folder.
    public struct RecoveryEntry: Codable, Sendable, Equatable {
        public var object: String
        public var size: Int64
        public var savedAt: Date
        /// Why the upload failed.
        public var reason: String
        /// Set when background retries gave up (a precondition failed, for
        /// example) or were never going to run (a failure that is not
        /// transient), with the reason; nil while they go on.
        public var retryStopped: String?
    }

    public struct Caches: Codable, Sendable, Equatable {
        public var blockCacheBytes: Int64
        public var blockCacheCapacityBytes: Int64
        public var blockCacheBlocks: Int
        public var statEntries: Int
        public var listings: Int
        public var listingEntries: Int
        public var knownInodes: Int
        public var readAheadBytesInUse: Int64
        public var readAheadBudgetBytes: Int64
    }

    public var pendingUploads: [PendingUpload]
    public var recovery: [RecoveryEntry]
    public var caches: Caches
    /// Temporary parts of parallel uploads (object names) whose delete
    /// failed; tried again before the next parallel upload.
    public var leftoverParts: [String] = []
}

extension FileSystem {
    /// A snapshot for `bucketfs status`. Reads the recovery folder from disk
    /// (its sidecars are the record of failed uploads, also across mounts).
    public func status() -> FileSystemStatus {
        let (pending, counts) = state.withLock { s in
            var pending: [FileSystemStatus.PendingUpload] = []
            for (inode, staged) in s.staged {
                let path = "/" + (s.inodes[inode]?.path ?? "?")
                let file = staged.state(in: s)
                let state: FileSystemStatus.PendingUpload.State? = switch file.writeBack.phase {
                case .dirty: .writing
                case .uploading: .uploading
                case .failed: .failed
                case .clean, .unlinked, .retired: nil
                }
                if let state {
                    pending.append(FileSystemStatus.PendingUpload(path: path, size: file.size, state: state, openHandles: file.writeBack.handles))
                }
            }
            let counts = (stats: s.metadata.entryCount, listings: s.metadata.listings.cache.count, entries: s.metadata.listings.cache.entryCount, inodes: s.inodes.count)
            return (pending.sorted { $0.path < $1.path }, counts)
        }
        // The block cache's index and the read-ahead budget are read after
        // `state` is released (see the lock order in FileSystem.swift).
        let caches = FileSystemStatus.Caches(
            blockCacheBytes: blockCache?.usedBytes ?? 0, blockCacheCapacityBytes: blockCache?.capacity ?? 0,
            blockCacheBlocks: blockCache?.blockCount ?? 0, statEntries: counts.stats, listings: counts.listings,
            listingEntries: counts.entries, knownInodes: counts.inodes,
            readAheadBytesInUse: budget.inUse, readAheadBudgetBytes: options.readAheadBudget)
        let recovered = (recovery?.pending() ?? [])
            .filter { $0.entry.bucket == options.bucket }
            .map { FileSystemStatus.RecoveryEntry(
                object: $0.entry.object, size: $0.entry.size, savedAt: $0.entry.savedAt, reason: $0.entry.reason,
                retryStopped: $0.entry.retryStopped) }
            .sorted { $0.object < $1.object }
        return FileSystemStatus(pendingUploads: pending, recovery: recovered, caches: caches, leftoverParts: parallelUploads.leftovers)
    }

    /// What the kernel may still cache after `dropMetadataCaches`: names
    /// (positive or negative entries) and inodes' attributes; `pages`: the
    /// inodes (among `inodes`) whose cached file pages must go too.
    public struct KernelCacheEntries: Sendable {
        public var names: [(parent: UInt64, name: String)] = []
        public var inodes: [UInt64] = []
        public var pages: [UInt64] = []
    }

    /// Forgets every cached attribute, listing and absent name, so the next
    /// operations ask the bucket (objects changed by other tools show at
    /// once instead of after `statTTL`). Open files, staged writes and the
    /// block cache (keyed by generation, so never stale) are kept. Returns
    /// the names and inodes the kernel may hold in its own caches, for the
    /// bridge to invalidate there too.
    @discardableResult
    public func dropMetadataCaches() -> KernelCacheEntries {
        let (kernel, dropped) = state.withLock { s -> (KernelCacheEntries, Int) in
            let dropped = s.metadata.entryCount + s.metadata.listings.entriesHeld
            var kernel = KernelCacheEntries()
            func addName(_ path: String) {
                let parent = PathRules.parent(of: path)
                guard let parentInode = s.inodes.inode(forPath: parent) else { return }
                kernel.names.append((parentInode, String(path.dropFirst(parent.isEmpty ? 0 : parent.count + 1))))
            }
            for path in s.metadata.removeAll() { addName(path) }
            for (inode, path) in s.inodes.boundPaths {
                kernel.inodes.append(inode)
                addName(path)
            }
            return (kernel, dropped)
        }
        logger.notice("metadata caches dropped", metadata: ["entries": "\(dropped)", "kernelNames": "\(kernel.names.count)"])
        return kernel
    }
}
