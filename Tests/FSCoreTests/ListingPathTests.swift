import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

/// What tree walks, the kernel's directory cache, listing lookups and the
/// flush of a shell's duplicated descriptor cost, counted in requests.
@Suite("walks, directory caching, flushes")
struct ListingPathTests {
    /// tree/dA/eB/fC for A, B, C < n.
    private func seedTree(_ store: InMemoryObjectStore, _ n: Int) -> Set<String> {
        var names: Set<String> = []
        for a in 0..<n { for b in 0..<n { for c in 0..<n {
            let name = "tree/d\(a)/e\(b)/f\(c)"
            store.seed(name, bytes(1))
            names.insert(name)
        } } }
        return names
    }

    /// Walks like find: every directory opened, read whole, its
    /// subdirectories visited in order; returns the files seen.
    private func find(_ h: Harness, _ inode: UInt64, _ path: String) async throws -> Set<String> {
        var files: Set<String> = []
        for entry in try await h.list(inode).dropFirst(2) {
            let child = path + "/" + entry.name
            if entry.entry.attributes.mode & UInt32(S_IFMT) == UInt32(S_IFDIR) {
                let looked = try await h.fs.lookup(parent: inode, name: entry.name)
                files.formUnion(try await find(h, looked.attributes.inode, child))
            } else {
                files.insert(child)
            }
        }
        return files
    }

    /// find over a tree of n³ files seeded in an in-memory store, through
    /// `wrap` of it (a store that differs in one way); returns the store,
    /// its counters counting from after the lookup of tree/, the files
    /// found and the files seeded.
    private func findTree(
        _ n: Int, through wrap: (InMemoryObjectStore) -> any ObjectStore
    ) async throws -> (store: InMemoryObjectStore, found: Set<String>, seeded: Set<String>) {
        let inner = InMemoryObjectStore()
        let names = seedTree(inner, n)
        let h = try Harness(store: inner)
        let fs = FileSystem(store: wrap(inner), options: MountOptions(uid: 1000, gid: 1000), clock: h.clock)
        let tree = try await fs.lookup(parent: InodeTable.root, name: "tree")
        inner.resetCounters()
        let found = try await find(Harness(store: inner, fs: fs, clock: h.clock), tree.attributes.inode, "tree")
        return (inner, found, names)
    }

    // Checks semantics.md#shows-tree-walks
    @Test func findOverATreeListsItFlatAfterTheSecondSubdirectory() async throws {
        let h = try Harness()
        let names = seedTree(h.store, 4)
        let tree = try await h.lookup("tree")
        h.store.resetCounters()
        #expect(try await find(h, tree.attributes.inode, "tree") == names)
        // tree/ came with the lookup; d0 and d0/e0 are listed on their own;
        // opening d0/e1 walks d0, opening d1 walks tree (one page each).
        #expect(h.store.requestCount(.list) == 2)
        #expect(h.store.requestCount(.listFlat) == 2)
        #expect(h.store.totalRequests == 4, "21 directories, 4 requests")
    }

    @Test func aStoreWithoutFlatListingsListsEachDirectory() async throws {
        /// The same store without flat listings (ObjectStore's default).
        struct Delimited: ForwardingStore {
            let inner: InMemoryObjectStore
        }
        let (inner, found, names) = try await findTree(3) { Delimited(inner: $0) }
        #expect(found == names)
        #expect(inner.requestCount(.listFlat) == 0 && inner.requestCount(.list) == 12, "one listing per directory")
    }

    // Checks semantics.md#shows-tree-walks
    @Test func aWalkLargerThanAPageListsItsSubdirectoriesInRangesSideBySide() async throws {
        let h = try Harness()
        var names: Set<String> = []
        for a in 0..<5 { for b in 0..<600 {
            let name = "big/d\(a)/f\(String(format: "%03d", b))"
            h.store.seed(name, bytes(1))
            names.insert(name)
        } }
        let big = try await h.lookup("big")
        h.store.resetCounters()
        #expect(try await find(h, big.attributes.inode, "big") == names)
        // d0 on its own; opening d1 walks big/ from d1: its first page (d1,
        // then part of d2) shows one directory a page, so the rest of d2
        // (from its last name), d3 and d4 are three more ranges.
        #expect(h.store.requestCount(.list) == 1)
        #expect(h.store.requestCount(.listFlat) == 4)
    }

    // Checks semantics.md#shows-tree-walks
    // Checks semantics.md#shows-caching
    @Test func aWalkLargerThanTheListingCacheKeepsItsRootListed() async throws {
        // 12,000 objects against 8,000 cached entries: the listings the
        // walk stores push out older ones, but not the root's, which
        // answers the lookup of each subdirectory (no probe, no listing of
        // a directory on its own).
        let h = try Harness(options: MountOptions(uid: 1000, gid: 1000, statCacheCapacity: 8_000))
        var names: Set<String> = []
        for a in 0..<60 { for b in 0..<200 {
            let name = "m/d\(String(format: "%02d", a))/f\(String(format: "%03d", b))"
            h.store.seed(name, bytes(1))
            names.insert(name)
        } }
        let m = try await h.lookup("m")
        h.store.resetCounters()
        #expect(try await find(h, m.attributes.inode, "m") == names)
        // d00 on its own; the walk from d01: a first page of five
        // directories (d05 read on from its last name), then 14 ranges of
        // four.
        #expect(h.store.requestCount(.stat) == 0 && h.store.requestCount(.list) == 1)
        #expect(h.store.requestCount(.listFlat) == 16)
    }

