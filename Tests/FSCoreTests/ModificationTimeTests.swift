import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting
#if canImport(Glibc)
import Glibc
#endif

// Checks semantics.md#shows-attributes and semantics.md#mtime-stored
/// A written file's mtime is its object's `updated`; the upload stores
/// `goog-reserved-file-mtime` only for a time set after the last write;
/// a metadata change or a rename keeps the mtime a file showed.
@Suite("mtime: `updated` for written files, the key only when set, kept by metadata changes and renames")
struct ModificationTimeTests {
    let mtimeKey = AttributeMapper.mtimeKey

    /// The store's clock, moved by hand, so that requests are seconds apart
    /// and a moved `updated` shows in whole seconds.
    final class StoreClock: Sendable {
        private let date = Mutex(Date(timeIntervalSince1970: 1_700_000_000.25))
        func advance(_ seconds: TimeInterval) { date.withLock { $0 += seconds } }
        var now: @Sendable () -> Date { { [self] in date.withLock { $0 } } }
    }

    let clock = StoreClock()
    let h: Harness

    init() throws {
        h = try Harness(store: InMemoryObjectStore(now: clock.now))
    }

    func mtime(_ path: String) async throws -> Timestamp {
        try await h.lookup(path).attributes.modificationTime
    }

    /// Creates `name` and writes `content` through one handle; `between`
    /// runs before the close with the inode and handle.
    func write(_ name: String, _ content: String, between: (UInt64, UInt64) async throws -> Void = { _, _ in }) async throws -> UInt64 {
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data(content.utf8))
        try await between(inode, open.handle)
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        return inode
    }

    @Test func aWrittenFileStoresNoKeyAndShowsItsObjectsUpdated() async throws {
        let inode = try await write("new.txt", "hello")
        let stored = try await h.store.stat("new.txt")
        #expect(stored.customMetadata[mtimeKey] == nil)
        #expect(try await h.fs.getattr(inode).attributes.modificationTime == Timestamp(stored.updated))
    }

    @Test func rewritingAFileWhoseTimeWasSetDropsTheKey() async throws {
        h.store.seed("old.txt", Data("old".utf8), customMetadata: [mtimeKey: "1500000000", "keep": "k"])
        let inode = try await h.lookup("old.txt").attributes.inode
        #expect(try await mtime("old.txt") == Timestamp(seconds: 1_500_000_000))
        let open = try await h.fs.open(inode, flags: O_WRONLY)
        clock.advance(100)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("new".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        let stored = try await h.store.stat("old.txt")
        #expect(stored.customMetadata == ["keep": "k"], "the other keys stay")
        #expect(try await h.fs.getattr(inode).attributes.modificationTime == Timestamp(stored.updated))
    }

    @Test func aTimeSetAfterTheLastWriteIsStored() async throws {
        let set = Timestamp(seconds: 1_600_000_000)
        let inode = try await write("kept.dat", "bytes") { inode, handle in
            // cp -p: futimens on the open descriptor, before the close.
            _ = try await h.fs.setattr(inode, handle: handle, changes: AttributeChanges(modificationTime: .at(set)))
        }
        #expect(try await h.store.stat("kept.dat").customMetadata[mtimeKey] == "1600000000")
        #expect(h.store.requestCount(.patch) == 0, "the time rode along with the upload")
        #expect(try await h.fs.getattr(inode).attributes.modificationTime == set)
    }

    @Test func aWriteAfterTheTimeWasSetTakesItsPlace() async throws {
        let inode = try await write("later.dat", "bytes") { inode, handle in
            _ = try await h.fs.setattr(inode, handle: handle, changes: AttributeChanges(modificationTime: .at(Timestamp(seconds: 1_600_000_000))))
            _ = try await h.fs.write(inode, handle: handle, offset: 5, data: Data(" more".utf8))
        }
        let stored = try await h.store.stat("later.dat")
        #expect(stored.customMetadata[mtimeKey] == nil)
        #expect(try await h.fs.getattr(inode).attributes.modificationTime == Timestamp(stored.updated))
    }

    @Test func chmodAndSetxattrKeepTheMtimeTheyFound() async throws {
        let seeded = h.store.seed("f", Data("x".utf8))
        let inode = try await h.lookup("f").attributes.inode
        clock.advance(100)
        _ = try await h.fs.setattr(inode, handle: nil, changes: AttributeChanges(mode: 0o600))
        let pinned = String(Timestamp(seeded.updated).seconds)
        #expect(try await h.store.stat("f").customMetadata == [AttributeMapper.modeKey: "600", mtimeKey: pinned])
        clock.advance(100)
        try await h.fs.setxattr(inode, name: "user.colour", value: Data("blue".utf8), flags: 0)
        #expect(try await h.store.stat("f").customMetadata[mtimeKey] == pinned, "a key already there is left alone")
        #expect(try await h.fs.getattr(inode).attributes.modificationTime == Timestamp(seconds: Timestamp(seeded.updated).seconds))
        #expect(try await h.fs.getattr(inode).attributes.changeTime == Timestamp(try await h.store.stat("f").updated), "ctime moves")
    }

    @Test func touchStoresTheTimeItIsGiven() async throws {
        h.store.seed("t", Data("x".utf8))
        let inode = try await h.lookup("t").attributes.inode
        _ = try await h.fs.setattr(inode, handle: nil, changes: AttributeChanges(modificationTime: .at(Timestamp(seconds: 1_234_567_890))))
        #expect(try await h.store.stat("t").customMetadata == [mtimeKey: "1234567890"])
    }

    @Test func aRenameKeepsTheMtimeOfAFileWithoutTheKey() async throws {
        let seeded = h.store.seed("a", Data("x".utf8))
        h.store.seed("k", Data("y".utf8), customMetadata: [mtimeKey: "1500000000"])
        _ = try await h.lookup("a")
        _ = try await h.lookup("k")
        clock.advance(100)
        h.store.resetCounters()
        try await h.fs.rename(parent: InodeTable.root, name: "a", newParent: InodeTable.root, newName: "b", flags: [])
        #expect(h.store.requestCount(.patch) == 1, "the copy is a new object: its mtime is pinned")
        #expect(try await h.store.stat("b").customMetadata == [mtimeKey: String(Timestamp(seeded.updated).seconds)])
        #expect(try await mtime("b") == Timestamp(seconds: Timestamp(seeded.updated).seconds))

        h.store.resetCounters()
        try await h.fs.rename(parent: InodeTable.root, name: "k", newParent: InodeTable.root, newName: "m", flags: [])
        #expect(h.store.requestCount(.patch) == 0, "a copy carries the key")
        #expect(try await mtime("m") == Timestamp(seconds: 1_500_000_000))
    }

    @Test func aDirectoryRenameKeepsEveryMtime() async throws {
        let plain = h.store.seed("d/plain", Data("x".utf8))
        h.store.seed("d/set", Data("y".utf8), customMetadata: [mtimeKey: "1500000000"])
        _ = try await h.lookup("d")
        clock.advance(100)
        h.store.resetCounters()
        try await h.fs.rename(parent: InodeTable.root, name: "d", newParent: InodeTable.root, newName: "e", flags: [])
        #expect(h.store.requestCount(.patch) == 1)
        #expect(try await h.store.stat("e/plain").customMetadata[mtimeKey] == String(Timestamp(plain.updated).seconds))
        #expect(try await h.store.stat("e/set").customMetadata[mtimeKey] == "1500000000")
    }

    @Test func aFailedPinLeavesTheRenameDone() async throws {
        h.store.seed("a", Data("x".utf8))
        _ = try await h.lookup("a")
        h.store.failNext(1, with: .unavailable("down"), operations: [.patch])
        try await h.fs.rename(parent: InodeTable.root, name: "a", newParent: InodeTable.root, newName: "b", flags: [])
        #expect(h.store.data(of: "b") == Data("x".utf8))
        #expect(h.store.objectNames == ["b"])
    }
}
