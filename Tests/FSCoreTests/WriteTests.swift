import Foundation
import Synchronization
import Testing
@testable import FSCore
import StorageKit
import FSCoreTesting

/// The write path over the in-memory store: what is uploaded when, with
/// which precondition, and what happens to the bytes when it fails.
private let MiB = 1 << 20

@Suite struct WriteTests {
    // Checks semantics.md#write-when-uploaded
    @Test func createWriteAndCloseUploadOnceAsANewObject() async throws {
        let h = try Harness()
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "new.txt", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        #expect(try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("hello".utf8)) == 5)
        #expect(h.store.requestCount(.put) == 0, "nothing is uploaded before a flush")
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.put) == 1, "a second flush of an unchanged file uploads nothing")
        #expect(try await h.download("new.txt") == Data("hello".utf8))
        let stored = try await h.store.stat("new.txt")
        // A new file sends no content type: the store decides (StorageKit
        // infers it from the name; the in-memory store uses its default).
        #expect(stored.contentType == "application/octet-stream")
        // A written file's mtime is the object's `updated`: no key to keep.
        #expect(stored.customMetadata == [:])
        #expect(try await h.fs.getattr(inode).attributes.modificationTime == Timestamp(stored.updated))
    }

    // Checks semantics.md#write-only-direct
    @Test func onlyAWriteOnlyHandleAsksToBypassThePageCache() async throws {
        let h = try Harness()
        h.store.seed("f", Data("abc".utf8))
        let inode = try await h.lookup("f").attributes.inode
        let cases: [(String, Int32, Bool)] = [
            ("O_WRONLY", O_WRONLY, true), ("O_WRONLY|O_APPEND", O_WRONLY | O_APPEND, true),
            ("O_RDWR", O_RDWR, false), ("O_RDONLY", O_RDONLY, false),
            // Atomic O_TRUNC arrives in open: a read-only handle that
            // truncates may still read, and map, the file.
            ("O_RDONLY|O_TRUNC", O_RDONLY | O_TRUNC, false), ("O_WRONLY|O_TRUNC", O_WRONLY | O_TRUNC, true),
        ]
        for (name, flags, direct) in cases {
            let open = try await h.fs.open(inode, flags: flags)
            #expect(open.directIO == direct, "\(name)")
            #expect(!open.keepCache, "\(name): a handle on the staged file keeps no cached page")
            try await h.fs.release(inode, handle: open.handle)
        }
        // A second handle on a file already staged asks the same.
        let writer = try await h.fs.open(inode, flags: O_WRONLY)
        let reader = try await h.fs.open(inode, flags: O_RDONLY)
        let second = try await h.fs.open(inode, flags: O_WRONLY)
        #expect(writer.directIO && !reader.directIO && second.directIO)
        for handle in [writer, reader, second] { try await h.fs.release(inode, handle: handle.handle) }

        let (entry, created) = try await h.fs.create(parent: InodeTable.root, name: "new", mode: 0o644, flags: O_WRONLY | O_TRUNC)
        #expect(created.directIO, "create for writing only")
        try await h.fs.release(entry.attributes.inode, handle: created.handle)
        let (both, readable) = try await h.fs.create(parent: InodeTable.root, name: "rw", mode: 0o644, flags: O_RDWR)
        #expect(!readable.directIO, "create for reading and writing")
        try await h.fs.release(both.attributes.inode, handle: readable.handle)
    }

    // Checks semantics.md#shows-owners-permissions
    @Test func aWriteByAnyoneButRootClearsSetuidAndSetgidWithGroupExecute() async throws {
        let h = try Harness()
        let cases: [(mode: UInt32, uid: UInt32, after: UInt32)] = [
            (0o4755, 1000, 0o755), (0o2775, 1000, 0o775), (0o6775, 1000, 0o775),
            (0o2765, 1000, 0o2765),  // setgid without group execute: mandatory locking's mark, kept
            (0o6755, 0, 0o6755),  // root's write keeps both
            (0o644, 1000, 0o644),
        ]
        for (mode, uid, after) in cases {
            let name = "f\(String(mode, radix: 8))-\(uid)"
            let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o644, flags: O_WRONLY)
            let inode = entry.attributes.inode
            _ = try await h.fs.setattr(inode, handle: open.handle, changes: AttributeChanges(mode: mode))
            let written = try await Caller.$current.withValue(Caller(uid: uid, gid: uid)) {
                try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("x".utf8))
            }
            #expect(written == 1)
            #expect(try await h.fs.getattr(inode).attributes.mode & 0o7777 == after, "\(name)")
            try await h.fs.flush(inode, handle: open.handle)
            try await h.fs.release(inode, handle: open.handle)
            #expect(try await h.store.stat(name).customMetadata["goog-reserved-posix-mode"] == String(after, radix: 8), "\(name) as stored")
        }
    }

    // Checks semantics.md#write-when-uploaded
    @Test func anEmptyCreatedFileStillReachesTheBucket() async throws {
        let h = try Harness()
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "empty", mode: 0o600, flags: O_WRONLY)
        try await h.fs.flush(entry.attributes.inode, handle: open.handle)
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        let stored = try await h.store.stat("empty")
        #expect(stored.size == 0)
        #expect(stored.customMetadata["goog-reserved-posix-mode"] == "600")
    }

    // Checks semantics.md#write-staged-files
    @Test func anAppendToALargeObjectDownloadsNothingUntilUpload() async throws {
        let h = try Harness()
        let original = bytes(20 * MiB, seed: 1)
        let seeded = h.store.seed("big", original, contentType: "application/x-thing", customMetadata: ["owner": "ann"])
        let inode = try await h.lookup("big").attributes.inode
        let open = try await h.fs.open(inode, flags: O_WRONLY | O_APPEND)
        h.store.resetCounters()
        _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(original.count), data: Data("tail".utf8))
        #expect(h.store.requestCount(.read) == 0, "appending past the end needs none of the old bytes")
        #expect(try await h.fs.getattr(inode).attributes.size == Int64(original.count + 4))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(try await h.download("big") == original + Data("tail".utf8))
        let stored = try await h.store.stat("big")
        #expect(stored.generation != seeded.generation)
        #expect(stored.contentType == "application/x-thing", "the content type is kept")
        #expect(stored.customMetadata["owner"] == "ann", "custom metadata is kept")
    }

    // Checks semantics.md#write-staged-files
    @Test func aPartialBlockWriteFetchesThatBlockOnly() async throws {
        let h = try Harness()
        let original = bytes(8 * MiB, seed: 2)
        h.store.seed("f", original)
        let inode = try await h.lookup("f").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDWR)
        let offset = 5 * MiB + 100
        _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(offset), data: Data("XYZ".utf8))
        let readsBefore = h.store.requestCount(.read)
        #expect(readsBefore >= 1 && readsBefore <= 2)
        // Read-your-writes, also through a second handle.
        let reader = try await h.fs.open(inode, flags: O_RDONLY)
        let seen = try await h.fs.read(inode, handle: reader.handle, offset: Int64(offset - 2), size: 7)
        var expected = original
        expected.replaceSubrange(offset..<(offset + 3), with: Data("XYZ".utf8))
        #expect(seen == expected[(offset - 2)..<(offset + 5)])
        try await h.fs.release(inode, handle: reader.handle)
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(try await h.download("f") == expected)
    }

    @Test func aFileWrittenInOrderStreamsItsUploadWhileBeingWritten() async throws {
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, streamChunkSize: 16 << 20))
        let content = bytes(40 * MiB + 12345, seed: 9)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "movie.bin", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        var offset = 0
        while offset < content.count {
            let piece = content[offset..<min(content.count, offset + MiB)]
            _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(offset), data: Data(piece))
            offset += piece.count
        }
        // Sends run in the background while writing goes on.
        for _ in 0..<200 where h.store.requestCount(.streamingSend) < 1 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(h.store.requestCount(.streamingStart) == 1)
        #expect(h.store.requestCount(.streamingSend) >= 1, "bytes were sent before the close")
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.put) == 0, "the close finished the stream instead of uploading again")
        #expect(h.store.requestCount(.streamingFinish) == 1)
        #expect(try await h.download("movie.bin") == content)
        #expect(h.store.requestCount(.patch) == 0, "nothing changed the metadata the stream started with")
        #expect(try await h.store.stat("movie.bin").customMetadata == [:])
    }

    @Test func aWriteOutOfOrderEndsTheStreamAndTheCloseUploadsTheWholeFile() async throws {
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, streamChunkSize: 16 << 20))
        var content = bytes(20 * MiB, seed: 10)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "f", mode: 0o644, flags: O_RDWR)
        let inode = entry.attributes.inode
        for offset in stride(from: 0, to: content.count, by: MiB) {
            _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(offset), data: Data(content[offset..<(offset + MiB)]))
        }
        for _ in 0..<200 where h.store.requestCount(.streamingSend) < 1 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(h.store.requestCount(.streamingSend) == 1, "16 MiB were streamed")
        _ = try await h.fs.write(inode, handle: open.handle, offset: 10, data: Data("patched".utf8))
        content.replaceSubrange(10..<17, with: Data("patched".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.streamingFinish) == 0)
        #expect(h.store.requestCount(.put) == 1)
        #expect(try await h.download("f") == content)
    }

    // Checks semantics.md#write-when-uploaded
    @Test func openWithTruncateEmptiesTheFile() async throws {
        let h = try Harness()
        h.store.seed("f", bytes(3 * MiB, seed: 3))
        let inode = try await h.lookup("f").attributes.inode
        let open = try await h.fs.open(inode, flags: O_WRONLY | O_TRUNC)
        #expect(try await h.fs.getattr(inode).attributes.size == 0)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("new".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.read) == 0)
        #expect(try await h.download("f") == Data("new".utf8))
    }

    @Test func truncateShrinksAndGrowsWithZeros() async throws {
        let h = try Harness()
        let original = bytes(3 * MiB, seed: 4)
        h.store.seed("f", original)
        let inode = try await h.lookup("f").attributes.inode
        _ = try await h.fs.setattr(inode, handle: nil, changes: AttributeChanges(size: 1000))
        #expect(try await h.download("f") == original.prefix(1000))
        _ = try await h.fs.setattr(inode, handle: nil, changes: AttributeChanges(size: 1500))
        #expect(try await h.download("f") == original.prefix(1000) + Data(count: 500))
    }

    // Checks semantics.md#write-conflicts
    @Test func someoneElsesChangeMakesTheCloseStaleAndKeepsTheirObject() async throws {
        let cache = temporaryDirectory("writes")
        defer { removeDirectory(cache) }
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b"))
        h.store.seed("doc", Data("v1".utf8))
        let inode = try await h.lookup("doc").attributes.inode
        let open = try await h.fs.open(inode, flags: O_WRONLY | O_TRUNC)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("mine".utf8))
        h.store.seed("doc", Data("theirs".utf8))
        await expectErrno(ESTALE) { try await h.fs.flush(inode, handle: open.handle) }
        try await h.fs.release(inode, handle: open.handle)
        #expect(try await h.download("doc") == Data("theirs".utf8))
        let kept = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).path(for: "doc")
        #expect(FileManager.default.contents(atPath: kept) == Data("mine".utf8), "the rejected bytes are kept")
    }

    // Checks semantics.md#write-failures-keep-bytes
    @Test func aFailedUploadIsEIOAndTheBytesWaitInTheRecoveryFolder() async throws {
        let cache = temporaryDirectory("writes")
        defer { removeDirectory(cache) }
        // No second attempt at close, no background retry: the entry waits.
        let h = try Harness(options: MountOptions(
            uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b", uploadRetryWindow: 0, recoveryRetryInterval: 0))
        let dir = try await h.fs.mkdir(parent: InodeTable.root, name: "d", mode: 0o755).attributes.inode
        let (entry, open) = try await h.fs.create(parent: dir, name: "report.txt", mode: 0o644, flags: O_WRONLY)
        let content = bytes(300_000, seed: 5)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: content)
        h.store.failNext(1, with: .unavailable("endpoint gone"), operations: [.put])
        await expectErrno(EIO) { try await h.fs.flush(entry.attributes.inode, handle: open.handle) }
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        #expect(h.store.requestCount(.put) == 2, "mkdir's placeholder and the one failed upload; release does not retry")

        let recovery = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t"))
        let pending = recovery.pending()
        #expect(pending.map(\.entry.object) == ["d/report.txt"])
        #expect(pending.first?.path == cache + "/recovery/b/d/report.txt")
        #expect(FileManager.default.contents(atPath: cache + "/recovery/b/d/report.txt") == content)
        #expect(pending.first?.entry.ifGenerationMatch == 0)

        let (uploaded, failed) = await recovery.retryAll(store: h.store)
        #expect(uploaded.count == 1 && failed.isEmpty)
        #expect(try await h.download("d/report.txt") == content)
        #expect(recovery.pending().isEmpty)
    }

    // Checks semantics.md#write-failures-keep-bytes
    @Test func writesOfAProcessThatDiedReachTheRecoveryFolderAtTheNextMount() async throws {
        let cache = temporaryDirectory("writes")
        defer { removeDirectory(cache) }
        let options = MountOptions(uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b")
        let store = InMemoryObjectStore()
        store.seed("kept.txt", Data("old".utf8), customMetadata: ["k": "v"])
        let crashed = try Harness(options: options, store: store)
        let (entry, open) = try await crashed.fs.create(parent: InodeTable.root, name: "unsaved.bin", mode: 0o644, flags: O_WRONLY)
        let content = bytes(100_000, seed: 11)
        _ = try await crashed.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: content)
        // An object opened for writing but never written holds nothing to rescue.
        let kept = try await crashed.lookup("kept.txt").attributes.inode
        let keptOpen = try await crashed.fs.open(kept, flags: O_RDWR)
        #expect(try await crashed.fs.read(kept, handle: keptOpen.handle, offset: 0, size: 10) == Data("old".utf8))
        // No flush, no release: the process "dies" here. The next mount:
        _ = try Harness(options: options, store: store)
        let recovery = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t"))
        let pending = recovery.pending()
        #expect(pending.map(\.entry.object) == ["unsaved.bin"])
        #expect(pending.first.map { FileManager.default.contents(atPath: $0.path) } == content)
        #expect(pending.first?.entry.ifGenerationMatch == 0)
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache + "/staging").isEmpty)
        let (uploaded, _) = await recovery.retryAll(store: store)
        #expect(uploaded.count == 1)
        #expect(try await crashed.download("unsaved.bin") == content)
    }

    /// The leftover scan runs once per mount, when its recovery store is
    /// made: a file system given that store does not scan staging again
    /// (which would take this mount's own staged files for leftovers).
    @Test func theLeftoverScanRunsOncePerMount() async throws {
        let cache = temporaryDirectory("scan")
        defer { removeDirectory(cache) }
        let store = InMemoryObjectStore()
        let options = MountOptions(uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b")
        let staging = RecoveryFolder.stagingDirectory(cacheDirectory: cache)
        try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        // What a killed process left: bytes and their journal.
        try Data("unsaved".utf8).write(to: URL(fileURLWithPath: staging + "/7"))
        try RecoveryFolder.write(RecoveryFolder.Entry(
            bucket: "b", object: "left.txt", ifGenerationMatch: 0, properties: ObjectProperties(contentType: "text/plain"),
            metadata: [:], size: 7, savedAt: Date(), reason: "killed"), to: staging + "/7.json")

        let recovery = RecoveryStore(cacheDirectory: cache, store: store, options: options, logger: .init(label: "t"))
        #expect(recovery.folder.pending().map(\.entry.object) == ["left.txt"])
        // A file this mount stages before its file system exists (no
        // journal yet): a second scan would delete it.
        try Data("live".utf8).write(to: URL(fileURLWithPath: staging + "/8"))
        let fs = FileSystem(store: store, options: options, recovery: recovery)
        #expect(FileManager.default.fileExists(atPath: staging + "/8"), "the file system scanned staging a second time")
        #expect(fs.status().recovery.map(\.object) == ["left.txt"])
    }

    // Checks semantics.md#write-attributes
    @Test func chmodAndTouchOfACleanFileArePatchesNotUploads() async throws {
        let h = try Harness()
        h.store.seed("f", Data("x".utf8))
        let inode = try await h.lookup("f").attributes.inode
        h.store.resetCounters()
        let reply = try await h.fs.setattr(inode, handle: nil, changes: AttributeChanges(
            mode: 0o600, modificationTime: .at(Timestamp(seconds: 1_500_000_000))))
        #expect(reply.attributes.mode & 0o777 == 0o600)
        #expect(reply.attributes.modificationTime.seconds == 1_500_000_000)
        #expect(h.store.requestCount(.put) == 0)
        #expect(h.store.requestCount(.patch) == 1)
        let stored = try await h.store.stat("f")
        #expect(stored.customMetadata["goog-reserved-posix-mode"] == "600")
        #expect(stored.customMetadata["goog-reserved-file-mtime"] == "1500000000")
    }

    // Checks semantics.md#write-rename
    @Test func renameCopiesThenDeletesAndKeepsMetadata() async throws {
        let h = try Harness()
        h.store.seed("a", Data("content".utf8), contentType: "text/x-special", customMetadata: ["k": "v"])
        try await h.lookup("a")
        try await h.fs.rename(parent: InodeTable.root, name: "a", newParent: InodeTable.root, newName: "b", flags: [])
        #expect(h.store.objectNames == ["b"])
        let moved = try await h.store.stat("b")
        #expect(moved.contentType == "text/x-special")
        #expect(moved.customMetadata["k"] == "v")
        await expectErrno(EINVAL) {
            try await h.fs.rename(parent: InodeTable.root, name: "b", newParent: InodeTable.root, newName: "c", flags: .exchange)
        }
        h.store.seed("c", Data("other".utf8))
        await expectErrno(EEXIST) {
            try await h.fs.rename(parent: InodeTable.root, name: "b", newParent: InodeTable.root, newName: "c", flags: .noReplace)
        }
        #expect(try await h.download("c") == Data("other".utf8))
    }

    // Checks semantics.md#write-rename
    @Test func renameOfADirectoryMovesEveryObjectBelowIt() async throws {
        let h = try Harness()
        for i in 0..<30 { h.store.seed("src/sub\(i % 3)/f\(i)", Data("\(i)".utf8)) }
        h.store.seed("src/", Data())
        try await h.lookup("src")
        try await h.fs.rename(parent: InodeTable.root, name: "src", newParent: InodeTable.root, newName: "dst", flags: [])
        let names = h.store.objectNames
        #expect(names.count == 31)
        #expect(names.allSatisfy { $0.hasPrefix("dst/") })
        #expect(try await h.download("dst/sub1/f4") == Data("4".utf8))
    }

    // Checks semantics.md#write-directories, semantics.md#errno-enotempty
    @Test func mkdirRmdirAndNotEmpty() async throws {
        let h = try Harness()
        let d = try await h.fs.mkdir(parent: InodeTable.root, name: "d", mode: 0o700)
        #expect(d.attributes.mode & 0o777 == 0o700)
        #expect(h.store.objectNames == ["d/"])
        let (file, open) = try await h.fs.create(parent: d.attributes.inode, name: "f", mode: 0o644, flags: O_WRONLY)
        await expectErrno(ENOTEMPTY) { try await h.fs.rmdir(parent: InodeTable.root, name: "d") }
        try await h.fs.release(file.attributes.inode, handle: open.handle)
        await expectErrno(ENOTEMPTY) { try await h.fs.rmdir(parent: InodeTable.root, name: "d") }
        try await h.fs.unlink(parent: d.attributes.inode, name: "f")
        try await h.fs.rmdir(parent: InodeTable.root, name: "d")
        #expect(h.store.objectNames.isEmpty)
    }

    // Checks semantics.md#write-symlinks
    @Test func symlinksFollowTheGcsfuseConvention() async throws {
        let h = try Harness()
        let link = try await h.fs.symlink(target: "../somewhere/else", parent: InodeTable.root, name: "l")
        #expect(link.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFLNK))
        #expect(try await h.store.stat("l").customMetadata["gcsfuse_symlink_target"] == "../somewhere/else")
        #expect(try await h.fs.readlink(link.attributes.inode) == "../somewhere/else")
    }

    @Test func extendedAttributesOfAFileBeingWrittenRideAlongAndReadBack() async throws {
        let h = try Harness()
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "new.txt", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("hello".utf8))
        try await h.fs.setxattr(inode, name: "user.origin", value: Data("camera".utf8), flags: 0)
        // Not in the bucket yet, but the mount shows what it will be.
        #expect(try await h.fs.getxattr(inode, name: "user.origin") == Data("camera".utf8))
        #expect(try await h.fs.listxattr(inode) == ["user.origin"])
        #expect(try await h.fs.getxattr(inode, name: "gcs.size") == Data("5".utf8))
        #expect(h.store.requestCount(.put) == 0 && h.store.requestCount(.patch) == 0)
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.put) == 1 && h.store.requestCount(.patch) == 0, "one upload carried the attribute")
        #expect(try await h.store.stat("new.txt").customMetadata["origin"] == "camera")
    }

    @Test func symbolicLinksCarryExtendedAttributesToo() async throws {
        let h = try Harness()
        let link = try await h.fs.symlink(target: "elsewhere", parent: InodeTable.root, name: "l").attributes.inode
        try await h.fs.setxattr(link, name: "user.k", value: Data("v".utf8), flags: 0)
        #expect(try await h.fs.getxattr(link, name: "user.k") == Data("v".utf8))
        #expect(try await h.fs.getxattr(link, name: "gcs.name") == Data("l".utf8))
        #expect(try await h.store.stat("l").customMetadata["k"] == "v")
        #expect(try await h.fs.readlink(link) == "elsewhere", "the link target is kept")
    }

    // Checks semantics.md#write-read-only, semantics.md#errno-erofs
    @Test func aReadOnlyMountRefusesEveryChange() async throws {
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, readOnly: true))
        h.store.seed("f", Data("x".utf8))
        let f = try await h.lookup("f").attributes.inode
        await expectErrno(EROFS) { _ = try await h.fs.create(parent: InodeTable.root, name: "n", mode: 0o644, flags: O_WRONLY) }
        await expectErrno(EROFS) { _ = try await h.fs.mkdir(parent: InodeTable.root, name: "d", mode: 0o755) }
        await expectErrno(EROFS) { try await h.fs.unlink(parent: InodeTable.root, name: "f") }
        await expectErrno(EROFS) { _ = try await h.fs.setattr(f, handle: nil, changes: AttributeChanges(mode: 0o600)) }
        await expectErrno(EROFS) {
            try await h.fs.rename(parent: InodeTable.root, name: "f", newParent: InodeTable.root, newName: "g", flags: [])
        }
        await expectErrno(EROFS) { _ = try await h.fs.symlink(target: "f", parent: InodeTable.root, name: "l") }
        #expect(h.store.objectNames == ["f"])
    }
}

extension Harness {
    /// The object's bytes, read through the store (not the filesystem).
    func download(_ name: String) async throws -> Data {
        let info = try await store.stat(name)
        let collected = Mutex(Data())
        _ = try await store.read(name, generation: info.generation, range: 0..<max(info.size, 1)) { chunk in
            collected.withLock { $0.append(contentsOf: chunk) }
        }
        return collected.withLock { $0 }
    }
}
