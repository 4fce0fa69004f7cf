import Foundation
import Testing
@testable import FSCore

/// POSIX behaviour an object store can give (issue 12, pjdfstest): special
/// files, owners of new entries, directory times, name limits, files used
/// after unlink.
@Suite struct PosixTests {
    let root = InodeTable.root

    // Checks semantics.md#write-special-files
    @Test func fifosSocketsAndDevicesAreEmptyObjectsWithTheirTypeInTheMode() async throws {
        let h = try Harness()
        let fifo = try await h.fs.mknod(parent: root, name: "pipe", mode: UInt32(S_IFIFO) | 0o640, rdev: 0)
        #expect(fifo.attributes.mode == UInt32(S_IFIFO) | 0o640)
        let device = try await h.fs.mknod(parent: root, name: "disk", mode: UInt32(S_IFBLK) | 0o600, rdev: 0x0801)
        #expect(device.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFBLK) && device.attributes.rdev == 0x0801)
        let socket = try await h.fs.mknod(parent: root, name: "sock", mode: UInt32(S_IFSOCK) | 0o755, rdev: 0)
        #expect(socket.attributes.mode == UInt32(S_IFSOCK) | 0o755)
        #expect(try await h.store.stat("pipe").customMetadata["goog-reserved-posix-mode"] == "10640")
        #expect(try await h.store.stat("disk").customMetadata["goog-reserved-posix-rdev"] == "2049")

        // chmod keeps the type; a remount reads it back.
        _ = try await h.fs.setattr(fifo.attributes.inode, handle: nil, changes: AttributeChanges(mode: 0o600))
        #expect(try await h.store.stat("pipe").customMetadata["goog-reserved-posix-mode"] == "10600")
        let again = try Harness(options: MountOptions(uid: 1000, gid: 1000), store: h.store)
        #expect(try await again.lookup("pipe").attributes.mode == UInt32(S_IFIFO) | 0o600)
        #expect(try await again.lookup("disk").attributes.rdev == 0x0801)
        await expectErrno(EEXIST) { _ = try await h.fs.mknod(parent: root, name: "pipe", mode: UInt32(S_IFIFO) | 0o644, rdev: 0) }
    }

    // Checks semantics.md#shows-owners-permissions
    @Test func aNewEntryBelongsToItsCallerAndASetgidDirectoryPassesItsGroupOn() async throws {
        let h = try Harness()
        let file = try await Caller.$current.withValue(Caller(uid: 4242, gid: 77)) {
            try await h.fs.mknod(parent: root, name: "theirs", mode: UInt32(S_IFREG) | 0o644, rdev: 0)
        }
        #expect(file.attributes.uid == 4242 && file.attributes.gid == 77)
        let stored = try await h.store.stat("theirs").customMetadata
        #expect(stored["goog-reserved-posix-uid"] == "4242" && stored["goog-reserved-posix-gid"] == "77")
        // The mount's own user writes no owner keys.
        _ = try await Caller.$current.withValue(Caller(uid: 1000, gid: 1000)) {
            try await h.fs.mknod(parent: root, name: "mine", mode: UInt32(S_IFREG) | 0o644, rdev: 0)
        }
        #expect(try await h.store.stat("mine").customMetadata["goog-reserved-posix-uid"] == nil)

        let shared = try await h.fs.mkdir(parent: root, name: "shared", mode: 0o2775)
        _ = try await h.fs.setattr(shared.attributes.inode, handle: nil, changes: AttributeChanges(gid: 500))
        let sub = try await Caller.$current.withValue(Caller(uid: 4242, gid: 77)) {
            try await h.fs.mkdir(parent: shared.attributes.inode, name: "sub", mode: 0o755)
        }
        #expect(sub.attributes.gid == 500, "the setgid directory's group")
        #expect(sub.attributes.mode == UInt32(S_IFDIR) | 0o2755, "a new directory inherits setgid")
    }

    // Checks semantics.md#shows-attributes
    @Test func creatingAndRemovingEntriesMovesTheDirectorysTimes() async throws {
        let h = try Harness()
        let dir = try await h.fs.mkdir(parent: root, name: "d", mode: 0o755).attributes
        try await Task.sleep(for: .milliseconds(20))
        _ = try await h.fs.mknod(parent: dir.inode, name: "f", mode: UInt32(S_IFREG) | 0o644, rdev: 0)
        let afterCreate = try await h.fs.getattr(dir.inode).attributes
        #expect(AttributeMapper.later(afterCreate.modificationTime, dir.modificationTime) == afterCreate.modificationTime)
        #expect(afterCreate.modificationTime != dir.modificationTime && afterCreate.changeTime == afterCreate.modificationTime)
        try await Task.sleep(for: .milliseconds(20))
        try await h.fs.unlink(parent: dir.inode, name: "f")
        #expect(try await h.fs.getattr(dir.inode).attributes.modificationTime != afterCreate.modificationTime)
    }

    // Checks semantics.md#errno-enametoolong
    @Test func newNamesStopAtNameMaxButLongerExistingOnesStayReachable() async throws {
        let h = try Harness()
        let long = String(repeating: "n", count: 256)
        await expectErrno(ENAMETOOLONG) { _ = try await h.fs.mkdir(parent: root, name: long, mode: 0o755) }
        await expectErrno(ENAMETOOLONG) { _ = try await h.fs.lookup(parent: root, name: long) }
        let existing = String(repeating: "e", count: 300)
        h.store.seed(existing, Data("from another tool".utf8))
        #expect(try await h.lookup(existing).attributes.size == 17)
        _ = try await h.fs.mkdir(parent: root, name: String(repeating: "n", count: 255), mode: 0o755)
    }

    // Checks semantics.md#write-unlinked-open
    @Test func aFileUnlinkedWhileOpenIsStillReadAndStatted() async throws {
        let h = try Harness()
        let (entry, open) = try await h.fs.create(parent: root, name: "tmp", mode: 0o600, flags: O_RDWR)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("scratch".utf8))
        try await h.fs.unlink(parent: root, name: "tmp")
        let attributes = try await h.fs.getattr(inode).attributes
        #expect(attributes.linkCount == 0 && attributes.size == 7)
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 0, size: 100) == Data("scratch".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.objectNames.isEmpty, "nothing uploaded for an unlinked file")
        await expectErrno(ENOENT) { _ = try await h.fs.getattr(inode) }
    }
}
