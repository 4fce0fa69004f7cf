import Foundation
import Testing
@testable import FSCore

@Suite("readdir")
struct ReaddirTests {
    // Checks semantics.md#shows-caching
    @Test func twoThousandObjectsCostTwoListRequestsWithTheLookupAndLookupsAreFree() async throws {
        let h = try Harness()
        let names = (0..<2000).map { String(format: "file%05d", $0) }
        for (i, name) in names.enumerated() { h.store.seed("big/" + name, bytes(i % 7)) }
        let big = try await h.lookup("big")
        h.store.resetCounters()

        // Keep the handle open while looking up, as `ls -l` does: the
        // entries stay pinned, so lookups return the same inodes.
        let handle = try await h.fs.opendir(big.attributes.inode)
        var entries: [DirectoryEntry] = []
        while true {
            let batch = try await h.fs.readdir(big.attributes.inode, handle: handle, offset: entries.last?.nextOffset ?? 0)
            if batch.isEmpty { break }
            entries += batch
        }
        // The lookup's probe read the first page (1,000 entries); opendir
        // goes on from the second.
        #expect(h.store.requestCount(.list) == 1)
        #expect(h.store.totalRequests == 1, "no per-object request")
        #expect(entries.count == 2002)
        #expect(entries.map(\.name) == [".", ".."] + names)
        #expect(entries.enumerated().allSatisfy { $0.element.nextOffset == Int64($0.offset + 1) })
        #expect(entries[2].entry.attributes.size == 0 && entries[3].entry.attributes.size == 1)
        #expect(Set(entries.dropFirst(2).map(\.entry.attributes.inode)).count == 2000)

        for (i, name) in names.enumerated() {
            let reply = try await h.fs.lookup(parent: big.attributes.inode, name: name)
            #expect(reply.attributes.inode == entries[i + 2].entry.attributes.inode)
        }
        #expect(h.store.totalRequests == 1, "ls -l after readdir: answered from the listing")
        h.fs.releasedir(big.attributes.inode, handle: handle)

        h.clock.advance(by: .seconds(61))
        _ = try await h.fs.lookup(parent: big.attributes.inode, name: names[0])
        #expect(h.store.totalRequests == 4, "after the TTL, a lookup asks again")
    }

    @Test func aSecondListingWithinTheTTLAsksNothingAndOneAfterItDoes() async throws {
        let h = try Harness()
        for i in 0..<30 { h.store.seed("d/f\(i)", bytes(1)) }
        let d = try await h.lookup("d")
        h.store.resetCounters()
        func list() async throws -> Int {
            let handle = try await h.fs.opendir(d.attributes.inode)
            defer { h.fs.releasedir(d.attributes.inode, handle: handle) }
            return try await h.fs.readdir(d.attributes.inode, handle: handle, offset: 0).count
        }
        #expect(try await list() == 32)
        #expect(try await list() == 32)
        #expect(h.store.requestCount(.list) == 0, "the lookup's probe read the whole listing; ls -l reuses it")
        h.store.seed("d/new", bytes(1))
        h.clock.advance(by: .seconds(61))
        #expect(try await list() == 33, "after the TTL the listing is read again")
        #expect(h.store.requestCount(.list) == 1)
    }

    @Test func dotEntriesComeFirstAndOffsetsAreStable() async throws {
        let h = try Harness()
        h.store.seed("d/b")
        h.store.seed("d/a")
        h.store.seed("d/sub/x")
        let d = try await h.lookup("d")
        let handle = try await h.fs.opendir(d.attributes.inode)
        let all = try await h.fs.readdir(d.attributes.inode, handle: handle, offset: 0)
        #expect(all.map(\.name) == [".", "..", "a", "b", "sub"])
        #expect(all[0].nextOffset == 1 && all[1].nextOffset == 2)
        #expect(all[0].entry.attributes.inode == d.attributes.inode && all[1].entry.attributes.inode == InodeTable.root)
        #expect(all[4].entry.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFDIR))

        h.store.seed("d/aa")  // the bucket changes; the open handle does not
        let rest = try await h.fs.readdir(d.attributes.inode, handle: handle, offset: 3)
        #expect(rest.map(\.name) == ["b", "sub"])
        #expect(try await h.fs.readdir(d.attributes.inode, handle: handle, offset: 5).isEmpty)
        h.fs.releasedir(d.attributes.inode, handle: handle)
        await expectErrno(EBADF) { _ = try await h.fs.readdir(d.attributes.inode, handle: handle, offset: 0) }
        h.clock.advance(by: .seconds(61))
        #expect(try await h.list(d.attributes.inode).map(\.name) == [".", "..", "a", "aa", "b", "sub"])
    }

    @Test func largeDirectoriesComeInBatches() async throws {
        let h = try Harness()
        for i in 0..<1200 { h.store.seed("many/\(i)") }
        let many = try await h.lookup("many")
        let handle = try await h.fs.opendir(many.attributes.inode)
        let first = try await h.fs.readdir(many.attributes.inode, handle: handle, offset: 0)
        #expect(first.count == FileSystem.readdirBatch)
        #expect(try await h.list(many.attributes.inode).count == 1202)
        h.fs.releasedir(many.attributes.inode, handle: handle)
    }

    @Test func readdirOfAFileIsENOTDIR() async throws {
        let h = try Harness()
        h.store.seed("f")
        let f = try await h.lookup("f")
        await expectErrno(ENOTDIR) { _ = try await h.fs.opendir(f.attributes.inode) }
    }

    @Test func listingFillsTheCacheWithoutLosingPlaceholderMetadata() async throws {
        let h = try Harness()
        h.store.seed("p/", customMetadata: ["goog-reserved-file-mtime": "1234567890"])
        h.store.seed("p/child")
        let p = try await h.lookup("p")
        #expect(p.attributes.modificationTime.seconds == 1_234_567_890)
        let root = try await h.list(InodeTable.root)
        #expect(root.first { $0.name == "p" }?.entry.attributes.modificationTime.seconds == 1_234_567_890)
    }
}
