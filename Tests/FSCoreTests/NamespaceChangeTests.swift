import Foundation
import Testing
@testable import FSCore
import FSCoreTesting
#if canImport(Glibc)
import Glibc
#endif

/// Every kind of change, made here to a directory whose listing and
/// entries the mount holds, followed by a stat and a readdir within
/// statTTL: each shows the change at once. (A change that shows only once
/// the cache expires is the bug this table guards against: the stat and
/// the listing must be one story.) Changes made behind the mount show
/// after statTTL, as docs/semantics.md says.
@Suite("a change, then a stat and a readdir")
struct NamespaceChangeTests {
    enum Change: String, CaseIterable, Sendable {
        case mkdir, symlink, mknod, createAndWrite
        case unlink, rmdir
        case renameFile, renameDirectory
        case chmodFile, chmodDirectory, chownDirectory, setxattrFile, setxattrDirectory, writeAndClose
        case behindTheMountAfterTTL
        case cachesDroppedBeforeReaddir
    }

    /// d/f (3 bytes), d/sub/ (0711, holding x), d/empty/, looked up and
    /// listed: the listing of d and its entries are cached.
    static func warm() async throws -> (Harness, d: UInt64) {
        let h = try Harness()
        h.store.seed("d/f", bytes(3))
        h.store.seed("d/sub/", customMetadata: [AttributeMapper.modeKey: "40711"])
        h.store.seed("d/sub/x", bytes(1))
        h.store.seed("d/empty/")
        let d = try await h.lookup("d").attributes.inode
        #expect(try await names(h, d) == ["empty", "f", "sub"])
        for name in ["f", "sub", "empty"] { _ = try await h.fs.lookup(parent: d, name: name) }
        return (h, d)
    }

    static func listed(_ h: Harness, _ d: UInt64) async throws -> [String: FileAttributes] {
        Dictionary(uniqueKeysWithValues: try await h.list(d).dropFirst(2).map { ($0.name, $0.entry.attributes) })
    }

    static func names(_ h: Harness, _ d: UInt64) async throws -> [String] {
        try await h.list(d).dropFirst(2).map(\.name)
    }

    static func stat(_ h: Harness, _ d: UInt64, _ name: String) async throws -> FileAttributes {
        let inode = try await h.fs.lookup(parent: d, name: name).attributes.inode
        return try await h.fs.getattr(inode).attributes
    }

    static func type(_ attributes: FileAttributes?) -> UInt32? { attributes.map { $0.mode & UInt32(S_IFMT) } }