    // Checks semantics.md#shows-tree-walks
    @Test func aStoreThatIgnoresListingOffsetsIsWalkedWithoutRanges() async throws {
        /// Flat listings that ignore startOffset and endOffset, like the
        /// Python emulator's.
        struct NoOffsets: ForwardingStore {
            let inner: InMemoryObjectStore
            var supportsFlatListing: Bool { true }
            func listFlat(
                prefix: String, startOffset: String?, endOffset: String?, pageToken: String?, maxResults: Int
            ) async throws(StoreError) -> ObjectPage {
                try await inner.listFlat(prefix: prefix, startOffset: nil, endOffset: nil, pageToken: pageToken, maxResults: maxResults)
            }
        }
        let (inner, found, names) = try await findTree(4) { NoOffsets(inner: $0) }
        #expect(found == names)
        // The walk of d0 from e1 got d0 from its first name, and went on
        // as a walk without ranges; so did the walk of tree/ at d1.
        #expect(inner.requestCount(.listFlat) == 2)
        #expect(inner.requestCount(.list) == 2)
    }

    // Checks semantics.md#shows-tree-walks
    @Test func aChangeBelowAWalkEndsItAndShowsUp() async throws {
        let h = try Harness()
        _ = seedTree(h.store, 3)
        let tree = try await h.lookup("tree")
        let d0 = try await h.fs.lookup(parent: tree.attributes.inode, name: "d0")
        _ = try await h.list(tree.attributes.inode)
        _ = try await h.list(d0.attributes.inode)
        let d1 = try await h.fs.lookup(parent: tree.attributes.inode, name: "d1")
        _ = try await h.list(d1.attributes.inode)  // the second subdirectory: a walk of tree/
        let e2 = try await h.lookup("tree/d2/e2")
        // A new file in a directory the walk has listed already.
        let (entry, open) = try await h.fs.create(parent: e2.attributes.inode, name: "new", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: Data("x".utf8))
        try await h.fs.flush(entry.attributes.inode, handle: open.handle)
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        h.fs.forget(entry.attributes.inode, lookups: 1)
        #expect(try await h.list(e2.attributes.inode).map(\.name) == [".", "..", "f0", "f1", "f2", "new"])
    }

    // Checks semantics.md#shows-caching
    @Test func theKernelKeepsADirectorysEntriesWhileTheListingIsTheSame() async throws {
        let h = try Harness()
        for i in 0..<10 { h.store.seed("d/f\(i)", bytes(1)) }
        let d = try await h.lookup("d").attributes.inode
        let first = try await h.fs.openDirectory(d)
        #expect(first.cacheDirectory && !first.keepCache)
        #expect(try await h.fs.readdir(d, handle: first.handle, offset: 0).count == 12)
        h.fs.releasedir(d, handle: first.handle)
        let second = try await h.fs.openDirectory(d)
        #expect(second.cacheDirectory && second.keepCache, "same listing: the kernel may keep its entries")
        // The kernel may still ask (its cache can be incomplete): entries
        // are made on demand.
        #expect(try await h.fs.readdir(d, handle: second.handle, offset: 0).map(\.name).count == 12)
        h.fs.releasedir(d, handle: second.handle)
        h.clock.advance(by: .seconds(61))
        let third = try await h.fs.openDirectory(d)
        #expect(!third.keepCache, "a new listing: the kernel drops what it cached")
        h.fs.releasedir(d, handle: third.handle)
        let noCache = try Harness(options: MountOptions(uid: 1000, gid: 1000, statTTL: 0))
        noCache.store.seed("e/x")
        let e = try await noCache.lookup("e").attributes.inode
        let reply = try await noCache.fs.openDirectory(e)
        #expect(!reply.cacheDirectory && !reply.keepCache, "--stat-ttl 0: always ask")
        noCache.fs.releasedir(e, handle: reply.handle)
    }

