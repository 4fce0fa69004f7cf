import Foundation
import TestSupport
import Testing
@testable import FSCore
import FSCoreTesting

/// A fresh temporary directory, removed by the caller's `defer`.
func temporaryDirectory(_ label: String = "fscore") -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("\(label)-\(UUID().uuidString)").path
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

func removeDirectory(_ path: String) {
    try? FileManager.default.removeItem(atPath: path)
}

/// Deterministic bytes, different for each seed: SplitMix64's stream.
/// (A byte a step, this was the largest use of CPU in a debug build's
/// test process: 11 s of the first 25 s of a full run.)
func bytes(_ count: Int, seed: Int = 0) -> Data {
    var generator = SplitMix64(seed: UInt64(truncatingIfNeeded: seed))
    return GeneratedBytes.random(count, using: &generator)
}

/// A test store that passes every call to `inner`: a conforming type
/// writes only the calls its test changes (flat listings and capabilities
/// keep `ObjectStore`'s defaults unless it writes them too).
protocol ForwardingStore: ObjectStore {
    var inner: InMemoryObjectStore { get }
}

extension ForwardingStore {
    func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage {
        try await inner.list(prefix: prefix, pageToken: pageToken, maxResults: maxResults)
    }

    func stat(_ name: String) async throws(StoreError) -> ObjectInfo { try await inner.stat(name) }

    func read(
        _ name: String, generation: Int64, range: Range<Int64>, into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
    ) async throws(StoreError) -> Int64 {
        try await inner.read(name, generation: generation, range: range, into: sink)
    }

    func put(_ name: String, from path: String?, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try await inner.put(name, from: path, options: options)
    }

    func putInOneRequest(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try await inner.putInOneRequest(name, from: path, options: options)
    }

    var roundTrip: Duration? { inner.roundTrip }

    func startStreamingPut(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        try await inner.startStreamingPut(name, from: path, options: options)
    }

    func startOneRequestStream(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        try await inner.startOneRequestStream(name, from: path, options: options)
    }

    func delete(_ name: String, ifGenerationMatch: Int64?) async throws(StoreError) {
        try await inner.delete(name, ifGenerationMatch: ifGenerationMatch)
    }

    func copy(_ source: String, to destination: String, ifSourceGenerationMatch: Int64?, ifGenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo {
        try await inner.copy(source, to: destination, ifSourceGenerationMatch: ifSourceGenerationMatch, ifGenerationMatch: ifGenerationMatch)
    }

    func patch(_ name: String, _ patch: MetadataPatch, ifMetagenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo {
        try await inner.patch(name, patch, ifMetagenerationMatch: ifMetagenerationMatch)
    }

    func putRegion(_ name: String, from path: String, range: Range<Int64>, crc32c: UInt32, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try await inner.putRegion(name, from: path, range: range, crc32c: crc32c, options: options)
    }

    func compose(_ sources: [String], into destination: String, options: PutOptions, expectedCRC32C: String) async throws(StoreError) -> ObjectInfo {
        try await inner.compose(sources, into: destination, options: options, expectedCRC32C: expectedCRC32C)
    }

    func retentionPeriod() async throws(StoreError) -> Int64? { try await inner.retentionPeriod() }
}

/// A core over an in-memory store, with a manual clock and no mount.
struct Harness {
    let store: InMemoryObjectStore
    let clock: ManualClock
    let fs: FileSystem
    let mountTime: Date

    init(
        options: MountOptions = MountOptions(uid: 1000, gid: 1000), store: InMemoryObjectStore = InMemoryObjectStore(),
        descriptors: (any DescriptorProbe)? = nil
    ) throws {
        self.store = store
        self.clock = ManualClock()
        self.mountTime = Date(timeIntervalSince1970: 1_600_000_000)
        self.fs = FileSystem(store: store, options: options, clock: clock, mountTime: mountTime, descriptors: descriptors)
    }

    /// A harness around a core made elsewhere (another store in front).
    init(store: InMemoryObjectStore, fs: FileSystem, clock: ManualClock) {
        self.store = store
        self.clock = clock
        self.mountTime = Date(timeIntervalSince1970: 1_600_000_000)
        self.fs = fs
    }

    /// Looks up a slash-separated path from the root, one component at a time.
    @discardableResult
    func lookup(_ path: String) async throws -> EntryReply {
        var parent = InodeTable.root
        var reply: EntryReply?
        for component in path.split(separator: "/") {
            reply = try await fs.lookup(parent: parent, name: String(component))
            parent = reply!.attributes.inode
        }
        return reply!
    }

    /// All entries of a directory, as the kernel would page through them.
    func list(_ inode: UInt64) async throws -> [DirectoryEntry] {
        let handle = try await fs.opendir(inode)
        defer { fs.releasedir(inode, handle: handle) }
        var all: [DirectoryEntry] = []
        var offset: Int64 = 0
        while true {
            let batch = try await fs.readdir(inode, handle: handle, offset: offset)
            guard let last = batch.last else { break }
            all += batch
            offset = last.nextOffset
        }
        return all
    }

    /// Reads a whole file through open/read/release, in `chunk`-byte reads.
    func readAll(_ inode: UInt64, chunk: Int = 128 << 10) async throws -> Data {
        let reply = try await fs.open(inode, flags: O_RDONLY)
        var result = Data()
        var offset: Int64 = 0
        while true {
            let part = try await fs.read(inode, handle: reply.handle, offset: offset, size: chunk)
            if part.isEmpty { break }
            result += part
            offset += Int64(part.count)
        }
        try await fs.release(inode, handle: reply.handle)
        return result
    }
}

/// Asserts that `body` fails with errno `expected`.
func expectErrno(_ expected: Int32, sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async {
    do {
        try await body()
        Issue.record("expected errno \(expected), got success", sourceLocation: sourceLocation)
    } catch let error as FSError {
        #expect(error.errno == expected, "\(error)", sourceLocation: sourceLocation)
    } catch {
        Issue.record("expected FSError, got \(error)", sourceLocation: sourceLocation)
    }
}

/// Expects `walked` (what a walk completed for `listed`) to say what a
/// delimited listing of `listed` in `store` says: the same prefixes, items
/// and placeholders. Returns the delimited listing's prefixes, for the
/// caller's walk through the tree.
func expectWalked(
    _ walked: ListingCache.Listing?, asListed listed: String, in store: some ObjectStore
) async throws -> [String] {
    var prefixes: [String] = []
    var items: [String] = []
    var placeholders: [String: ObjectInfo] = [:]
    try await store.listPages(prefix: listed, after: nil, maxResults: 1000) { page in
        prefixes += page.prefixes
        items += page.items.map(\.name)
        placeholders.merge(page.placeholders) { _, later in later }
    }
    let walked = try #require(walked, "no listing for \(listed)")
    #expect(Set(walked.prefixes) == Set(prefixes), "prefixes of \(listed)")
    #expect(Set(walked.items.keys) == Set(items), "items of \(listed)")
    #expect(walked.placeholders == placeholders, "placeholders of \(listed)")
    return prefixes
}
