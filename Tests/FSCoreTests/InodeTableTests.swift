import Foundation
import Testing
@testable import FSCore

@Suite("inodes and lookup counts")
struct InodeTableTests {
    @Test func lookupCountsAreExactAndForgetDrops() async throws {
        let h = try Harness()
        h.store.seed("a", bytes(1))
        let a1 = try await h.lookup("a")
        let a2 = try await h.lookup("a")
        let inode = a1.attributes.inode
        #expect(a2.attributes.inode == inode && inode != InodeTable.root)
        #expect(h.fs.lookupCount(inode) == 2)
        h.fs.countLookups([inode])
        #expect(h.fs.lookupCount(inode) == 3)
        h.fs.forget(inode, lookups: 2)
        #expect(h.fs.lookupCount(inode) == 1)
        h.fs.forget(inode, lookups: 1)
        #expect(h.fs.lookupCount(inode) == nil, "dropped at zero")
        #expect(h.fs.knownInodeCount == 1)
        let again = try await h.lookup("a")
        #expect(again.attributes.inode > inode, "numbers are never reused")
        h.fs.forget(InodeTable.root, lookups: 10)
        #expect(h.fs.knownInodeCount == 2, "the root stays")
    }

    @Test func openHandlesKeepForgottenInodes() async throws {
        let h = try Harness()
        h.store.seed("a", bytes(10))
        let inode = try await h.lookup("a").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        h.fs.forget(inode, lookups: 1)
        #expect(h.fs.lookupCount(inode) == 0, "still known while open")
        #expect(try await h.fs.read(inode, handle: open.handle, offset: 0, size: 10) == bytes(10))
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.fs.lookupCount(inode) == nil)
    }

    @Test func readdirEntriesArePinnedUntilReleasedirOrCounted() async throws {
        let h = try Harness()
        for name in ["x", "y", "z"] { h.store.seed("d/" + name) }
        let d = try await h.lookup("d").attributes.inode
        let handle = try await h.fs.opendir(d)
        let entries = try await h.fs.readdir(d, handle: handle, offset: 0)
        #expect(h.fs.knownInodeCount == 5)
        // The bridge packed x and y as readdirplus entries, z did not fit.
        h.fs.countLookups([entries[2].entry.attributes.inode, entries[3].entry.attributes.inode])
        h.fs.releasedir(d, handle: handle)
        #expect(h.fs.knownInodeCount == 4, "z dropped, x and y held by the kernel")
        #expect(h.fs.lookupCount(entries[2].entry.attributes.inode) == 1)
    }

    @Test func aKindChangeGetsANewInode() {
        var table = InodeTable()
        let file = table.lookup("a", kind: .file)
        let directory = table.lookup("a", kind: .directory)
        #expect(file != directory)
        #expect(table[file]?.bound == false && table.inode(forPath: "a") == directory)
        table.forget(file, 1)
        #expect(table[file] == nil && table.inode(forPath: "a") == directory)
        table.checkInvariants()
    }

    @Test func tooManyForgetsClampAtZero() {
        var table = InodeTable()
        let a = table.lookup("a", kind: .file)
        let dropped = table.forget(a, 5)
        #expect(dropped)
        let droppedAgain = table.forget(a, 1)
        #expect(droppedAgain == false && table.count == 1)
    }
}