    // Checks semantics.md#shows-caching
    @Test func absentNamesInAListedDirectoryCostNothingWhateverItsSize() async throws {
        let h = try Harness()
        for i in 0..<3000 { h.store.seed(String(format: "big/f%05d", i)) }
        let big = try await h.lookup("big")
        _ = try await h.list(big.attributes.inode)
        h.store.resetCounters()
        for i in 0..<200 {
            await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: big.attributes.inode, name: "absent\(i)") }
        }
        #expect(h.store.totalRequests == 0, "the listing answers within the negative TTL")
        h.clock.advance(by: .seconds(6))
        await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: big.attributes.inode, name: "later") }
        #expect(h.store.totalRequests == 3, "then a probe asks the store")
    }

    @Test func newNamesInASmallListedDirectoryCostOneListingPerNegativeTTL() async throws {
        let h = try Harness()
        for i in 0..<10 { h.store.seed("d/f\(i)") }
        let d = try await h.lookup("d").attributes.inode
        _ = try await h.list(d)
        h.clock.advance(by: .seconds(6))
        h.store.resetCounters()
        for i in 0..<20 {
            await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: d, name: "new\(i)") }
        }
        #expect(h.store.requestCount(.list) == 1 && h.store.totalRequests == 1, "one listing answers all twenty")
        h.store.seed("d/late")  // written by someone else
        h.clock.advance(by: .seconds(6))
        #expect(try await h.fs.lookup(parent: d, name: "late").attributes.size == 0)
        #expect(h.store.requestCount(.list) == 2 && h.store.totalRequests == 2, "the next listing sees it")
    }

    /// A probe that answers what the test says.
    final class FixedProbe: DescriptorProbe {
        let held = Atomic<Bool>(false)
        let asked = Atomic<Int>(0)
        func holdsWritableDescriptor(pid: Int32, inode: UInt64) -> Bool {
            asked.add(1, ordering: .relaxed)
            return held.load(ordering: .relaxed)
        }
    }

    // Checks semantics.md#write-shell-redirection
    @Test func aShellsRedirectionUploadsOnceAndTouchStillMakesTheObject() async throws {
        let probe = FixedProbe()
        let h = try Harness(descriptors: probe)
        // `printf x > f`: create, close of the original while stdout holds
        // a duplicate, write, close of stdout.
        probe.held.store(true, ordering: .relaxed)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "f", mode: 0o644, flags: O_WRONLY | O_TRUNC)
        let inode = entry.attributes.inode
        try await h.fs.flush(inode, handle: open.handle, pid: 42)
        #expect(h.store.requestCount(.put) == 0, "the other descriptor's close uploads")
        probe.held.store(false, ordering: .relaxed)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("x".utf8))
        try await h.fs.flush(inode, handle: open.handle, pid: 42)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.put) == 1)
        #expect(try await h.download("f") == Data("x".utf8))

        // `touch g`: one descriptor, nothing written; its close uploads.
        let (g, gOpen) = try await h.fs.create(parent: InodeTable.root, name: "g", mode: 0o644, flags: O_WRONLY)
        try await h.fs.flush(g.attributes.inode, handle: gOpen.handle, pid: 43)
        #expect(try await h.store.stat("g").size == 0, "the object exists when close returns")
        try await h.fs.release(g.attributes.inode, handle: gOpen.handle)

        // Held elsewhere, but written to (or changed): this close uploads.
        probe.held.store(true, ordering: .relaxed)
        let (k, kOpen) = try await h.fs.create(parent: InodeTable.root, name: "k", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(k.attributes.inode, handle: kOpen.handle, offset: 0, data: Data("y".utf8))
        let asked = probe.asked.load(ordering: .relaxed)
        try await h.fs.flush(k.attributes.inode, handle: kOpen.handle, pid: 44)
        #expect(try await h.download("k") == Data("y".utf8))
        #expect(probe.asked.load(ordering: .relaxed) == asked, "only a new, untouched file asks the probe")
        try await h.fs.release(k.attributes.inode, handle: kOpen.handle)

        // Nobody closes again (the process died without another close):
        // release still uploads.
        let (m, mOpen) = try await h.fs.create(parent: InodeTable.root, name: "m", mode: 0o644, flags: O_WRONLY)
        try await h.fs.flush(m.attributes.inode, handle: mOpen.handle, pid: 45)
        #expect(h.store.objectNames.contains("m") == false)
        try await h.fs.release(m.attributes.inode, handle: mOpen.handle)
        #expect(try await h.store.stat("m").size == 0)
    }

    @Test func procProbeFindsThisProcessesOwnWritableDescriptor() throws {
        let directory = temporaryDirectory("probe")
        defer { removeDirectory(directory) }
        let path = directory + "/file"
        let fd = open(path, O_CREAT | O_WRONLY, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        var st = stat()
        #expect(fstat(fd, &st) == 0)
        // The probe answers for the mount it was made for: here the
        // filesystem holding the temporary directory.
        let mountpoint = mountpointOf(directory)
        let probe = ProcDescriptorProbe(mountpoint: mountpoint)
        #expect(probe.holdsWritableDescriptor(pid: getpid(), inode: UInt64(st.st_ino)))
        #expect(!probe.holdsWritableDescriptor(pid: getpid(), inode: UInt64(st.st_ino) &+ 1_000_003))
        #expect(!ProcDescriptorProbe(mountpoint: "/nonexistent-mount").holdsWritableDescriptor(pid: getpid(), inode: UInt64(st.st_ino)))
    }

    /// The mountpoint of the filesystem holding `path` (the longest
    /// mountinfo mountpoint that is a prefix of it).
    private func mountpointOf(_ path: String) -> String {
        let real = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        let table = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        var best = "/"
        for line in table.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count > 4 else { continue }
            let point = String(fields[4])
            if (real == point || real.hasPrefix(point == "/" ? "/" : point + "/")) && point.count >= best.count { best = point }
        }
        return best
    }
}
