import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

/// The core over a store like Firebase's v0 API: listings that name items
/// only, no server-side copy, Security Rules per path (`users/{uid}/**`
/// for that user, `public/**` readable, everything else refused).
@Suite("Firebase-like store")
struct FirebaseStoreTests {
    static let uid = "userA"

    /// The rules, as the in-memory store's fault hook: a refused call is
    /// `permissionDenied`, as a 403 from Firebase is.
    static func rules(_ operation: InMemoryObjectStore.Operation, _ name: String) -> StoreError? {
        let path = operation == .list && name.hasSuffix("/") ? String(name.dropLast()) : name
        let segments = path.split(separator: "/", omittingEmptySubsequences: false)
        if segments.first == "users", segments.count >= 2, !segments[1].isEmpty {
            return segments[1] == uid ? nil : .permissionDenied("Permission denied.")
        }
        if segments.first == "public" { return nil }
        return .permissionDenied("Permission denied.")
    }

    static func harness(cache: String? = nil, renameCopyLimit: Int64 = 64 << 20) throws -> Harness {
        let store = InMemoryObjectStore(capabilities: .firebase)
        return try Harness(
            options: MountOptions(uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b", renameCopyLimit: renameCopyLimit),
            store: store)
    }

    @Test func aListingWithoutMetadataIsCompletedByParallelStats() async throws {
        let inner = InMemoryObjectStore(capabilities: .firebase)
        let store = SlowStatStore(inner: inner, delay: .milliseconds(5))
        for i in 0..<200 { inner.seed("d/f\(String(format: "%03d", i))", bytes(i, seed: i)) }
        let fs = FileSystem(store: store, options: MountOptions(uid: 1000, gid: 1000), clock: ManualClock())
        inner.resetCounters()
        let d = try await fs.lookup(parent: InodeTable.root, name: "d")
        #expect(inner.requestCount(.list) == 1, "the lookup's probe reads the listing's first page")
        inner.resetCounters()
        let handle = try await fs.opendir(d.attributes.inode)
        let entries = try await fs.readdir(d.attributes.inode, handle: handle, offset: 0)
        fs.releasedir(d.attributes.inode, handle: handle)
        #expect(entries.count == 202)
        #expect(entries.dropFirst(2).enumerated().allSatisfy { $0.element.entry.attributes.size == UInt64($0.offset) })
        // opendir goes on from the probe's page (all 200 names): no second
        // listing, only the stats that complete its names-only entries.
        #expect(inner.requestCount(.list) == 0 && inner.requestCount(.stat) == 200)
        let widest = store.widest
        #expect(widest > 1 && widest <= MountOptions().listingStatWidth, "stats run side by side, bounded: \(widest)")

        // Within the TTL the listing is reused: no more stats.
        inner.resetCounters()
        let again = try await fs.opendir(d.attributes.inode)
        fs.releasedir(d.attributes.inode, handle: again)
        #expect(inner.totalRequests == 0)
    }

    @Test func itemsGoneOrUnreadableBeforeTheirStatAreLeftOut() async throws {
        let h = try Self.harness()
        for name in ["a", "b", "c"] { h.store.seed("d/\(name)", bytes(3)) }
        let d = try await h.lookup("d")
        h.store.setFaultHook { operation, name in
            operation == .stat && name == "d/b" ? .notFound(name) : operation == .stat && name == "d/c" ? .permissionDenied("no") : nil
        }
        let names = try await h.list(d.attributes.inode).map(\.name)
        #expect(names == [".", "..", "a"])
        h.store.setFaultHook { operation, name in operation == .stat && name == "d/a" ? .unavailable("down") : nil }
        h.clock.advance(by: .seconds(61))
        await expectErrno(EIO) { _ = try await h.list(d.attributes.inode) }
    }

    @Test func renameCopiesSmallFilesAndIsEXDEVForLargeOnesAndDirectories() async throws {
        let h = try Self.harness(renameCopyLimit: 1000)
        h.store.seed("small", bytes(1000, seed: 1))
        h.store.seed("large", bytes(1001, seed: 2))
        h.store.seed("dir/inner", bytes(10))
        try await h.fs.rename(parent: InodeTable.root, name: "small", newParent: InodeTable.root, newName: "moved", flags: [])
        #expect(try await h.download("moved") == bytes(1000, seed: 1))
        #expect(h.store.objectNames.contains("small") == false)
        await expectErrno(EXDEV) {
            try await h.fs.rename(parent: InodeTable.root, name: "large", newParent: InodeTable.root, newName: "big", flags: [])
        }
        await expectErrno(EXDEV) {
            try await h.fs.rename(parent: InodeTable.root, name: "dir", newParent: InodeTable.root, newName: "dir2", flags: [])
        }
        #expect(h.store.objectNames == ["dir/inner", "large", "moved"], "nothing moved or lost")
    }

    // Checks semantics.md#errno-eacces
    @Test func rulesRefusalsAreEACCESAndTheTopOfTheMountCanBeEntered() async throws {
        let h = try Self.harness()
        h.store.seed("users/\(Self.uid)/mine.txt", Data("mine".utf8))
        h.store.seed("users/userB/theirs.txt", Data("theirs".utf8))
        h.store.seed("public/notice.txt", Data("all".utf8))
        h.store.setFaultHook(Self.rules)
        // The root cannot be listed, but `users` (refused) can be entered.
        await expectErrno(EACCES) { _ = try await h.list(InodeTable.root) }
        let users = try await h.lookup("users")
        #expect(users.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFDIR))
        await expectErrno(EACCES) { _ = try await h.list(users.attributes.inode) }
        // B's folder: EACCES, whatever is asked.
        await expectErrno(EACCES) { try await h.lookup("users/userB") }
        // A's folder and public/ work.
        let mine = try await h.lookup("users/\(Self.uid)/mine.txt")
        #expect(try await h.readAll(mine.attributes.inode) == Data("mine".utf8))
        let a = try await h.lookup("users/\(Self.uid)")
        #expect(try await h.list(a.attributes.inode).map(\.name) == [".", "..", "mine.txt"])
        let notice = try await h.lookup("public/notice.txt")
        #expect(try await h.readAll(notice.attributes.inode) == Data("all".utf8))
        #expect(h.store.objectNames.count == 3, "nothing written")
    }

    @Test func aWriteRefusedAtCloseIsEACCESAndTheBytesWaitInTheRecoveryFolder() async throws {
        let cache = temporaryDirectory("firebase")
        defer { removeDirectory(cache) }
        let h = try Self.harness(cache: cache)
        h.store.seed("users/\(Self.uid)/keep.txt", Data("k".utf8))
        h.store.setFaultHook { operation, name in
            operation == .put && name.hasSuffix("refused.txt") ? .permissionDenied("Permission denied. No WRITE permission.") : Self.rules(operation, name)
        }
        let folder = try await h.lookup("users/\(Self.uid)").attributes.inode
        let (entry, open) = try await h.fs.create(parent: folder, name: "refused.txt", mode: 0o644, flags: O_WRONLY)
        let content = bytes(50_000, seed: 9)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: content)
        await expectErrno(EACCES) { try await h.fs.flush(entry.attributes.inode, handle: open.handle) }
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        let kept = RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).path(for: "users/\(Self.uid)/refused.txt")
        #expect(FileManager.default.contents(atPath: kept) == content, "the refused bytes are kept")
        #expect(!h.store.objectNames.contains("users/\(Self.uid)/refused.txt"))
    }

    @Test func aJSONStoreRefusalAtTheTopIsStillEACCES() async throws {
        let h = try Harness()
        h.store.seed("users/x/f", Data())
        h.store.setFaultHook(Self.rules)
        await expectErrno(EACCES) { try await h.lookup("users") }
    }
}

/// An `ObjectStore` whose stats take `delay` and which records how many
/// ran at once; everything else goes straight to `inner`.
final class SlowStatStore: ForwardingStore {
    let inner: InMemoryObjectStore
    let delay: Duration
    private let counts = Mutex((current: 0, widest: 0))

    init(inner: InMemoryObjectStore, delay: Duration) {
        self.inner = inner
        self.delay = delay
    }

    var widest: Int { counts.withLock { $0.widest } }
    var capabilities: StoreCapabilities { inner.capabilities }

    func stat(_ name: String) async throws(StoreError) -> ObjectInfo {
        counts.withLock { $0.current += 1; $0.widest = max($0.widest, $0.current) }
        defer { counts.withLock { $0.current -= 1 } }
        try? await Task.sleep(for: delay)
        return try await inner.stat(name)
    }
}
