import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting

/// A request the kernel interrupts (FUSE_INTERRUPT: Ctrl-C or kill reached
/// the waiting process) arrives in the core as the cancellation of the Task
/// serving it. A wait on the network then ends with EINTR at once, and the
/// work that others share (the upload, a read-ahead download, a tree walk's
/// page) goes on.
@Suite struct InterruptTests {
    /// What an interrupted request may take to answer. Alone it answers in
    /// milliseconds (the mount test saw cp exit 10 ms after SIGINT); the
    /// whole suite on two shared cores once delayed an answer past 1 s, and
    /// the waits these tests interrupt would otherwise last 20 s or more.
    static let answerLimit: Duration = .seconds(3)

    /// A store whose reads and listings hang while `stalled`, as over a
    /// connection that stopped sending; like the transport, it ends a
    /// cancelled call at once with `.cancelled`.
    final class StalledStore: ForwardingStore, Sendable {
        let inner: InMemoryObjectStore
        let stalled = Atomic<Bool>(false)

        init(inner: InMemoryObjectStore) { self.inner = inner }

        private func waitWhileStalled() async throws(StoreError) {
            while stalled.load(ordering: .relaxed) {
                do { try await Task.sleep(for: .milliseconds(10)) } catch { throw .cancelled }
            }
        }

        func read(
            _ name: String, generation: Int64, range: Range<Int64>, into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
        ) async throws(StoreError) -> Int64 {
            try await waitWhileStalled()
            return try await inner.read(name, generation: generation, range: range, into: sink)
        }

        func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage {
            try await waitWhileStalled()
            return try await inner.list(prefix: prefix, pageToken: pageToken, maxResults: maxResults)
        }
    }

    /// Runs `body` in a Task, cancels it after `after`, and returns its
    /// errno (0 for success) if it answered within `answerLimit` of the
    /// cancellation; else `release` is called, so that a body that ignores
    /// the cancellation still ends, and the answer is nil.
    func errnoWhenInterrupted(
        after: Duration = .milliseconds(300), release: () -> Void, _ body: @escaping @Sendable () async throws -> Void
    ) async throws -> Int32? {
        let answer = Mutex<Int32?>(nil)
        let task = Task {
            var code: Int32 = 0
            do { try await body() } catch let error as FSError { code = error.errno } catch { code = -1 }
            answer.withLock { $0 = code }
        }
        try await Task.sleep(for: after)
        #expect(answer.withLock { $0 } == nil, "the request was still waiting when interrupted")
        task.cancel()
        let deadline = ContinuousClock.now + Self.answerLimit
        while ContinuousClock.now < deadline, answer.withLock({ $0 }) == nil {
            try await Task.sleep(for: .milliseconds(10))
        }
        let answered = answer.withLock { $0 }
        if answered == nil { release() }
        await task.value
        return answered
    }

    // Checks semantics.md#net-interrupt, semantics.md#errno-eintr
    @Test func anInterruptedFlushAnswersEINTRAndTheUploadGoesOn() async throws {
        let cache = temporaryDirectory("interrupt")
        defer { removeDirectory(cache) }
        let h = try Harness(options: MountOptions(
            uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b", uploadRetryWindow: 60,
            recoveryRetryInterval: 0.1, recoveryRetryMaxInterval: 0.1))
        let down = Atomic<Bool>(true)
        h.store.setFaultHook { operation, _ in
            operation == .put && down.load(ordering: .relaxed) ? .unavailable("503 during an outage") : nil
        }
        let content = bytes(300_000, seed: 7)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "big.bin", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: content)

        let fs = h.fs
        let errno = try await errnoWhenInterrupted(release: { down.store(false, ordering: .relaxed) }) {
            try await fs.flush(inode, handle: open.handle)
        }
        #expect(errno == EINTR, "an interrupted close answers EINTR within \(Self.answerLimit)")
        // The upload was not cancelled with the wait: it keeps trying (the
        // next attempt 0.5 s, the one after 1.5 s after the first), and
        // nothing went to the recovery folder.
        let attempts = h.store.requestCount(.put)
        try await Task.sleep(for: .milliseconds(1500))
        #expect(h.store.requestCount(.put) > attempts, "the upload went on trying after the interrupt")
        #expect(RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending().isEmpty)
        down.store(false, ordering: .relaxed)
        // The kernel's release follows the interrupted close.
        try await h.fs.release(inode, handle: open.handle)
        #expect(try await h.download("big.bin") == content, "the upload went on and stored the bytes")
        #expect(RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending().isEmpty)
    }

    // Checks semantics.md#net-interrupt, semantics.md#errno-eintr
    @Test func anInterruptedReadAnswersEINTRAndTheDownloadGoesOn() async throws {
        let inner = InMemoryObjectStore()
        let content = bytes(3 << 20, seed: 8)
        _ = inner.seed("movie.bin", content)
        let store = StalledStore(inner: inner)
        let h = Harness(store: inner, fs: FileSystem(store: store, options: MountOptions(uid: 1000, gid: 1000), clock: ManualClock()), clock: ManualClock())
        let inode = try await h.lookup("movie.bin").attributes.inode
        let open = try await h.fs.open(inode, flags: O_RDONLY)
        store.stalled.store(true, ordering: .relaxed)

        let fs = h.fs
        let errno = try await errnoWhenInterrupted(release: { store.stalled.store(false, ordering: .relaxed) }) {
            _ = try await fs.read(inode, handle: open.handle, offset: 0, size: 128 << 10)
        }
        #expect(errno == EINTR, "an interrupted read answers EINTR within \(Self.answerLimit)")
        store.stalled.store(false, ordering: .relaxed)
        // The read-ahead buffer it waited for still serves the next read.
        let again = try await h.fs.read(inode, handle: open.handle, offset: 0, size: 128 << 10)
        #expect(again == content.prefix(128 << 10))
        try await h.fs.release(inode, handle: open.handle)
    }

    // Checks semantics.md#net-interrupt, semantics.md#errno-eintr
    @Test func anInterruptedOpendirAnswersEINTR() async throws {
        let inner = InMemoryObjectStore()
        _ = inner.seed("photos/a.jpg", bytes(10, seed: 9))
        let store = StalledStore(inner: inner)
        // No stat cache: the opendir lists, whatever the lookup saw.
        let options = MountOptions(uid: 1000, gid: 1000, statTTL: 0)
        let h = Harness(store: inner, fs: FileSystem(store: store, options: options, clock: ManualClock()), clock: ManualClock())
        let inode = try await h.lookup("photos").attributes.inode
        store.stalled.store(true, ordering: .relaxed)

        let fs = h.fs
        let errno = try await errnoWhenInterrupted(release: { store.stalled.store(false, ordering: .relaxed) }) {
            _ = try await fs.opendir(inode)
        }
        #expect(errno == EINTR, "an interrupted opendir answers EINTR within \(Self.answerLimit)")
        store.stalled.store(false, ordering: .relaxed)
        #expect(try await h.list(inode).map(\.name).contains("a.jpg"))
    }
}
