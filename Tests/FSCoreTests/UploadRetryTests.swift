import Foundation
import Synchronization
import Testing
@testable import FSCore
import StorageKit

/// Uploads through an unreliable store (issue 12): the close keeps trying
/// for `uploadRetryWindow`, then the bytes wait in the recovery folder and
/// are uploaded in the background while mounted, never over newer objects.
@Suite struct UploadRetryTests {
    /// A mount on `cache` whose close retries for `window` seconds and whose
    /// background retries run every `interval` seconds (0: none).
    static func options(_ cache: String, window: TimeInterval, interval: TimeInterval = 0) -> MountOptions {
        MountOptions(
            uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b", uploadRetryWindow: window,
            recoveryRetryInterval: interval, recoveryRetryMaxInterval: interval)
    }

    func options(_ cache: String, window: TimeInterval, interval: TimeInterval = 0) -> MountOptions {
        Self.options(cache, window: window, interval: interval)
    }

    /// Creates `name` in the root with `content`; returns its inode and handle.
    func write(_ h: Harness, _ name: String, _ content: Data) async throws -> (UInt64, UInt64) {
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: content)
        return (entry.attributes.inode, open.handle)
    }

    /// Polls `condition` for up to `seconds`.
    func eventually(_ seconds: Double, _ condition: () async throws -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < deadline {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await condition()
    }

    // Checks semantics.md#net-close-retries
    @Test func theCloseRetriesATransientFailureWithinItsWindow() async throws {
        let cache = temporaryDirectory("retry")
        defer { removeDirectory(cache) }
        let h = try Harness(options: options(cache, window: 30))
        let content = bytes(50_000, seed: 1)
        let (inode, handle) = try await write(h, "report.txt", content)
        h.store.failNext(2, with: .unavailable("503 after the transport's retries"), operations: [.put])
        try await h.fs.flush(inode, handle: handle)
        try await h.fs.release(inode, handle: handle)
        #expect(h.store.requestCount(.put) == 3, "two failed attempts, then the upload")
        #expect(try await h.download("report.txt") == content)
        #expect(RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending().isEmpty)
    }

    // Checks semantics.md#net-close-retries
    @Test func aPermanentFailureIsNotRetriedAtClose() async throws {
        let cache = temporaryDirectory("retry")
        defer { removeDirectory(cache) }
        let h = try Harness(options: options(cache, window: 30))
        let (inode, handle) = try await write(h, "denied.txt", bytes(10, seed: 2))
        h.store.failNext(1, with: .permissionDenied("403"), operations: [.put])
        await expectErrno(EACCES) { try await h.fs.flush(inode, handle: handle) }
        try await h.fs.release(inode, handle: handle)
        #expect(h.store.requestCount(.put) == 1)
        // Kept, and marked as not retried in the background: what
        // `bucketfs status` shows must match what the mount does.
        let kept = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending()
        #expect(kept.map(\.entry.object) == ["denied.txt"])
        #expect(kept.first?.entry.retryStopped?.contains("not a transient failure") == true, "\(kept.map(\.entry))")
        #expect(h.fs.status().recovery.first?.retryStopped != nil)
    }

    // Checks semantics.md#net-background-retries
    @Test func pastTheWindowTheBytesWaitAndAreUploadedInTheBackground() async throws {
        let cache = temporaryDirectory("retry")
        defer { removeDirectory(cache) }
        let h = try Harness(options: options(cache, window: 1.2, interval: 0.1))
        let down = Atomic<Bool>(true)
        h.store.setFaultHook { operation, _ in
            operation == .put && down.load(ordering: .relaxed) ? .unavailable("endpoint unreachable") : nil
        }
        let content = bytes(80_000, seed: 3)
        let (inode, handle) = try await write(h, "late.bin", content)
        let started = ContinuousClock.now
        await expectErrno(EIO) { try await h.fs.flush(inode, handle: handle) }
        #expect(ContinuousClock.now - started >= .milliseconds(500), "the close tried again within its window")
        try await h.fs.release(inode, handle: handle)
        let recovery = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t"))
        #expect(recovery.pending().map(\.entry.object) == ["late.bin"])
        #expect(h.fs.retrier?.retrying == ["late.bin"])

        // Still down: the entry stays (and is tried again).
        try await Task.sleep(for: .milliseconds(300))
        #expect(recovery.pending().count == 1)
        down.store(false, ordering: .relaxed)
        #expect(try await eventually(5) { recovery.pending().isEmpty }, "the entry should be uploaded once the store is back")
        #expect(try await h.download("late.bin") == content)
        #expect(h.fs.retrier?.retrying.isEmpty == true)
        // The mount shows the uploaded object.
        #expect(try await h.lookup("late.bin").attributes.size == Int64(content.count))
    }

    // Checks semantics.md#net-background-retries
    @Test func theBackgroundRetryNeverOverwritesANewerObject() async throws {
        let cache = temporaryDirectory("retry")
        defer { removeDirectory(cache) }
        let h = try Harness(options: options(cache, window: 0, interval: 0.05))
        h.store.seed("doc.txt", Data("v1".utf8))
        let inode = try await h.lookup("doc.txt").attributes.inode
        let open = try await h.fs.open(inode, flags: O_WRONLY | O_TRUNC)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("mine".utf8))
        h.store.failNext(1, with: .unavailable("down"), operations: [.put])
        await expectErrno(EIO) { try await h.fs.flush(inode, handle: open.handle) }
        try await h.fs.release(inode, handle: open.handle)
        // Someone else writes a newer version before the retry.
        h.store.seed("doc.txt", Data("theirs".utf8))

        let recovery = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t"))
        #expect(try await eventually(5) { recovery.pending().first?.entry.retryStopped != nil }, "retries should stop at the failed precondition")
        #expect(try await h.download("doc.txt") == Data("theirs".utf8))
        #expect(FileManager.default.contents(atPath: recovery.path(for: "doc.txt")) == Data("mine".utf8), "the bytes stay")
        #expect(h.fs.retrier?.retrying.isEmpty == true)
    }

    // Checks semantics.md#net-background-retries
    @Test func anEntryIsNotRetriedWhileTheMountWritesTheSameFile() async throws {
        let cache = temporaryDirectory("retry")
        defer { removeDirectory(cache) }
        let h = try Harness(options: options(cache, window: 0, interval: 0.05))
        let (inode, handle) = try await write(h, "busy.txt", Data("first".utf8))
        h.store.failNext(1, with: .unavailable("down"), operations: [.put])
        await expectErrno(EIO) { try await h.fs.flush(inode, handle: handle) }
        // Written again, still open: its own upload will carry the newer bytes.
        _ = try await h.fs.write(inode, handle: handle, offset: 0, data: Data("second".utf8))
        try await Task.sleep(for: .milliseconds(300))
        #expect(h.store.requestCount(.put) == 1, "no background upload of the older bytes while the file is written")
        try await h.fs.flush(inode, handle: handle)
        try await h.fs.release(inode, handle: handle)
        #expect(try await h.download("busy.txt") == Data("second".utf8))
        let recovery = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t"))
        #expect(try await eventually(2) { recovery.pending().isEmpty }, "the newer upload removes the older entry")
    }

    // Checks semantics.md#net-request-retries
    @Test func unlinkWithoutACachedGenerationStatsFirstAndAGoneObjectIsNotAnError() async throws {
        var options = MountOptions(uid: 1000, gid: 1000)
        options.statTTL = 0
        let h = try Harness(options: options)
        h.store.seed("a.txt", Data("a".utf8))
        h.store.seed("b.txt", Data("b".utf8))
        _ = try await h.lookup("a.txt")
        let deletes = h.store.requestCount(.delete)
        try await h.fs.unlink(parent: InodeTable.root, name: "a.txt")
        #expect(h.store.requestCount(.delete) == deletes + 1)
        #expect(try await h.store.list(prefix: "", pageToken: nil, maxResults: 10).items.map(\.name) == ["b.txt"])
        // Deleted behind the mount's back (or by an attempt whose answer was lost).
        _ = try await h.lookup("b.txt")
        try await h.store.delete("b.txt", ifGenerationMatch: nil)
        try await h.fs.unlink(parent: InodeTable.root, name: "b.txt")
    }
}

