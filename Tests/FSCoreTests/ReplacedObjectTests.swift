import Foundation
import Synchronization
import Testing
@testable import FSCore

/// An object replaced behind the mount: once the mount learns of it (a
/// lost conflict at close, a read of a gone generation) it shows the new
/// object at once, not what it cached before, and tells the kernel to
/// forget that inode too. The manual clock never moves: every cached
/// answer would still be fresh for `statTTL`.
@Suite struct ReplacedObjectTests {
    /// What the core asked the kernel to forget.
    final class KernelRequests: Sendable {
        let received = Mutex<[FileSystem.KernelCacheEntries]>([])

        init(_ fs: FileSystem) {
            fs.setKernelCacheInvalidator { [self] entries in received.withLock { $0.append(entries) } }
        }

        var inodes: [UInt64] { received.withLock { $0.flatMap(\.inodes) } }
        var pages: [UInt64] { received.withLock { $0.flatMap(\.pages) } }
    }

    // Checks semantics.md#write-conflicts
    @Test func aLostConflictAtCloseShowsTheirObjectAtOnce() async throws {
        let cache = temporaryDirectory("replaced")
        defer { removeDirectory(cache) }
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b"))
        let kernel = KernelRequests(h.fs)
        h.store.seed("dir/doc", Data("original".utf8))
        let dir = try await h.lookup("dir").attributes.inode
        #expect(try await h.list(dir).map(\.name).contains("doc"), "the directory's listing is cached")
        let inode = try await h.lookup("dir/doc").attributes.inode
        #expect(try await h.fs.getattr(inode).attributes.size == 8)

        let open = try await h.fs.open(inode, flags: O_WRONLY | O_TRUNC)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("mine".utf8))
        h.store.seed("dir/doc", Data("theirs".utf8))
        await expectErrno(ESTALE) { try await h.fs.flush(inode, handle: open.handle) }
        #expect(kernel.inodes == [inode] && kernel.pages == [inode], "the kernel forgets the inode's attributes and pages")
        try await h.fs.release(inode, handle: open.handle)

        #expect(try await h.fs.getattr(inode).attributes.size == 6)
        #expect(try await h.lookup("dir/doc").attributes.size == 6)
        #expect(try await h.list(dir).first { $0.name == "doc" }?.entry.attributes.size == 6, "the listing is read again")
        #expect(try await h.readAll(inode) == Data("theirs".utf8))
        let kept = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).path(for: "dir/doc")
        #expect(FileManager.default.contents(atPath: kept) == Data("mine".utf8), "the rejected bytes are kept")
    }

    // Checks semantics.md#write-conflicts
    @Test func aReadOfAGoneGenerationShowsTheNewObjectAtOnce() async throws {
        let h = try Harness()
        let kernel = KernelRequests(h.fs)
        h.store.seed("f", Data("original".utf8))
        let inode = try await h.lookup("f").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        h.store.seed("f", Data("theirs".utf8))
        await expectErrno(ESTALE) { _ = try await h.fs.read(inode, handle: open.handle, offset: 0, size: 4096) }
        #expect(kernel.inodes == [inode] && kernel.pages.isEmpty, "attributes only: the read holds a page")
        try await h.fs.release(inode, handle: open.handle)

        #expect(try await h.fs.getattr(inode).attributes.size == 6)
        #expect(try await h.readAll(inode) == Data("theirs".utf8), "a new open pins the new generation, not the gone one")
    }
}
