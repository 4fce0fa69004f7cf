import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

/// opendir of a directory of more than one page answers after the first
/// page; readdir answers from the pages read so far while the others are
/// on their way (`ListingArrival`), and the listing is kept as its pages
/// arrive.
@Suite("readdir while the listing arrives", .timeLimit(.minutes(1)))
struct ArrivingListingTests {
    /// A store that holds back every page after a listing's first until
    /// the test lets it through (`allow`), as a slow server would; like
    /// the transport, it ends a cancelled call at once with `.cancelled`.
    final class GatedListingStore: ForwardingStore, Sendable {
        let inner: InMemoryObjectStore
        /// Pages after the first that may be answered, and those answered.
        private let allowed = Atomic<Int>(0)
        let answered = Atomic<Int>(0)

        init(inner: InMemoryObjectStore) { self.inner = inner }

        func allow(_ pages: Int) { allowed.add(pages, ordering: .relaxed) }

        func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage {
            if Task.isCancelled { throw .cancelled }
            if pageToken != nil {
                while answered.load(ordering: .relaxed) >= allowed.load(ordering: .relaxed) {
                    do { try await Task.sleep(for: .milliseconds(5)) } catch { throw .cancelled }
                }
                // As the transport checks before each request.
                if Task.isCancelled { throw .cancelled }
                answered.add(1, ordering: .relaxed)
            }
            return try await inner.list(prefix: prefix, pageToken: pageToken, maxResults: maxResults)
        }
    }

    private func harness(files: Int) throws -> (Harness, GatedListingStore, [String]) {
        let inner = InMemoryObjectStore()
        let names = (0..<files).map { String(format: "f%05d", $0) }
        for name in names { inner.seed("big/" + name, Data([1])) }
        let store = GatedListingStore(inner: inner)
        let clock = ManualClock()
        let fs = FileSystem(store: store, options: MountOptions(uid: 1000, gid: 1000), clock: clock)
        return (Harness(store: inner, fs: fs, clock: clock), store, names)
    }

    /// readdir from `offset` to the end of the directory.
    private func readAll(_ h: Harness, _ inode: UInt64, _ handle: UInt64, from offset: Int64 = 0) async throws -> [DirectoryEntry] {
        var entries: [DirectoryEntry] = []
        var next = offset
        while true {
            let batch = try await h.fs.readdir(inode, handle: handle, offset: next)
            guard let last = batch.last else { return entries }
            entries += batch
            next = last.nextOffset
        }
    }

    /// Waits (up to 5 s) until `condition` holds.
    private func eventually(_ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while !condition(), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
    }

    // Checks semantics.md#shows-caching
    @Test func readdirAnswersFromTheFirstPageWhileTheOthersAreOnTheirWay() async throws {
        let (h, gate, names) = try harness(files: 2500)
        let big = try await h.lookup("big")  // its probe reads the first page
        let open = try await h.fs.openDirectory(big.attributes.inode)
        #expect(!open.keepCache && open.cacheDirectory)

        // ".", "..", and the first page's names but its last (held until
        // the next page says whether `f00999/` is a directory).
        let firstPage = try await entries(h, big.attributes.inode, open.handle, upTo: 1001)
        #expect(firstPage.map(\.name) == [".", ".."] + names.prefix(999))
        #expect(gate.answered.load(ordering: .relaxed) == 0, "no page after the first yet")

        let waiting = Task { try await h.fs.readdir(big.attributes.inode, handle: open.handle, offset: 1001) }
        try await Task.sleep(for: .milliseconds(100))
        gate.allow(1)
        let next = try await waiting.value
        #expect(next.first?.name == names[999], "the page answered the readdir that waited for it")

        gate.allow(1)
        let rest = try await readAll(h, big.attributes.inode, open.handle, from: 1001)
        let all = firstPage + rest
        #expect(all.map(\.name) == [".", ".."] + names)
        #expect(all.enumerated().allSatisfy { $0.element.nextOffset == Int64($0.offset + 1) })
        h.fs.releasedir(big.attributes.inode, handle: open.handle)

        // Kept as it arrived: lookups and the next opendir ask nothing, and
        // the kernel may keep the entries it cached.
        h.store.resetCounters()
        for name in names.prefix(50) { _ = try await h.fs.lookup(parent: big.attributes.inode, name: name) }
        let again = try await h.fs.openDirectory(big.attributes.inode)
        #expect(again.keepCache)
        #expect(try await readAll(h, big.attributes.inode, again.handle).map(\.name) == [".", ".."] + names)
        #expect(h.store.totalRequests == 0)
        h.fs.releasedir(big.attributes.inode, handle: again.handle)
    }

    // Checks semantics.md#shows-caching
    @Test func aPageThatFailsEndsTheDirectoryWithItsErrnoAfterTheEntriesMade() async throws {
        let (h, gate, names) = try harness(files: 2500)
        let big = try await h.lookup("big")
        let open = try await h.fs.openDirectory(big.attributes.inode)
        h.store.failNext(1, with: .permissionDenied("page 2"), operations: [.list])
        gate.allow(2)
        let firstPage = try await entries(h, big.attributes.inode, open.handle, upTo: 1001)
        #expect(firstPage.map(\.name) == [".", ".."] + names.prefix(999))
        do {
            _ = try await h.fs.readdir(big.attributes.inode, handle: open.handle, offset: 1001)
            Issue.record("readdir past the failed page answered")
        } catch {
            #expect(error.errno == EACCES, "the page's failure, as any list request's")
        }
        let again = try await h.fs.readdir(big.attributes.inode, handle: open.handle, offset: 2)
        #expect(again.first?.name == names[0], "the entries made stay readable")
        h.fs.releasedir(big.attributes.inode, handle: open.handle)

        // Nothing kept: the next opendir reads the listing again.
        h.store.resetCounters()
        let retry = try await h.fs.openDirectory(big.attributes.inode)
        gate.allow(2)
        #expect(try await readAll(h, big.attributes.inode, retry.handle).map(\.name) == [".", ".."] + names)
        #expect(h.store.requestCount(.list) == 3)
        h.fs.releasedir(big.attributes.inode, handle: retry.handle)
    }