/// Recovery entries keep every standard property of the upload they stand
/// for, so a retried upload gives the object what the writer set.
@Suite struct RecoveryPropertiesTests {
    static let every = ObjectProperties(
        contentType: "text/markdown", cacheControl: "no-store", contentDisposition: "attachment; filename=\"r.md\"",
        contentEncoding: "identity", contentLanguage: "de")

    @Test func aBackgroundRetryUploadsEveryStandardProperty() async throws {
        let cache = temporaryDirectory("props")
        defer { removeDirectory(cache) }
        let h = try Harness(options: UploadRetryTests.options(cache, window: 0.3, interval: 0.1))
        let down = Atomic<Bool>(true)
        h.store.setFaultHook { operation, _ in
            operation == .put && down.load(ordering: .relaxed) ? .unavailable("endpoint unreachable") : nil
        }
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "r.md", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("# notes\n".utf8))
        for property in StandardProperty.allCases {
            let value = try #require(Self.every[property])
            try await h.fs.setxattr(inode, name: "gcs.\(property.rawValue)", value: Data(value.utf8), flags: 0)
        }
        await expectErrno(EIO) { try await h.fs.flush(inode, handle: open.handle) }
        try await h.fs.release(inode, handle: open.handle)
        let recovery = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t"))
        #expect(recovery.pending().map(\.entry.properties) == [Self.every])

        down.store(false, ordering: .relaxed)
        let deadline = ContinuousClock.now + .seconds(5)
        while !recovery.pending().isEmpty && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(recovery.pending().isEmpty, "the entry should be uploaded once the store is back")
        let uploaded = try await h.store.stat("r.md")
        #expect(uploaded.properties == Self.every)
    }

    /// A sidecar written before entries kept every property (contentType
    /// only) still reads, and a new one keeps all five.
    @Test func sidecarsOfTheOldFormatStillRead() throws {
        let directory = temporaryDirectory("sidecar")
        defer { removeDirectory(directory) }
        let old = #"""
            {"bucket":"b","contentType":"text/plain","ifGenerationMatch":0,"metadata":{"k":"v"},
             "object":"a.txt","reason":"503","savedAt":"2026-01-02T03:04:05Z","size":3}
            """#
        try old.write(toFile: directory + "/old", atomically: true, encoding: .utf8)
        let entry = try #require(RecoveryFolder.read(directory + "/old"))
        #expect(entry.properties == ObjectProperties(contentType: "text/plain"))
        #expect(entry.object == "a.txt" && entry.metadata == ["k": "v"] && entry.ifGenerationMatch == 0 && entry.size == 3)

        var full = entry
        full.properties = Self.every
        try RecoveryFolder.write(full, to: directory + "/new")
        #expect(RecoveryFolder.read(directory + "/new") == full)
        let text = try String(contentsOfFile: directory + "/new", encoding: .utf8)
        #expect(text.contains(#""cacheControl" : "no-store""#), "flat fields, as the old format had contentType: \(text)")
    }
}