    @Test(arguments: Change.allCases)
    func showsAtOnce(_ change: Change) async throws {
        let (h, d) = try await Self.warm()
        let f = try await h.fs.lookup(parent: d, name: "f").attributes.inode
        let sub = try await h.fs.lookup(parent: d, name: "sub").attributes.inode
        switch change {
        case .mkdir:
            _ = try await h.fs.mkdir(parent: d, name: "new", mode: 0o700)
            #expect(try await Self.stat(h, d, "new").mode == UInt32(S_IFDIR) | 0o700)
            #expect(try await Self.listed(h, d)["new"]?.mode == UInt32(S_IFDIR) | 0o700)
        case .symlink:
            _ = try await h.fs.symlink(target: "f", parent: d, name: "link")
            #expect(Self.type(try await Self.stat(h, d, "link")) == UInt32(S_IFLNK))
            #expect(Self.type(try await Self.listed(h, d)["link"]) == UInt32(S_IFLNK))
        case .mknod:
            _ = try await h.fs.mknod(parent: d, name: "fifo", mode: UInt32(S_IFIFO) | 0o640, rdev: 0)
            #expect(try await Self.stat(h, d, "fifo").mode == UInt32(S_IFIFO) | 0o640)
            #expect(try await Self.listed(h, d)["fifo"]?.mode == UInt32(S_IFIFO) | 0o640)
        case .createAndWrite:
            let (entry, open) = try await h.fs.create(parent: d, name: "new", mode: 0o644, flags: O_WRONLY)
            _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: bytes(7))
            #expect(try await Self.listed(h, d)["new"]?.size == 7, "being written: its local size")
            try await h.fs.flush(entry.attributes.inode, handle: open.handle)
            try await h.fs.release(entry.attributes.inode, handle: open.handle)
            #expect(try await Self.stat(h, d, "new").size == 7)
            #expect(try await Self.listed(h, d)["new"]?.size == 7, "uploaded")
            #expect(h.store.data(of: "d/new") == bytes(7))
        case .unlink:
            try await h.fs.unlink(parent: d, name: "f")
            await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: d, name: "f") }
            #expect(try await Self.names(h, d) == ["empty", "sub"])
        case .rmdir:
            try await h.fs.rmdir(parent: d, name: "empty")
            await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: d, name: "empty") }
            #expect(try await Self.names(h, d) == ["f", "sub"])
        case .renameFile:
            try await h.fs.rename(parent: d, name: "f", newParent: d, newName: "g", flags: [])
            await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: d, name: "f") }
            #expect(try await Self.stat(h, d, "g").size == 3)
            #expect(try await Self.names(h, d) == ["empty", "g", "sub"])
        case .renameDirectory:
            try await h.fs.rename(parent: d, name: "sub", newParent: d, newName: "moved", flags: [])
            await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: d, name: "sub") }
            #expect(try await Self.stat(h, d, "moved").mode == UInt32(S_IFDIR) | 0o711)
            #expect(try await Self.listed(h, d)["moved"]?.mode == UInt32(S_IFDIR) | 0o711)
            #expect(try await Self.names(h, d) == ["empty", "f", "moved"])
            let moved = try await h.fs.lookup(parent: d, name: "moved").attributes.inode
            #expect(try await Self.names(h, moved) == ["x"])
        case .chmodFile:
            _ = try await h.fs.setattr(f, handle: nil, changes: AttributeChanges(mode: 0o600))
            #expect(try await h.fs.getattr(f).attributes.mode == UInt32(S_IFREG) | 0o600)
            #expect(try await Self.listed(h, d)["f"]?.mode == UInt32(S_IFREG) | 0o600)
        case .chmodDirectory:
            _ = try await h.fs.setattr(sub, handle: nil, changes: AttributeChanges(mode: 0o700))
            #expect(try await h.fs.getattr(sub).attributes.mode == UInt32(S_IFDIR) | 0o700)
            #expect(try await Self.listed(h, d)["sub"]?.mode == UInt32(S_IFDIR) | 0o700)
        case .chownDirectory:
            _ = try await h.fs.setattr(sub, handle: nil, changes: AttributeChanges(uid: 1234, gid: 2345))
            let stat = try await h.fs.getattr(sub).attributes
            #expect(stat.uid == 1234 && stat.gid == 2345)
            let entry = try await Self.listed(h, d)["sub"]
            #expect(entry?.uid == 1234 && entry?.gid == 2345 && entry?.mode == UInt32(S_IFDIR) | 0o711)
        case .setxattrFile:
            try await h.fs.setxattr(f, name: "user.k", value: Data("v".utf8), flags: 0)
            #expect(try await h.fs.getxattr(f, name: "user.k") == Data("v".utf8))
            #expect(try await Self.listed(h, d)["f"]?.size == 3)
            #expect(try await h.store.stat("d/f").customMetadata["k"] == "v")
        case .setxattrDirectory:
            try await h.fs.setxattr(sub, name: "user.k", value: Data("v".utf8), flags: 0)
            #expect(try await h.fs.getxattr(sub, name: "user.k") == Data("v".utf8))
            #expect(try await Self.listed(h, d)["sub"]?.mode == UInt32(S_IFDIR) | 0o711, "the mode stays")
        case .writeAndClose:
            let open = try await h.fs.open(f, flags: O_WRONLY)
            _ = try await h.fs.write(f, handle: open.handle, offset: 3, data: bytes(2))
            try await h.fs.flush(f, handle: open.handle)
            try await h.fs.release(f, handle: open.handle)
            #expect(try await h.fs.getattr(f).attributes.size == 5)
            #expect(try await Self.listed(h, d)["f"]?.size == 5)
            #expect(h.store.data(of: "d/f")?.count == 5)
        case .behindTheMountAfterTTL:
            h.store.seed("d/outside", bytes(4))
            #expect(try await Self.names(h, d) == ["empty", "f", "sub"], "within statTTL the listing stands")
            h.clock.advance(by: .seconds(61))
            #expect(try await Self.stat(h, d, "outside").size == 4)
            #expect(try await Self.listed(h, d)["outside"]?.size == 4)
        case .cachesDroppedBeforeReaddir:
            // The same listing again: opendir leaves the entries to the
            // first readdir (the kernel may hold them), by which time the
            // caches are gone.
            let handle = try await h.fs.opendir(d)
            defer { h.fs.releasedir(d, handle: handle) }
            h.fs.dropMetadataCaches()
            h.store.resetCounters()
            let entries = try await h.fs.readdir(d, handle: handle, offset: 0).dropFirst(2)
            #expect(entries.map(\.name) == ["empty", "f", "sub"])
            #expect(entries.first { $0.name == "sub" }?.entry.attributes.mode == UInt32(S_IFDIR) | 0o711)
            #expect(entries.first { $0.name == "f" }?.entry.attributes.size == 3)
            #expect(h.store.requestCount(.list) <= 1)
        }
    }
}
