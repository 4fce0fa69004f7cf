import Foundation
import Testing
@testable import FSCore
import FSCoreTesting

/// A file written in order far from the store goes up as parts while it
/// is written (`PartsStream`), over the in-memory store: the parts leave
/// before the close, the close composes with its own metadata, and a part
/// that fails, a write elsewhere or a conflict end as a single upload
/// would. Parts are 256 KiB (the stream chunk) so files stay small.
@Suite struct PartsStreamTests {
    static let chunk: Int64 = 256 << 10

    /// A far store (the round trip not measured yet), parts of `chunk`.
    func harness(_ cache: String) throws -> Harness {
        try Harness(options: ParallelUploadTests.options(cache, streamChunk: Self.chunk))
    }

    func partNames(_ store: InMemoryObjectStore) -> [String] {
        store.objectNames.filter { $0.hasPrefix(PathRules.partsPrefix) }
    }

    /// Writes `content` at `offset` in 64 KiB writes, in order.
    func write(_ h: Harness, _ inode: UInt64, _ handle: UInt64, _ slice: Data, at offset: Int64 = 0) async throws {
        let content = Data(slice)  // indices from 0, whatever slice it was
        var done = 0
        while done < content.count {
            let piece = content[done..<min(content.count, done + (64 << 10))]
            _ = try await h.fs.write(inode, handle: handle, offset: offset + Int64(done), data: Data(piece))
            done += piece.count
        }
    }

    func waitFor(_ what: String, _ condition: () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
        #expect(condition(), "timed out waiting: \(what)")
    }