    // Checks semantics.md#net-interrupt
    @Test func anInterruptedReaddirAnswersEINTRAndReleasingTheHandleStopsTheListing() async throws {
        let (h, gate, _) = try harness(files: 3500)
        let big = try await h.lookup("big")
        let open = try await h.fs.openDirectory(big.attributes.inode)
        _ = try await entries(h, big.attributes.inode, open.handle, upTo: 1001)
        let waiting = Task { try await h.fs.readdir(big.attributes.inode, handle: open.handle, offset: 1001) }
        try await Task.sleep(for: .milliseconds(100))
        waiting.cancel()
        let answer = await waiting.result
        #expect(throws: FSError.self) { try answer.get() }
        do { _ = try answer.get() } catch let error as FSError { #expect(error.errno == EINTR) }

        h.store.resetCounters()
        h.fs.releasedir(big.attributes.inode, handle: open.handle)
        gate.allow(10)
        try await Task.sleep(for: .milliseconds(100))
        #expect(h.store.requestCount(.list) == 0, "the listing stopped with its handle: no page after")
        #expect(h.fs.state.withLock { $0.metadata.listings.arriving.isEmpty && $0.directories.isEmpty })
    }

    @Test func aSecondOpendirWaitsForTheArrivingListingInsteadOfReadingItAgain() async throws {
        let (h, gate, names) = try harness(files: 2500)
        let big = try await h.lookup("big")
        let first = try await h.fs.openDirectory(big.attributes.inode)
        h.store.resetCounters()
        let second = Task { try await h.fs.openDirectory(big.attributes.inode) }
        try await Task.sleep(for: .milliseconds(100))
        gate.allow(2)
        let firstNames = try await readAll(h, big.attributes.inode, first.handle).map(\.name)
        let secondOpen = try await second.value
        let secondNames = try await readAll(h, big.attributes.inode, secondOpen.handle).map(\.name)
        #expect(firstNames == [".", ".."] + names && secondNames == firstNames)
        #expect(h.store.requestCount(.list) == 2, "the two pages after the probe's, once")
        h.fs.releasedir(big.attributes.inode, handle: first.handle)
        h.fs.releasedir(big.attributes.inode, handle: secondOpen.handle)
    }

    @Test func aFileWrittenInTheDirectoryShowsAsItsStagedStateAmongTheArrivingNames() async throws {
        let (h, gate, names) = try harness(files: 1500)
        let big = try await h.lookup("big")
        let (entry, file) = try await h.fs.create(parent: big.attributes.inode, name: "zz-new", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: file.handle, offset: 0, data: Data(repeating: 7, count: 10))
        let open = try await h.fs.openDirectory(big.attributes.inode)
        gate.allow(1)
        let all = try await readAll(h, big.attributes.inode, open.handle)
        #expect(all.map(\.name) == [".", ".."] + names + ["zz-new"])
        #expect(all.last?.entry.attributes.size == 10)
        h.fs.releasedir(big.attributes.inode, handle: open.handle)
        try await h.fs.release(entry.attributes.inode, handle: file.handle)
    }

    @Test func aFileMadeHereWhileTheListingArrivesIsInTheListingKept() async throws {
        let (h, gate, names) = try harness(files: 1500)
        let big = try await h.lookup("big")
        let open = try await h.fs.openDirectory(big.attributes.inode)
        // After the first page, before the second: a name on that first
        // page goes, a new one comes.
        try await h.fs.unlink(parent: big.attributes.inode, name: names[10])
        let (entry, file) = try await h.fs.create(parent: big.attributes.inode, name: "a-new", mode: 0o644, flags: O_WRONLY)
        try await h.fs.release(entry.attributes.inode, handle: file.handle)
        gate.allow(1)
        _ = try await readAll(h, big.attributes.inode, open.handle)
        h.fs.releasedir(big.attributes.inode, handle: open.handle)

        h.store.resetCounters()
        let again = try await h.fs.openDirectory(big.attributes.inode)
        let listed = try await readAll(h, big.attributes.inode, again.handle).map(\.name)
        #expect(h.store.requestCount(.list) == 0, "answered from the listing kept")
        var expected = names
        expected.remove(at: 10)
        #expect(Set(listed) == Set([".", ".."] + expected + ["a-new"]))
        #expect(listed.count == expected.count + 3)
        h.fs.releasedir(big.attributes.inode, handle: again.handle)
    }

    /// Entries from offset 0 up to `count`, without reading past them.
    private func entries(_ h: Harness, _ inode: UInt64, _ handle: UInt64, upTo count: Int64) async throws -> [DirectoryEntry] {
        var entries: [DirectoryEntry] = []
        while Int64(entries.count) < count {
            entries += try await h.fs.readdir(inode, handle: handle, offset: Int64(entries.count))
        }
        return entries
    }
}
