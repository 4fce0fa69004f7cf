import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// Statements of docs/semantics.md that no other test checked.
@Suite struct SemanticsCoverageTests {
    // Checks semantics.md#shows-reads
    @Test func filesReportAOneMebibyteIOSize() async throws {
        let h = try Harness()
        _ = h.store.seed("data/file.bin", bytes(10, seed: 1))
        let attributes = try await h.lookup("data/file.bin").attributes
        #expect(attributes.blockSize == 1 << 20, "st_blksize: cp and cat move 1 MiB per call")
    }

    // Checks semantics.md#write-directories
    @Test func deletingTheLastFileOfAnImplicitDirectoryMakesItDisappear() async throws {
        let h = try Harness()
        _ = h.store.seed("made-elsewhere/only.txt", bytes(10, seed: 2))
        let directory = try await h.lookup("made-elsewhere").attributes.inode
        try await h.fs.unlink(parent: directory, name: "only.txt")
        #expect(try await h.list(InodeTable.root).map(\.name).contains("made-elsewhere") == false, "gone from its parent's listing")
        // A lookup by name may answer from the attribute cache until
        // --stat-ttl (60 s here) has passed; then the name is gone too.
        h.clock.advance(by: .seconds(61))
        await expectErrno(ENOENT) { try await h.lookup("made-elsewhere") }
    }
}
