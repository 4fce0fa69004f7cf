import Foundation
import Synchronization
import Testing
@testable import FSCore
import FSCoreTesting
import StorageKit

/// Large files uploaded as parts side by side, then composed
/// (`ParallelUploads`), over the in-memory store: what lands in the bucket,
/// what a failure at each step leaves, and where the mount keeps the usual
/// single upload. Thresholds and parts are tiny so the files stay small.
@Suite struct ParallelUploadTests {
    static let threshold: Int64 = 64 << 10

    static func options(
        _ cache: String, threshold: Int64 = threshold, parts: Int = 8, minPart: Int64 = 4 << 10,
        streamChunk: Int64 = 64 << 20, minRoundTrip: TimeInterval = 0.010, singleRequestMax: Int64 = 1 << 30
    ) -> MountOptions {
        MountOptions(
            uid: 1000, gid: 1000, cacheDirectory: cache, bucket: "b", streamChunkSize: streamChunk,
            uploadRetryWindow: 0, recoveryRetryInterval: 0,
            parallelUploadThreshold: threshold, parallelUploadParts: parts, parallelUploadMinPartSize: minPart,
            parallelUploadMinRoundTrip: minRoundTrip, singleRequestMax: singleRequestMax)
    }

    /// Creates `name` in the root with `content` and closes it; the errno of
    /// a failed close is thrown.
    func write(_ h: Harness, _ name: String, _ content: Data) async throws {
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o640, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: content)
        defer { Task { try? await h.fs.release(entry.attributes.inode, handle: open.handle) } }
        try await h.fs.flush(entry.attributes.inode, handle: open.handle)
    }

    func partNames(_ store: InMemoryObjectStore) -> [String] {
        store.objectNames.filter { $0.hasPrefix(PathRules.partsPrefix) }
    }

    func crc32c(_ data: Data) -> String {
        var crc = CRC32C()
        crc.update(data)
        return crc.base64
    }

    func recovered(_ cache: String) -> [(path: String, entry: RecoveryFolder.Entry)] {
        RecoveryFolder(cacheDirectory: cache, bucket: "b", logger: .init(label: "t")).pending()
    }

    @Test func aLargeFileGoesUpAsPartsComposedIntoTheObject() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        let content = bytes(100_000, seed: 1)
        try await write(h, "big.bin", content)
        #expect(h.store.requestCount(.putRegion) == 8)
        #expect(h.store.requestCount(.compose) == 1)
        #expect(h.store.requestCount(.put) == 0)
        #expect(h.store.data(of: "big.bin") == content)
        #expect(try await h.store.stat("big.bin").crc32c == crc32c(content))
        #expect(partNames(h.store).isEmpty, "parts deleted: \(partNames(h.store))")
    }

    @Test func theObjectHasWhatASingleUploadWouldHaveSet() async throws {
        let cache = temporaryDirectory("parallel"), otherCache = temporaryDirectory("single")
        defer {
            removeDirectory(cache)
            removeDirectory(otherCache)
        }
        let store = InMemoryObjectStore()
        let parallel = try Harness(options: Self.options(cache), store: store)
        let single = try Harness(options: Self.options(otherCache, threshold: 0), store: store)
        let content = bytes(100_000, seed: 2)
        try await write(parallel, "in-parts.html", content)
        try await write(single, "single.html", content)
        #expect(store.requestCount(.compose) == 1 && store.requestCount(.put) == 1)
        let inParts = try await store.stat("in-parts.html"), whole = try await store.stat("single.html")
        #expect(inParts.properties == whole.properties)
        // (The in-memory store infers no type from the name; StorageKit
        // does, for a compose as for an upload: ComposeTests.)
        // No mtime key in either: a written file's mtime is `updated`.
        #expect(inParts.customMetadata == whole.customMetadata && inParts.customMetadata[AttributeMapper.mtimeKey] == nil && !inParts.customMetadata.isEmpty,
                "\(inParts.customMetadata) / \(whole.customMetadata)")
    }

    @Test func belowTheThresholdTheUsualUploadStays() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        let content = bytes(Int(Self.threshold) - 1, seed: 3)
        try await write(h, "small.bin", content)
        #expect(h.store.requestCount(.put) == 1)
        #expect(h.store.requestCount(.putRegion) == 0 && h.store.requestCount(.compose) == 0)
        #expect(h.store.data(of: "small.bin") == content)
    }

    // Checks semantics.md#parallel-uploads
    @Test("a store is near (the single upload) only when measured, and quicker than the bound", arguments: [
        (roundTrip: nil, bound: 0.010, near: false),  // nothing measured yet: parts
        (roundTrip: .microseconds(300), bound: 0.010, near: true),  // loopback
        (roundTrip: .microseconds(4_300), bound: 0.010, near: true),  // loopback at start-up, 2 loaded cores
        (roundTrip: .microseconds(9_999), bound: 0.010, near: true),
        (roundTrip: .milliseconds(10), bound: 0.010, near: false),  // the bound itself is far
        (roundTrip: .milliseconds(20), bound: 0.010, near: false),  // the bench's cloud-shaped links
        (roundTrip: .microseconds(300), bound: 0, near: false),  // 0: parts whatever the round trip
        (roundTrip: .zero, bound: 0, near: false),
        (roundTrip: .milliseconds(20), bound: 0.050, near: true),
    ] as [(roundTrip: Duration?, bound: TimeInterval, near: Bool)])
    func nearness(roundTrip: Duration?, bound: TimeInterval, near: Bool) {
        #expect(ParallelUploads.isNear(roundTrip: roundTrip, minRoundTrip: .seconds(bound)) == near)
    }

    /// Writes `content` as `name` in 64 KiB writes in order, waits until a
    /// streamed send or part went out if `streams`, and closes.
    func writeInOrder(_ h: Harness, _ name: String, _ content: Data, streams: Bool) async throws {
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o640, flags: O_WRONLY)
        let inode = entry.attributes.inode
        var offset = 0
        while offset < content.count {
            let piece = content[offset..<min(content.count, offset + (64 << 10))]
            _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(offset), data: Data(piece))
            offset += piece.count
        }
        for _ in 0..<200 where streams && h.store.requestCount(.streamingSend) + h.store.requestCount(.putRegion) < 1 {
            try await Task.sleep(for: .milliseconds(10))
        }
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
    }

    /// Writes `content` as `name`, the second half first, then the first,
    /// then 4 bytes at 0 again (never in order), and closes; returns what
    /// the file holds.
    func writeOutOfOrder(_ h: Harness, _ name: String, _ content: Data) async throws -> Data {
        var content = content
        let half = content.count / 2
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o640, flags: O_WRONLY)
        let inode = entry.attributes.inode
        for range in [half..<content.count, 0..<half] {
            _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(range.lowerBound), data: content.subdata(in: range))
        }
        content.replaceSubrange(0..<4, with: Data("edit".utf8))
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("edit".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        return content
    }

    // Checks semantics.md#parallel-uploads
    @Test("near the store, up to single-request-max: one request, sent while the file is written in order, else at close", arguments: [true, false])
    func aNearStoreGetsOneRequest(inOrder: Bool) async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache, streamChunk: 256 << 10, singleRequestMax: 1 << 20))
        h.store.setRoundTrip(.microseconds(300))
        var content = bytes(1 << 20, seed: 15)
        if inOrder {
            try await writeInOrder(h, "near.bin", content, streams: false)
        } else {
            content = try await writeOutOfOrder(h, "near.bin", content)
        }
        // In order, the request starts once the file holds the start (here
        // the 256 KiB chunk, below oneRequestStreamStart) and ends at close.
        #expect(h.store.requestCount(.oneRequestStream) == (inOrder ? 1 : 0), "one request while written")
        #expect(h.store.requestCount(.putInOneRequest) == (inOrder ? 0 : 1), "one request at close")
        #expect(h.store.requestCount(.put) == 0)
        #expect(h.store.requestCount(.putRegion) == 0 && h.store.requestCount(.compose) == 0)
        #expect(h.store.requestCount(.streamingStart) == 0, "no resumable session")
        #expect(h.store.data(of: "near.bin") == content)
        #expect(partNames(h.store).isEmpty)
    }

    // Checks semantics.md#parallel-uploads
    @Test func aNearOneRequestThatFailsIsSentAgainWholeAtClose() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache, streamChunk: 256 << 10, singleRequestMax: 1 << 20))
        h.store.setRoundTrip(.microseconds(300))
        h.store.failNext(1, with: .unavailable("connection reset"), operations: [.oneRequestStream])
        let content = bytes(1 << 20, seed: 16)
        try await writeInOrder(h, "near.bin", content, streams: false)
        #expect(h.store.requestCount(.oneRequestStream) == 1)
        #expect(h.store.requestCount(.putInOneRequest) == 1, "the whole file again, in one request")
        #expect(h.store.data(of: "near.bin") == content)
    }

    // Checks semantics.md#parallel-uploads
    @Test func atMostFourOneRequestStreamsAreOpenAndEachGivesItsPlaceBackOnce() async throws {
        let store = InMemoryObjectStore()
        let uploads = ParallelUploads(store: store, options: Self.options("/nonexistent"), logger: .init(label: "t"))
        let places = (0..<ParallelUploads.maxOneRequestStreams).compactMap { _ in uploads.reserveOneRequestStream() }
        #expect(places.count == 4 && uploads.openOneRequestStreams == 4)
        #expect(uploads.reserveOneRequestStream() == nil, "a fifth file goes up at close")
        // A stream gives its place back when it finishes or is abandoned,
        // once, whichever comes (an abandon after a failed finish too).
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let path = cache + "/f"
        try Data("four".utf8).write(to: URL(fileURLWithPath: path))
        let finished = PlacedStreamingPut(
            inner: try await store.startOneRequestStream("f", from: path, options: PutOptions()), place: places[0])
        _ = try await finished.finish(size: 4)
        await finished.abandon()
        #expect(uploads.openOneRequestStreams == 3)
        let abandoned = PlacedStreamingPut(
            inner: try await store.startOneRequestStream("g", from: path, options: PutOptions()), place: places[1])
        await abandoned.abandon()
        await abandoned.abandon()
        #expect(uploads.openOneRequestStreams == 2)
        places[2].release()
        #expect(uploads.openOneRequestStreams == 1)
        #expect(uploads.reserveOneRequestStream() != nil)
    }

    // Checks semantics.md#parallel-uploads
    @Test func aNearStoreThatCannotTakeAGrowingFileGetsOneRequestAtClose() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        var capabilities = StoreCapabilities.full
        capabilities.oneRequestStreams = false
        let h = try Harness(
            options: Self.options(cache, streamChunk: 256 << 10, singleRequestMax: 1 << 20), store: InMemoryObjectStore(capabilities: capabilities))
        h.store.setRoundTrip(.microseconds(300))
        let content = bytes(1 << 20, seed: 17)
        try await writeInOrder(h, "near.bin", content, streams: false)
        #expect(h.store.requestCount(.oneRequestStream) == 0)
        #expect(h.store.requestCount(.putInOneRequest) == 1)
        #expect(h.store.requestCount(.streamingStart) == 0 && h.store.requestCount(.putRegion) == 0, "nothing while written")
        #expect(h.store.data(of: "near.bin") == content)
    }

    // Checks semantics.md#parallel-uploads
    @Test func aNearStoreGetsTheUsualUploadForALargerFileNotWrittenInOrder() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache, streamChunk: 256 << 10, singleRequestMax: (1 << 20) - 1))
        h.store.setRoundTrip(.microseconds(300))
        let content = try await writeOutOfOrder(h, "near.bin", bytes(1 << 20, seed: 18))
        #expect(h.store.requestCount(.put) == 1, "one upload at close, resumable above the store's multipart limit")
        #expect(h.store.requestCount(.putInOneRequest) == 0)
        #expect(h.store.requestCount(.putRegion) == 0 && h.store.requestCount(.compose) == 0)
        #expect(h.store.data(of: "near.bin") == content)
    }

    // Checks semantics.md#parallel-uploads
    @Test func aNearStoreStreamsPartsOfALargerFileWrittenInOrderOncePastTheMax() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        // Parts of 256 KiB. One request follows the file from 256 KiB;
        // once the file passes 512 KiB it is abandoned (it stores nothing)
        // and parts stream, the first send carrying the two parts written
        // by then.
        let h = try Harness(options: Self.options(cache, streamChunk: 256 << 10, singleRequestMax: 512 << 10))
        h.store.setRoundTrip(.microseconds(300))
        let content = bytes(1 << 20, seed: 19)
        try await writeInOrder(h, "near.bin", content, streams: true)
        #expect(h.store.requestCount(.putRegion) == 4 && h.store.requestCount(.compose) == 1)
        #expect(h.store.requestCount(.putInOneRequest) == 0 && h.store.requestCount(.put) == 0)
        #expect(h.store.requestCount(.oneRequestStream) == 0, "the abandoned request stored nothing")
        #expect(h.store.data(of: "near.bin") == content)
        #expect(partNames(h.store).isEmpty)
    }

    @Test("where a file written in order starts to stream", arguments: [
        // Near: one request follows the file from 8 MiB (or the chunk, if smaller).
        (roundTrip: .microseconds(300), max: 1 << 30, growing: true, chunk: 64 << 20, start: 8 << 20),
        (roundTrip: .microseconds(300), max: 1 << 30, growing: true, chunk: 256 << 10, start: 256 << 10),
        // Near, a store that cannot take a growing file: past what goes in one request.
        (roundTrip: .microseconds(300), max: 1 << 30, growing: false, chunk: 256 << 10, start: (1 << 30) + 1),
        (roundTrip: .microseconds(300), max: 1 << 10, growing: false, chunk: 256 << 10, start: 256 << 10),  // never before the chunk
        (roundTrip: .microseconds(300), max: 0, growing: true, chunk: 256 << 10, start: 256 << 10),  // off: as a far store
        (roundTrip: .milliseconds(20), max: 1 << 30, growing: true, chunk: 256 << 10, start: 256 << 10),  // far
        (roundTrip: nil, max: 1 << 30, growing: true, chunk: 256 << 10, start: 256 << 10),  // not measured: far
    ] as [(roundTrip: Duration?, max: Int64, growing: Bool, chunk: Int64, start: Int64)])
    func streamStart(roundTrip: Duration?, max: Int64, growing: Bool, chunk: Int64, start: Int64) {
        var capabilities = StoreCapabilities.full
        capabilities.oneRequestStreams = growing
        let store = InMemoryObjectStore(capabilities: capabilities)
        store.setRoundTrip(roundTrip)
        let uploads = ParallelUploads(store: store, options: Self.options("/nonexistent", singleRequestMax: max), logger: .init(label: "t"))
        #expect(uploads.streamStart(chunk: chunk) == start)
        // One request only near, up to the max, on a store that can.
        #expect(uploads.streamsOneRequest(written: start) == (growing && max > 0 && start <= max && roundTrip.map { $0 < .milliseconds(10) } == true))
    }

    // Checks semantics.md#parallel-uploads
    @Test func anObjectThatChangedBeforeANearOneRequestUploadIsESTALE() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        h.store.setRoundTrip(.microseconds(300))
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "near.bin", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: bytes(100_000, seed: 20))
        let theirs = h.store.seed("near.bin", Data("someone else's".utf8))
        await expectErrno(ESTALE) { try await h.fs.flush(entry.attributes.inode, handle: open.handle) }
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        #expect(h.store.requestCount(.putInOneRequest) == 1)
        #expect(try await h.store.stat("near.bin").generation == theirs.generation)
        #expect(recovered(cache).map(\.entry.object) == ["near.bin"])
    }

    // Checks semantics.md#parallel-uploads
    @Test func aNearStoreGetsTheSingleUploadForAFileNotWrittenInOrderWhenOneRequestIsOff() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache, streamChunk: 256 << 10, singleRequestMax: 0))
        h.store.setRoundTrip(.microseconds(300))
        var content = bytes(1 << 20, seed: 15)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "near.bin", mode: 0o640, flags: O_WRONLY)
        let inode = entry.attributes.inode
        // The second half first, then the first: never in order.
        for offset in [1 << 19, 0] {
            _ = try await h.fs.write(inode, handle: open.handle, offset: Int64(offset), data: content.subdata(in: offset..<(offset + (1 << 19))))
        }
        content.replaceSubrange(0..<4, with: Data("edit".utf8))
        _ = try await h.fs.write(inode, handle: open.handle, offset: 0, data: Data("edit".utf8))
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.put) == 1, "one upload at close")
        #expect(h.store.requestCount(.putRegion) == 0 && h.store.requestCount(.compose) == 0)
        #expect(h.store.requestCount(.streamingStart) == 0)
        #expect(h.store.data(of: "near.bin") == content)
        #expect(partNames(h.store).isEmpty)
    }

    // Checks semantics.md#parallel-uploads
    @Test("written in order, far or not measured (or near with single-request-max off): parts sent while the file is written, composed at close", arguments: [
        (roundTrip: .milliseconds(20), bound: 0.010, max: 1 << 30),
        (roundTrip: nil, bound: 0.010, max: 1 << 30),
        (roundTrip: .microseconds(300), bound: 0, max: 1 << 30),
        (roundTrip: .microseconds(300), bound: 0.010, max: 0),
    ] as [(roundTrip: Duration?, bound: TimeInterval, max: Int64)])
    func partsWhileWritten(roundTrip: Duration?, bound: TimeInterval, max: Int64) async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache, streamChunk: 256 << 10, minRoundTrip: bound, singleRequestMax: max))
        h.store.setRoundTrip(roundTrip)
        let content = bytes(1 << 20, seed: 16)
        try await writeInOrder(h, "far.bin", content, streams: true)
        #expect(h.store.requestCount(.streamingStart) == 0)
        #expect(h.store.requestCount(.putRegion) == 4, "one part per 256 KiB chunk")
        #expect(h.store.requestCount(.compose) == 1)
        #expect(h.store.requestCount(.put) == 0)
        #expect(h.store.data(of: "far.bin") == content)
        #expect(try await h.store.stat("far.bin").crc32c == crc32c(content))
        #expect(partNames(h.store).isEmpty)
    }

    @Test func aStreamChunkBelowTheThresholdKeepsTheSingleStream() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        // Files that stream (256 KiB and more) may stay below 2 MiB.
        let h = try Harness(options: Self.options(cache, threshold: 2 << 20, streamChunk: 256 << 10))
        h.store.setRoundTrip(.milliseconds(20))
        let content = bytes(1 << 20, seed: 17)
        try await writeInOrder(h, "small.bin", content, streams: true)
        #expect(h.store.requestCount(.streamingStart) == 1 && h.store.requestCount(.streamingFinish) == 1)
        #expect(h.store.requestCount(.putRegion) == 0 && h.store.requestCount(.compose) == 0)
        #expect(h.store.data(of: "small.bin") == content)
    }

    @Test func moreThan32PartsAreComposedThroughIntermediateObjects() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache, parts: 70, minPart: 1 << 10))
        let content = bytes(70 << 10, seed: 4)
        try await write(h, "many.bin", content)
        #expect(h.store.requestCount(.putRegion) == 70)
        // 70 parts: intermediates of 32, 32 and 6, then the final compose of 3.
        #expect(h.store.requestCount(.compose) == 4)
        #expect(h.store.data(of: "many.bin") == content)
        #expect(try await h.store.stat("many.bin").crc32c == crc32c(content))
        #expect(partNames(h.store).isEmpty, "parts and intermediates deleted: \(partNames(h.store))")
    }

    /// A failure at `operation` fails the close with `errno`, leaves no
    /// object and no part, and keeps the bytes in the recovery folder.
    func expectFailure(at operation: InMemoryObjectStore.Operation, _ error: StoreError, errno: Int32) async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        let content = bytes(100_000, seed: 5)
        h.store.failNext(1, with: error, operations: [operation])
        await expectErrno(errno) { try await write(h, "big.bin", content) }
        #expect(!h.store.objectNames.contains("big.bin"))
        #expect(partNames(h.store).isEmpty, "\(partNames(h.store))")
        let kept = recovered(cache)
        #expect(kept.map(\.entry.object) == ["big.bin"])
        #expect(kept.first.map { FileManager.default.contents(atPath: $0.path) } == content)
    }

    @Test func aFailedPartLeavesNoObjectAndKeepsTheBytes() async throws {
        try await expectFailure(at: .putRegion, .other("500 on one part"), errno: EIO)
    }

    @Test func partsRefusedByPermissionsTurnParallelUploadsOffForTheMount() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        // Credentials allowed to write the mounted names only.
        h.store.setFaultHook { _, name in name.hasPrefix(PathRules.partsPrefix) ? .permissionDenied("403 outside the prefix") : nil }
        let first = bytes(100_000, seed: 13), second = bytes(100_000, seed: 14)
        try await write(h, "first.bin", first)
        try await write(h, "second.bin", second)
        #expect(h.store.data(of: "first.bin") == first && h.store.data(of: "second.bin") == second)
        #expect(h.store.requestCount(.put) == 2, "each a single upload")
        #expect(h.store.requestCount(.compose) == 0)
        #expect(h.store.requestCount(.putRegion) <= 8, "parts tried for the first file only")
        #expect(recovered(cache).isEmpty)
    }

    @Test func aFailedComposeLeavesNoObjectAndKeepsTheBytes() async throws {
        try await expectFailure(at: .compose, .other("500 on compose"), errno: EIO)
    }

    // Checks semantics.md#parallel-uploads
    @Test func anObjectThatChangedBeforeTheUploadIsESTALE() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "big.bin", mode: 0o644, flags: O_WRONLY)
        _ = try await h.fs.write(entry.attributes.inode, handle: open.handle, offset: 0, data: bytes(100_000, seed: 6))
        let theirs = h.store.seed("big.bin", Data("someone else's".utf8))
        await expectErrno(ESTALE) { try await h.fs.flush(entry.attributes.inode, handle: open.handle) }
        try await h.fs.release(entry.attributes.inode, handle: open.handle)
        #expect(h.store.requestCount(.putRegion) == 0, "refused before any part went up")
        #expect(try await h.store.stat("big.bin").generation == theirs.generation)
        #expect(recovered(cache).map(\.entry.object) == ["big.bin"])
    }

    @Test func anObjectThatChangesWhileThePartsGoUpFailsTheComposeWithESTALE() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let inner = InMemoryObjectStore()
        let fs = FileSystem(store: ConflictWhilePartsGoUp(inner: inner), options: Self.options(cache), clock: ManualClock(), mountTime: Date())
        let h = Harness(store: inner, fs: fs, clock: ManualClock())
        let store = inner
        let content = bytes(100_000, seed: 7)
        await expectErrno(ESTALE) { try await write(h, "big.bin", content) }
        #expect(store.requestCount(.compose) == 1)
        #expect(store.data(of: "big.bin") == Data("someone else's".utf8))
        #expect(partNames(store).isEmpty)
        #expect(recovered(cache).map(\.entry.object) == ["big.bin"])
    }

    @Test func aCompositeWithAnotherChecksumIsAFailedUploadAndTakenAway() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let inner = InMemoryObjectStore()
        let store = ChecksumFlippingStore(inner: inner)
        let fs = FileSystem(store: store, options: Self.options(cache), clock: ManualClock(), mountTime: Date())
        let h = Harness(store: inner, fs: fs, clock: ManualClock())
        await expectErrno(EIO) { try await write(h, "big.bin", bytes(100_000, seed: 8)) }
        #expect(!inner.objectNames.contains("big.bin"), "\(inner.objectNames)")
        #expect(partNames(inner).isEmpty)
        #expect(recovered(cache).map(\.entry.object) == ["big.bin"])
    }

    @Test func partsThatCannotBeDeletedAreInStatusUntilTheyAre() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let h = try Harness(options: Self.options(cache))
        let refuse = Atomic<Bool>(true)
        h.store.setFaultHook { operation, name in
            operation == .delete && name.hasPrefix(PathRules.partsPrefix) && refuse.load(ordering: .relaxed)
                ? .permissionDenied("no delete") : nil
        }
        let content = bytes(100_000, seed: 9)
        try await write(h, "big.bin", content)
        #expect(h.store.data(of: "big.bin") == content, "the upload itself succeeded")
        let left = h.fs.status().leftoverParts
        #expect(left.count == 8 && Set(left) == Set(partNames(h.store)), "\(left)")
        refuse.store(false, ordering: .relaxed)
        try await write(h, "second.bin", content)
        #expect(h.fs.status().leftoverParts.isEmpty)
        #expect(partNames(h.store).isEmpty)
    }

    @Test func aBucketWithARetentionPolicyKeepsTheSingleUpload() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let store = InMemoryObjectStore()
        store.setRetentionPeriod(86_400)
        let h = try Harness(options: Self.options(cache), store: store)
        try await write(h, "a.bin", bytes(100_000, seed: 10))
        try await write(h, "b.bin", bytes(100_000, seed: 11))
        #expect(store.requestCount(.put) == 2 && store.requestCount(.putRegion) == 0)
        #expect(store.requestCount(.bucketMetadata) == 1, "asked once per mount")
    }

    @Test func aStoreWithoutComposeKeepsTheSingleUpload() async throws {
        let cache = temporaryDirectory("parallel")
        defer { removeDirectory(cache) }
        let store = InMemoryObjectStore(capabilities: .firebase)
        let h = try Harness(options: Self.options(cache), store: store)
        try await write(h, "a.bin", bytes(100_000, seed: 12))
        #expect(store.requestCount(.put) == 1 && store.requestCount(.putRegion) == 0)
    }

    // Checks semantics.md#parallel-uploads
    @Test func thePartsPrefixIsNeitherListedNorReachable() async throws {
        let h = try Harness()
        h.store.seed(PathRules.partsPrefix + "run/00000", Data("part".utf8))
        h.store.seed("visible.txt", Data("x".utf8))
        let names = try await h.list(InodeTable.root).map(\.name).filter { $0 != "." && $0 != ".." }
        #expect(names == ["visible.txt"])
        await expectErrno(ENOENT) { _ = try await h.fs.lookup(parent: InodeTable.root, name: ".bucketfs-parts") }
        await expectErrno(EINVAL) { _ = try await h.fs.mkdir(parent: InodeTable.root, name: ".bucketfs-parts", mode: 0o755) }
        await expectErrno(EINVAL) {
            _ = try await h.fs.create(parent: InodeTable.root, name: ".bucketfs-parts", mode: 0o644, flags: O_WRONLY)
        }
        #expect(h.store.objectNames == [PathRules.partsPrefix + "run/00000", "visible.txt"])
    }

    @Test func partsSplitTheFileWithoutGapsOrOverlaps() {
        let uploads = ParallelUploads(store: InMemoryObjectStore(), options: Self.options("/nonexistent", parts: 8, minPart: 8 << 20), logger: .init(label: "t"))
        #expect(uploads.partRanges(256 << 20).count == 8)
        #expect(uploads.partRanges(20 << 20).map(\.count) == [10 << 20, 10 << 20], "parts of at least 8 MiB")
        #expect(!uploads.wouldTake(size: (16 << 20) - 1), "one part is no parallel upload")
        #expect(uploads.wouldTake(size: 16 << 20))
        for size: Int64 in [Self.threshold, 100_001, 1 << 30] {
            let ranges = uploads.partRanges(size)
            #expect(ranges.first?.lowerBound == 0 && ranges.last?.upperBound == size)
            #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.upperBound == $1.lowerBound })
        }
    }
}

/// A store in which another writer stores the destination while the
/// first part goes up.
private final class ConflictWhilePartsGoUp: ForwardingStore {
    let inner: InMemoryObjectStore
    let done = Atomic<Bool>(false)

    init(inner: InMemoryObjectStore) {
        self.inner = inner
    }

    func putRegion(_ name: String, from path: String, range: Range<Int64>, crc32c: UInt32, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        if !done.exchange(true, ordering: .relaxed) { inner.seed("big.bin", Data("someone else's".utf8)) }
        return try await inner.putRegion(name, from: path, range: range, crc32c: crc32c, options: options)
    }
}

/// A store whose compose answers another CRC32C than the object has, as a
/// server that composed other bytes would.
private struct ChecksumFlippingStore: ForwardingStore {
    let inner: InMemoryObjectStore

    func compose(_ sources: [String], into destination: String, options: PutOptions, expectedCRC32C: String) async throws(StoreError) -> ObjectInfo {
        var info = try await inner.compose(sources, into: destination, options: options, expectedCRC32C: expectedCRC32C)
        info.crc32c = "AAAAAA=="
        return info
    }
}
