import Foundation
import Testing
@testable import FSCore

@Suite("lookup and getattr")
struct LookupTests {
    // Checks semantics.md#shows-implicit-directories, semantics.md#errno-enoent
    @Test func filesAndImplicitAndExplicitDirectories() async throws {
        let h = try Harness()
        let file = h.store.seed("docs/readme.txt", bytes(1234))
        h.store.seed("empty/")  // an explicit, empty directory
        h.store.seed("implicit/deeper/leaf")

        let docs = try await h.lookup("docs")
        #expect(docs.attributes.mode == UInt32(S_IFDIR) | 0o755)
        #expect(docs.attributes.linkCount == 2 && docs.attributes.size == 0)
        #expect(docs.attributes.modificationTime == Timestamp(h.mountTime), "no placeholder: mount time")
        #expect(docs.entryTimeout == 60 && docs.attributeTimeout == 60)

        let readme = try await h.lookup("docs/readme.txt")
        #expect(readme.attributes.mode == UInt32(S_IFREG) | 0o644)
        #expect(readme.attributes.size == 1234 && readme.attributes.linkCount == 1)
        #expect(readme.attributes.uid == 1000 && readme.attributes.gid == 1000)
        #expect(readme.attributes.modificationTime == Timestamp(file.updated))

        let empty = try await h.lookup("empty")
        #expect(empty.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFDIR))
        let leaf = try await h.lookup("implicit/deeper/leaf")
        #expect(leaf.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFREG))

        let attributes = try await h.fs.getattr(readme.attributes.inode)
        #expect(attributes.attributes == readme.attributes && attributes.timeout == 60)
        let root = try await h.fs.getattr(InodeTable.root)
        #expect(root.attributes.inode == 1 && root.attributes.mode == UInt32(S_IFDIR) | 0o755)

        await expectErrno(ENOENT) { try await h.lookup("docs/missing") }
        await expectErrno(ENOTDIR) { _ = try await h.fs.lookup(parent: readme.attributes.inode, name: "x") }
        await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: 999, name: "x") }
    }

    @Test func placeholderMetadataGivesTheDirectoryItsAttributes() async throws {
        let h = try Harness()
        h.store.seed("d/", customMetadata: ["goog-reserved-file-mtime": "1500000000", "goog-reserved-posix-mode": "40700"])
        let d = try await h.lookup("d")
        #expect(d.attributes.modificationTime == Timestamp(seconds: 1_500_000_000))
        #expect(d.attributes.mode == UInt32(S_IFDIR) | 0o700)
    }

    // Checks semantics.md#shows-directory-wins
    @Test func directoryWinsOverAFileOfTheSameName() async throws {
        let h = try Harness()
        h.store.seed("a", bytes(10))
        h.store.seed("a/b", bytes(20))
        let a = try await h.lookup("a")
        #expect(a.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFDIR))
        let names = try await h.list(InodeTable.root).map(\.name)
        #expect(names == [".", "..", "a"], "the object a is hidden")
        let listed = try await h.list(InodeTable.root).last!
        #expect(listed.entry.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFDIR))
    }

    // Checks semantics.md#shows-skipped-names
    @Test func namesThatCannotBeFilesAreSkipped() async throws {
        let h = try Harness()
        for name in ["ok", "dir//double", "trailing/", "x/./y", "x/../y", ".", "..", "dots/..", "dots/.", "dots/fine"] {
            h.store.seed(name)
        }
        let root = try await h.list(InodeTable.root).map(\.name)
        #expect(root == [".", "..", "dir", "dots", "ok", "trailing", "x"])
        let x = try await h.lookup("x")
        #expect(try await h.list(x.attributes.inode).map(\.name) == [".", ".."], "x/. and x/.. cannot be directories")
        let dots = try await h.lookup("dots")
        #expect(try await h.list(dots.attributes.inode).map(\.name) == [".", "..", "fine"])
        let dir = try await h.lookup("dir")
        #expect(try await h.list(dir.attributes.inode).map(\.name) == [".", ".."])
    }

    // Checks semantics.md#shows-caching
    @Test func freshEntriesAnswerWithoutRequestsAndExpireWithTheClock() async throws {
        let h = try Harness()
        h.store.seed("f", bytes(5))
        let first = try await h.lookup("f")
        let probe = h.store.totalRequests
        #expect(probe == 3, "stat, placeholder stat and list, in parallel")
        _ = try await h.lookup("f")
        _ = try await h.fs.getattr(first.attributes.inode)
        #expect(h.store.totalRequests == probe, "within the TTL: no request")

        h.clock.advance(by: .seconds(61))
        h.store.seed("f", bytes(50))
        let attributes = try await h.fs.getattr(first.attributes.inode)
        #expect(attributes.attributes.size == 50)
        #expect(h.store.requestCount(.stat) == 3, "a stale file costs one stat")
        let again = try await h.lookup("f")
        #expect(again.attributes.inode == first.attributes.inode && again.attributes.size == 50)
        #expect(h.store.totalRequests == probe + 1)
    }

    @Test func zeroTTLAlwaysAsks() async throws {
        let h = try Harness(options: MountOptions(statTTL: 0, negativeTTL: 0))
        h.store.seed("f", bytes(5))
        _ = try await h.lookup("f")
        _ = try await h.lookup("f")
        #expect(h.store.totalRequests == 6)
        await expectErrno(ENOENT) { try await h.lookup("g") }
        await expectErrno(ENOENT) { try await h.lookup("g") }
        #expect(h.store.totalRequests == 12)
    }

    // Checks semantics.md#shows-caching
    @Test func absentNamesAreRememberedForTheNegativeTTL() async throws {
        let h = try Harness()
        await expectErrno(ENOENT) { try await h.lookup("ghost") }
        let after = h.store.totalRequests
        h.store.seed("ghost", bytes(1))
        await expectErrno(ENOENT) { try await h.lookup("ghost") }
        #expect(h.store.totalRequests == after, "negative entry answers")
        h.clock.advance(by: .seconds(5))
        let ghost = try await h.lookup("ghost")
        #expect(ghost.attributes.size == 1)
    }

    // Checks semantics.md#shows-attributes
    @Test func posixMetadataFromGcloud() async throws {
        let h = try Harness()
        h.store.seed("six", customMetadata: [
            "goog-reserved-posix-mode": "100600", "goog-reserved-posix-uid": "42", "goog-reserved-posix-gid": "43",
            "goog-reserved-file-mtime": "1700000000",
        ])
        h.store.seed("short", customMetadata: ["goog-reserved-posix-mode": "755"])
        h.store.seed("setuid", customMetadata: ["goog-reserved-posix-mode": "4755"])
        let junkInfo = h.store.seed("junk", customMetadata: ["goog-reserved-posix-mode": "rwx", "goog-reserved-posix-uid": "-1", "goog-reserved-file-mtime": "soon"])
        let six = try await h.lookup("six").attributes
        #expect(six.mode == UInt32(S_IFREG) | 0o600 && six.uid == 42 && six.gid == 43)
        #expect(six.modificationTime == Timestamp(seconds: 1_700_000_000))
        #expect(try await h.lookup("short").attributes.mode == UInt32(S_IFREG) | 0o755)
        // Shown as stored: the mount is always nosuid (libfuse's default;
        // `-o suid` is dropped), so the bit grants nothing.
        #expect(try await h.lookup("setuid").attributes.mode == UInt32(S_IFREG) | 0o4755)
        let junk = try await h.lookup("junk").attributes
        #expect(junk.mode == UInt32(S_IFREG) | 0o644 && junk.uid == 1000)
        #expect(junk.modificationTime == Timestamp(junkInfo.updated), "an unreadable mtime falls back to updated")
    }

    // Checks semantics.md#shows-attributes
    @Test func mountOptionsDecideDefaults() async throws {
        let h = try Harness(options: MountOptions(uid: 7, gid: 8, fileMode: 0o640, dirMode: 0o750, statTTL: 2))
        h.store.seed("d/f")
        let d = try await h.lookup("d")
        let f = try await h.lookup("d/f")
        #expect(d.attributes.mode == UInt32(S_IFDIR) | 0o750 && f.attributes.mode == UInt32(S_IFREG) | 0o640)
        #expect(f.attributes.uid == 7 && f.attributes.gid == 8 && f.entryTimeout == 2)
    }

    @Test func aPrefixMountSeesOnlyItsPrefix() async throws {
        let h = try Harness(options: MountOptions(prefix: "/team//data"))
        h.store.seed("team/data/a.txt", bytes(3))
        h.store.seed("team/data/sub/b.txt")
        h.store.seed("team/other.txt")
        h.store.seed("elsewhere")
        #expect(try await h.list(InodeTable.root).map(\.name) == [".", "..", "a.txt", "sub"])
        #expect(try await h.lookup("a.txt").attributes.size == 3)
        #expect(try await h.lookup("sub/b.txt").attributes.size == 0)
        await expectErrno(ENOENT) { try await h.lookup("elsewhere") }
        #expect(try await h.readAll(try await h.lookup("a.txt").attributes.inode) == bytes(3))
    }

    @Test func storeFailuresBecomeErrnos() async throws {
        let h = try Harness()
        h.store.failNext(1, with: .permissionDenied("403"), operations: [.list])
        await expectErrno(EACCES) { try await h.lookup("x") }
        h.store.failNext(1, with: .unavailable("503"), operations: [.list])
        await expectErrno(EIO) { _ = try await h.fs.opendir(InodeTable.root) }
    }

    @Test func statfsAnswers() {
        let h = try! Harness()
        let stats = h.fs.statfs()
        #expect(stats.blockSize == 4096 && stats.blocks * stats.blockSize == 1 << 50)
        #expect(stats.freeBlocks == stats.blocks && stats.maximumNameLength == 255, "NAME_MAX of new names")
    }
}
