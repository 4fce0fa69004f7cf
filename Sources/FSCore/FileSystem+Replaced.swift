import Foundation
import Synchronization

/// Forgetting what the mount and the kernel cached about an object that
/// turned out to be replaced (or deleted) behind the mount: an upload whose
/// precondition failed (a lost conflict, ESTALE) or a read that found its
/// pinned generation gone. Until `statTTL` passed, the caches would still
/// show the generation from before (neither the user's bytes nor the
/// object's), and an open would pin that gone generation again.
extension FileSystem {
    /// Tells the kernel to forget cached entries (the bridge passes
    /// `FuseSession.invalidateKernelCaches`). It is called from a thread of
    /// its own, never with a lock of this class held, so it may block on
    /// the kernel; the operation that learned of the change waits for it,
    /// so what the caller sees next is already fresh.
    public func setKernelCacheInvalidator(_ invalidate: @escaping @Sendable (KernelCacheEntries) -> Void) {
        kernelCacheInvalidator.withLock { $0 = invalidate }
    }

    /// Drops `path`'s metadata cache entry and its directory's cached listing
    /// (the new object's size and generation are not known yet), then has
    /// the kernel drop the attributes of the inode bound to `path` and,
    /// with `pages`, its cached pages (which may hold the rejected writes).
    /// Blocks pinned in the block cache are keyed by generation: never
    /// stale, kept.
    func forgetReplaced(_ path: String, pages: Bool) async {
        let now = clock.now
        let inode = state.withLock { s -> UInt64? in
            s.metadata.apply(.forgotten(path, listing: true), now: now)
            return s.inodes.inode(forPath: path)
        }
        logger.debug("cached attributes dropped: the object changed behind the mount", metadata: [
            "object": "\(objectName(path))", "inode": "\(inode.map(String.init) ?? "none")"])
        guard let inode, let invalidate = kernelCacheInvalidator.withLock({ $0 }) else { return }
        let entries = KernelCacheEntries(inodes: [inode], pages: pages ? [inode] : [])
        // Off Swift's few cooperative threads: the kernel may take a
        // moment (page invalidation waits for locked pages).
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                invalidate(entries)
                done.resume()
            }
        }
    }
}
