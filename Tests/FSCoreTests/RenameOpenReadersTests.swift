import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// Descriptors open for reading follow a rename, as on a local disk
/// (`less f` while `mv f g` runs). Before, the rename deleted the
/// generation they were pinned to and their next read was ESTALE.
@Suite struct RenameOpenReadersTests {
    static let content = bytes(3 << 20 + 777, seed: 23)

    func readAll(_ h: Harness, _ inode: UInt64, _ handle: UInt64, from offset: Int64 = 0) async throws -> Data {
        var result = Data()
        while true {
            let part = try await h.fs.read(inode, handle: handle, offset: offset + Int64(result.count), size: 128 << 10)
            if part.isEmpty { return result }
            result += part
        }
    }

    // Checks semantics.md#write-rename
    @Test func aReaderOfARenamedFileReadsOnUnderTheNewName() async throws {
        let h = try Harness()
        h.store.seed("old.bin", Self.content)
        let inode = try await h.lookup("old.bin").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        // A first block read before the rename; the rest after it.
        let head = try await h.fs.read(inode, handle: open.handle, offset: 0, size: 100)
        try await h.fs.rename(parent: InodeTable.root, name: "old.bin", newParent: InodeTable.root, newName: "new.bin", flags: [])
        #expect(h.store.objectNames == ["new.bin"])
        let rest = try await readAll(h, inode, open.handle, from: 100)
        #expect(head + rest == Self.content)
        try await h.fs.release(inode, handle: open.handle)
    }

    // Checks semantics.md#write-rename
    @Test func readersBelowARenamedDirectoryFollowItToo() async throws {
        let h = try Harness()
        h.store.seed("d/inner.bin", Self.content)
        let directory = try await h.lookup("d").attributes.inode
        let inode = try await h.fs.lookup(parent: directory, name: "inner.bin").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        try await h.fs.rename(parent: InodeTable.root, name: "d", newParent: InodeTable.root, newName: "e", flags: [])
        #expect(h.store.objectNames == ["e/inner.bin"])
        #expect(try await readAll(h, inode, open.handle) == Self.content)
        try await h.fs.release(inode, handle: open.handle)
    }
}
