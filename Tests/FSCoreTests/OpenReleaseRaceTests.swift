import Foundation
import Testing
@testable import FSCore

/// An open races the release of the inode's previous handle (FUSE RELEASE
/// is asynchronous): the open reads the registered staged file, the last
/// release retires it (descriptor closed, local copy deleted), then the
/// open attaches. These tests put `attach` in exactly that interleaving,
/// which the mount only reaches by chance (RandomizedWrites found it).
@Suite struct OpenReleaseRaceTests {
    /// Writes `text` to `name` through one handle, flushed but still open;
    /// returns the inode, the handle and the staged file registered for it.
    func written(_ h: Harness, _ name: String, _ text: String) async throws -> (UInt64, UInt64, StagedFile) {
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data(text.utf8))
        try await h.fs.flush(inode, handle: open.handle)
        let staged = try #require(h.fs.state.withLock { $0.staged[inode] })
        return (inode, open.handle, staged)
    }

    func download(_ h: Harness, _ name: String) async throws -> String {
        String(decoding: try await h.download(name), as: UTF8.self)
    }

    @Test func aStagedFileRetiredBeforeTheOpenAttachesIsNotRegisteredAgain() async throws {
        let h = try Harness()
        let (inode, handle, seen) = try await written(h, "a.txt", "one")
        // The open has read `seen`; the last release retires it now.
        try await h.fs.release(inode, handle: handle)
        #expect(seen.withState { $0.writeBack.name == .retired })
        #expect(h.fs.state.withLock { $0.staged.state(seen.id) } == nil, "a discarded file's state is gone from the file system's")

        let reply = try await h.fs.attach(inode, seen, fresh: false, writable: true, directIO: false, truncate: false)
        #expect(reply == nil, "a retired staged file must not get a handle")
        #expect(h.fs.state.withLock { $0.staged[inode] } == nil, "nor be registered again")

        // What the caller does next (open afresh from the object) works.
        let open = try await h.fs.open(inode, flags: O_WRONLY)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 3, data: Data(" two".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(try await download(h, "a.txt") == "one two")
    }

    @Test func aRetiredStagedFileIsNeverDiscardedTwiceOverItsSuccessor() async throws {
        let h = try Harness()
        let (inode, handle, seen) = try await written(h, "b.txt", "one")
        try await h.fs.release(inode, handle: handle)
        // Another open registers a successor; its local file may reuse the
        // descriptor number the retired one had.
        let other = try await h.fs.open(inode, flags: O_WRONLY | O_TRUNC)
        let successor = try #require(h.fs.state.withLock { $0.staged[inode] })
        #expect(successor !== seen)

        // The racing open attaches to the successor and leaves the retired
        // one alone (closing it again could close the successor's file).
        let late = try #require(try await h.fs.attach(inode, seen, fresh: false, writable: true, directIO: false, truncate: false))
        #expect(h.fs.state.withLock { $0.staged[inode] } === successor)
        _ = try await h.fs.write(inode, handle: other.handle, offset: 0, data: Data("two".utf8))
        _ = try await h.fs.write(inode, handle: late.handle, offset: 3, data: Data(" three".utf8))
        try await h.fs.flush(inode, handle: other.handle)
        try await h.fs.release(inode, handle: other.handle)
        try await h.fs.flush(inode, handle: late.handle)
        try await h.fs.release(inode, handle: late.handle)
        #expect(try await download(h, "b.txt") == "two three")
        #expect(h.fs.state.withLock { $0.staged[inode] } == nil)
    }
}

/// An unlink races the release of the file's last handle: the close has
/// uploaded the file, the unlink finds its staged file registered, then
/// the release discards it before the unlink asks what it uploaded. A
/// mount test made 10,000 uploads and found 42 such files left in the
/// bucket: the discarded state read as "never uploaded".
@Suite struct UnlinkReleaseRaceTests {
    @Test func anUnlinkWhoseStagedFileIsDiscardedMidwayStillDeletesTheObject() async throws {
        let h = try Harness()
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "a.txt", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("one".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        #expect(try await h.download("a.txt") == Data("one".utf8))

        let (_, staged) = await h.fs.unlinkName("a.txt")
        let seen = try #require(staged)
        try await h.fs.release(inode, handle: open.handle)
        #expect(seen.stored == .unknown, "discarded: what it uploaded is no longer its state's to say")
        try await h.fs.deleteUnlinked("a.txt", parent: InodeTable.root, staged: seen)
        #expect(h.store.objectNames.isEmpty, "the object is deleted: \(h.store.objectNames)")
    }

    @Test func anUnlinkOfAFileNeverUploadedSendsNoDelete() async throws {
        let h = try Harness()
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "b.txt", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: Data("draft".utf8))
        let (_, staged) = await h.fs.unlinkName("b.txt")
        #expect(staged?.stored == .never)
        try await h.fs.deleteUnlinked("b.txt", parent: InodeTable.root, staged: staged)
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        #expect(h.store.objectNames.isEmpty, "never stored: \(h.store.objectNames)")
    }
}