    /// Creates `name`, writes its first chunk of `content` and waits until
    /// that chunk is stored as a part: the stream is under way.
    func startWriting(_ h: Harness, _ name: String, _ content: Data) async throws -> (inode: UInt64, handle: UInt64) {
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: name, mode: 0o644, flags: O_WRONLY)
        try await write(h, entry.attributes.inode, open.handle, content.prefix(Int(Self.chunk)))
        try await waitFor("the first part stored") { partNames(h.store).count == 1 }
        return (entry.attributes.inode, open.handle)
    }

    // Checks semantics.md#parallel-uploads
    @Test func partsLeaveWhileTheFileIsWrittenAndTheCloseComposesThem() async throws {
        let cache = temporaryDirectory("parts-stream")
        defer { removeDirectory(cache) }
        let h = try harness(cache)
        let content = bytes(Int(Self.chunk) * 3 + 1000, seed: 21)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "out.bin", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        try await write(h, inode, open.handle, content.prefix(Int(Self.chunk) * 2))
        try await waitFor("two parts stored before the close") { partNames(h.store).count == 2 }
        #expect(h.store.requestCount(.compose) == 0 && !h.store.objectNames.contains("out.bin"), "nothing visible before the close")
        try await write(h, inode, open.handle, content.dropFirst(Int(Self.chunk) * 2), at: Self.chunk * 2)
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.requestCount(.putRegion) == 4, "three chunks and the tail")
        #expect(h.store.requestCount(.compose) == 1)
        #expect(h.store.requestCount(.put) == 0 && h.store.requestCount(.streamingStart) == 0)
        #expect(h.store.data(of: "out.bin") == content)
        #expect(partNames(h.store).isEmpty, "\(partNames(h.store))")
    }

    @Test func metadataSetWhileThePartsGoUpIsOnTheComposedObjectWithoutAPatch() async throws {
        let cache = temporaryDirectory("parts-stream")
        defer { removeDirectory(cache) }
        let h = try harness(cache)
        let content = bytes(Int(Self.chunk) * 2 + 10, seed: 22)
        let (inode, handle) = try await startWriting(h, "tagged.bin", content)
        try await h.fs.setxattr(inode, name: "user.colour", value: Data("blue".utf8), flags: 0)
        try await write(h, inode, handle, content.dropFirst(Int(Self.chunk)), at: Self.chunk)
        try await h.fs.flush(inode, handle: handle)
        try await h.fs.release(inode, handle: handle)
        #expect(h.store.data(of: "tagged.bin") == content)
        #expect(try await h.store.stat("tagged.bin").customMetadata["colour"] == "blue")
        #expect(h.store.requestCount(.patch) == 0)
    }

    /// Finished like any streaming put (no options at the close), the
    /// compose stores the metadata the stream started with; given the
    /// close's, it stores those, and says so (no patch to follow).
    @Test func aPartsStreamComposesWithTheStartOptionsUnlessGivenTheClosesOnes() async throws {
        let cache = temporaryDirectory("parts-stream")
        defer { removeDirectory(cache) }
        let store = InMemoryObjectStore()
        let uploads = ParallelUploads(store: store, options: ParallelUploadTests.options(cache), logger: .init(label: "t"))
        let path = cache + "/staged"
        let content = bytes(Int(Self.chunk) * 2 + 5, seed: 23)
        try content.write(to: URL(fileURLWithPath: path))
        let atStart = PutOptions(customMetadata: ["colour": "red"])
        let first = try await PartsStream.start("first.bin", from: path, options: atStart, uploads: uploads, partSize: Self.chunk)
        #expect(first.storesOptionsAtFinish)
        try await first.send(upTo: Self.chunk)
        _ = try await first.finish(size: Int64(content.count))
        #expect(try await store.stat("first.bin").customMetadata["colour"] == "red")
        let second = try await PartsStream.start("second.bin", from: path, options: atStart, uploads: uploads, partSize: Self.chunk)
        _ = try await second.finish(size: Int64(content.count), options: PutOptions(customMetadata: ["colour": "blue"]))
        #expect(try await store.stat("second.bin").customMetadata["colour"] == "blue")
        #expect(store.data(of: "first.bin") == content && store.data(of: "second.bin") == content)
        #expect(partNames(store).isEmpty, "\(partNames(store))")
    }

    @Test func aPartThatFailsEndsTheStreamAndTheCloseUploadsTheWholeFile() async throws {
        let cache = temporaryDirectory("parts-stream")
        defer { removeDirectory(cache) }
        let h = try harness(cache)
        h.store.failNext(1, with: .other("500 on a part"), operations: [.putRegion])
        let content = bytes(Int(Self.chunk) * 3, seed: 23)
        try await ParallelUploadTests().writeInOrder(h, "retried.bin", content, streams: true)
        #expect(h.store.data(of: "retried.bin") == content)
        #expect(h.store.requestCount(.compose) == 1, "the close's own parallel upload")
        #expect(partNames(h.store).isEmpty, "\(partNames(h.store))")
        #expect(ParallelUploadTests().recovered(cache).isEmpty)
    }

    @Test func aWriteElsewhereAbandonsTheStreamAndDeletesItsParts() async throws {
        let cache = temporaryDirectory("parts-stream")
        defer { removeDirectory(cache) }
        let h = try harness(cache)
        var content = bytes(Int(Self.chunk) * 2, seed: 24)
        let (entry, open) = try await h.fs.create(parent: InodeTable.root, name: "edited.bin", mode: 0o644, flags: O_WRONLY)
        let inode = entry.attributes.inode
        try await write(h, inode, open.handle, content)
        try await waitFor("parts stored") { partNames(h.store).count == 2 }
        let patch = Data("patched".utf8)
        _ = try await h.fs.write(inode, handle: open.handle, offset: 100, data: patch)
        content.replaceSubrange(100..<(100 + patch.count), with: patch)
        try await waitFor("the abandoned stream's parts deleted") { partNames(h.store).isEmpty }
        try await h.fs.flush(inode, handle: open.handle)
        try await h.fs.release(inode, handle: open.handle)
        #expect(h.store.data(of: "edited.bin") == content)
        #expect(partNames(h.store).isEmpty, "\(partNames(h.store))")
    }

    // Checks semantics.md#parallel-uploads
    @Test func anObjectReplacedWhileThePartsGoUpIsESTALEAndTheirsStays() async throws {
        let cache = temporaryDirectory("parts-stream")
        defer { removeDirectory(cache) }
        let h = try harness(cache)
        let content = bytes(Int(Self.chunk) * 2 + 5, seed: 25)
        let (inode, handle) = try await startWriting(h, "raced.bin", content)
        let theirs = h.store.seed("raced.bin", Data("someone else's".utf8))
        try await write(h, inode, handle, content.dropFirst(Int(Self.chunk)), at: Self.chunk)
        await expectErrno(ESTALE) { try await h.fs.flush(inode, handle: handle) }
        try await h.fs.release(inode, handle: handle)
        #expect(try await h.store.stat("raced.bin").generation == theirs.generation)
        #expect(partNames(h.store).isEmpty, "\(partNames(h.store))")
        #expect(ParallelUploadTests().recovered(cache).map(\.entry.object) == ["raced.bin"])
    }
}
