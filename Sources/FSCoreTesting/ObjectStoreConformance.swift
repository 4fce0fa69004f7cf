import Foundation
import FSCore
import StorageKit
import Synchronization

/// Expectations every `ObjectStore` must meet, runnable against the
/// in-memory store (unit tests) and the real one (over the emulator), so
/// the fake stays honest. It does not depend on a test framework: `run`
/// throws a `Failure` naming the first expectation that did not hold.
///
/// Everything is written below `prefix` (e.g. "conformance-<uuid>/"),
/// which should be empty, and deleted at the end. Preconditions are not
/// checked here: the emulator ignores them (test them per store).
public enum ObjectStoreConformance {
    public struct Failure: Error, CustomStringConvertible {
        public var expectation: String
        public var detail: String
        public var description: String { "conformance: \(expectation): \(detail)" }
    }

    public struct Options: Sendable {
        /// Whether pages must respect `maxResults` (the emulator returns
        /// everything in one page and no token).
        public var checksPageSize: Bool
        /// Whether `maxResults` bounds items and prefixes together, as Cloud
        /// Storage documents ("maximum combined number of entries in items[]
        /// and prefixes[]", objects/list); false: it bounds the items only.
        public var pageSizeCountsPrefixes: Bool

        /// Whether a patch that sets a custom key to null deletes it, as
        /// Cloud Storage does; false: the key stays with an empty value.
        public var patchDeletesNullKeys: Bool
        /// Whether a patch raises the metageneration, as Cloud Storage
        /// does; false: it stays (the generation must still stay).
        public var patchRaisesMetageneration: Bool
        /// Whether a part sent with another CRC32C than its bytes' is
        /// refused, as Cloud Storage does; false: it is stored.
        public var refusesWrongChecksums: Bool

        public init(
            checksPageSize: Bool = true, pageSizeCountsPrefixes: Bool = true, patchDeletesNullKeys: Bool = true,
            patchRaisesMetageneration: Bool = true, refusesWrongChecksums: Bool = true
        ) {
            self.checksPageSize = checksPageSize
            self.pageSizeCountsPrefixes = pageSizeCountsPrefixes
            self.patchDeletesNullKeys = patchDeletesNullKeys
            self.patchRaisesMetageneration = patchRaisesMetageneration
            self.refusesWrongChecksums = refusesWrongChecksums
        }
    }

    public static func run(_ store: any ObjectStore, prefix: String, options: Options = Options()) async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("conformance-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        var created: Set<String> = []
        do {
            try await objects(store, prefix, scratch, options, &created)
            try await layout(store, prefix, &created)
            try await paging(store, prefix, options, &created)
            try await streaming(store, prefix, scratch, &created)
            try await oneRequest(store, prefix, scratch, &created)
            try await oneRequestStream(store, prefix, scratch, &created)
            if store.capabilities.compose { try await composition(store, prefix, scratch, options, &created) }
        } catch {
            for name in created { try? await store.delete(name, ifGenerationMatch: nil) }
            throw error
        }
        for name in created { try? await store.delete(name, ifGenerationMatch: nil) }
    }

    // MARK: - put, stat, read, generations, copy, patch, delete

    private static func objects(
        _ store: any ObjectStore, _ prefix: String, _ scratch: String, _ options: Options, _ created: inout Set<String>
    ) async throws {
        let name = prefix + "object.bin"
        let first = pattern(300_000, seed: 1)
        let v1 = try await put(store, name, first, scratch, contentType: "application/x-conformance", metadata: ["color": "blue", "goog-reserved-file-mtime": "1700000000"])
        created.insert(name)
        try expect("put reports the name", v1.name == name, "\(v1.name)")
        try expect("put reports the size", v1.size == Int64(first.count), "\(v1.size)")
        try expect("put reports a generation", v1.generation > 0, "\(v1.generation)")

        let stat = try await store.stat(name)
        try expect("stat returns the put generation", stat.generation == v1.generation, "\(stat.generation) vs \(v1.generation)")
        try expect("stat returns the size", stat.size == Int64(first.count), "\(stat.size)")
        try expect("stat returns the content type", stat.contentType == "application/x-conformance", "\(stat.contentType ?? "nil")")
        try expect("stat returns custom metadata", stat.customMetadata["color"] == "blue" && stat.customMetadata["goog-reserved-file-mtime"] == "1700000000", "\(stat.customMetadata)")
        try await expectError("stat of a missing object is notFound", { _ = try await store.stat(prefix + "missing") }, isNotFound)

        for range: Range<Int64> in [0..<300_000, 0..<1, 100..<200, 65_530..<70_000, 299_990..<300_000] {
            let bytes = try await read(store, name, v1.generation, range)
            try expect("read \(range) returns those bytes", bytes == first[Int(range.lowerBound)..<Int(range.upperBound)], "\(bytes.count) bytes")
        }
        let tail = try await read(store, name, v1.generation, 299_990..<300_100)
        try expect("a read past the end returns the bytes up to it", tail == first[299_990...], "\(tail.count) bytes")

        let second = pattern(1_000, seed: 2)
        let v2 = try await put(store, name, second, scratch, contentType: nil, metadata: [:])
        try expect("a new put makes a new generation", v2.generation != v1.generation, "\(v2.generation)")
        try expect("the new generation has the new size", v2.size == 1_000, "\(v2.size)")
        let current = try await read(store, name, v2.generation, 0..<1_000)
        try expect("read of the live generation", current == second, "\(current.count) bytes")
        try await expectError("read of a replaced generation is notFound", { _ = try await read(store, name, v1.generation, 0..<10) }, isNotFound)

        let empty = prefix + "empty"
        let e = try await store.put(empty, from: nil, options: PutOptions())
        created.insert(empty)
        let emptyStat = try await store.stat(empty)
        try expect("an empty object has size 0", e.size == 0 && emptyStat.size == 0, "\(e.size) \(emptyStat.size)")

        let copyName = prefix + "copy.bin"
        _ = try await store.patch(name, patchOf(["k": "v"], contentType: "text/x-copied"), ifMetagenerationMatch: nil)
        let copied = try await store.copy(name, to: copyName, ifSourceGenerationMatch: nil, ifGenerationMatch: nil)
        created.insert(copyName)
        try expect("copy reports the destination", copied.name == copyName && copied.size == 1_000, "\(copied.name) \(copied.size)")
        let copyStat = try await store.stat(copyName)
        try expect("copy keeps content type and custom metadata", copyStat.contentType == "text/x-copied" && copyStat.customMetadata["k"] == "v", "\(copyStat.contentType ?? "nil") \(copyStat.customMetadata)")
        let copyBytes = try await read(store, copyName, copyStat.generation, 0..<1_000)
        try expect("copy has the source's bytes", copyBytes == second, "\(copyBytes.count) bytes")

        let before = try await store.stat(name)
        let patched = try await store.patch(name, patchOf(["k": nil, "added": "1"], contentType: "text/plain"), ifMetagenerationMatch: nil)
        let after = try await store.stat(name)
        let deleted: String? = options.patchDeletesNullKeys ? nil : ""
        try expect("patch reports the change", patched.customMetadata["added"] == "1" && patched.customMetadata["k"] == deleted, "\(patched.customMetadata)")
        try expect("patch with nil deletes the key and keeps the rest", after.customMetadata["k"] == deleted && after.customMetadata["added"] == "1", "\(after.customMetadata)")
        try expect("patch changes the content type", after.contentType == "text/plain", "\(after.contentType ?? "nil")")
        let metagenerationRaised = options.patchRaisesMetageneration ? after.metageneration > before.metageneration : after.metageneration == before.metageneration
        try expect("patch raises the metageneration, not the generation", metagenerationRaised && after.generation == before.generation, "meta \(before.metageneration)→\(after.metageneration), gen \(before.generation)→\(after.generation)")

        try await store.delete(copyName, ifGenerationMatch: nil)
        created.remove(copyName)
        try await expectError("stat after delete is notFound", { _ = try await store.stat(copyName) }, isNotFound)
        try await expectError("delete of a missing object is notFound", { try await store.delete(copyName, ifGenerationMatch: nil) }, isNotFound)
    }

    // MARK: - The seeds' example: prefixes, placeholders, bad names

    private static func layout(_ store: any ObjectStore, _ prefix: String, _ created: inout Set<String>) async throws {
        let base = prefix + "layout/"
        for name in ["correctPrefix/happyItem", "wrongPrefix//sadItem", "lonelyItem/"] {
            _ = try await store.put(base + name, from: nil, options: PutOptions())
            created.insert(base + name)
        }
        let root = try await listAll(store, base)
        try expect("the root lists three prefixes", Set(root.prefixes) == [base + "correctPrefix/", base + "lonelyItem/", base + "wrongPrefix/"] && root.prefixes.count == 3, "\(root.prefixes)")
        try expect("the root lists no items", root.items.isEmpty, "\(root.items.map(\.name))")
        try expect("a placeholder object is reported for its prefix", root.placeholderPrefixes == [base + "lonelyItem/"], "\(root.placeholderPrefixes)")

        let correct = try await listAll(store, base + "correctPrefix/")
        try expect("correctPrefix/ lists one item", correct.items.map(\.name) == [base + "correctPrefix/happyItem"] && correct.prefixes.isEmpty, "\(correct.items.map(\.name)) \(correct.prefixes)")

        let wrong = try await listAll(store, base + "wrongPrefix/")
        try expect("wrongPrefix/ lists nothing (wrongPrefix// has an empty segment)", wrong.items.isEmpty && wrong.prefixes.isEmpty, "\(wrong.items.map(\.name)) \(wrong.prefixes)")

        let lonely = try await listAll(store, base + "lonelyItem/")
        try expect("lonelyItem/ lists nothing (its placeholder is not an item)", lonely.items.isEmpty && lonely.prefixes.isEmpty, "\(lonely.items.map(\.name)) \(lonely.prefixes)")

        let placeholder = try await store.stat(base + "lonelyItem/")
        try expect("a placeholder can be read with stat", placeholder.name == base + "lonelyItem/" && placeholder.size == 0, "\(placeholder.name)")
        let missing = try await listAll(store, base + "nothingHere/")
        try expect("a prefix with nothing under it lists nothing", missing.items.isEmpty && missing.prefixes.isEmpty, "\(missing)")
    }

    // MARK: - Paging

    private static func paging(_ store: any ObjectStore, _ prefix: String, _ options: Options, _ created: inout Set<String>) async throws {
        let base = prefix + "pages/"
        let items = (0..<7).map { base + "item\($0)" }
        let dirs = ["d1/x", "d1/y", "d2/z"].map { base + $0 }
        for name in items + dirs {
            _ = try await store.put(name, from: nil, options: PutOptions())
            created.insert(name)
        }
        var seenItems: [String] = []
        var seenPrefixes: [String] = []
        var token: String?
        var pages = 0
        repeat {
            let page = try await store.list(prefix: base, pageToken: token, maxResults: 3)
            pages += 1
            if options.checksPageSize {
                let entries = page.items.count + (options.pageSizeCountsPrefixes ? page.prefixes.count : 0)
                try expect("a page holds at most maxResults entries", entries <= 3, "\(page.items.count) items, \(page.prefixes.count) prefixes")
            }
            seenItems += page.items.map(\.name)
            seenPrefixes += page.prefixes
            token = page.nextPageToken
            try expect("paging ends", pages <= 20, "more than 20 pages")
        } while token != nil
        if options.checksPageSize {
            try expect("9 entries in pages of 3 take at least 3 pages", pages >= 3, "\(pages) pages")
        }
        try expect("pages together list every item once", seenItems.sorted() == items.sorted(), "\(seenItems)")
        try expect("pages together list every prefix once", seenPrefixes.sorted() == [base + "d1/", base + "d2/"], "\(seenPrefixes)")
    }

    // MARK: - Streaming puts of a file still being written

    private static func streaming(_ store: any ObjectStore, _ prefix: String, _ scratch: String, _ created: inout Set<String>) async throws {
        let name = prefix + "streamed.bin"
        let path = scratch + "/streaming"
        let old = try await put(store, name, Data("old".utf8), scratch, contentType: nil, metadata: [:])
        created.insert(name)
        try Data().write(to: URL(fileURLWithPath: path))
        let upload = try await store.startStreamingPut(
            name, from: path, options: PutOptions(contentType: "application/x-streamed", customMetadata: ["k": "v"]))
        let g = upload.granularity
        try expect("the granularity is 256 KiB", g == 256 * 1024, "\(g)")
        try expect("nothing is acknowledged at the start", upload.acknowledged == 0, "\(upload.acknowledged)")
        let data = pattern(Int(2 * g) + 12_345, seed: 3)
        try append(data[0..<Int(g) + 100], to: path)
        try await upload.send(upTo: g)
        try expect("send acknowledges up to its end", upload.acknowledged == g, "\(upload.acknowledged)")
        try await expectError(
            "a send whose end is not a multiple of the granularity is invalidArgument", { try await upload.send(upTo: g + 100) },
            isInvalidArgument)
        let during = try await store.stat(name)
        try expect("the object stays as it was until finish", during.generation == old.generation && during.size == 3, "\(during.generation) \(during.size)")
        try append(data[(Int(g) + 100)...], to: path)
        try await upload.send(upTo: 2 * g)
        // The store has the bytes once send returns: a later change to the
        // file does not reach the object.
        try overwrite(path, with: Data(repeating: 0, count: 100))
        let info = try await upload.finish(size: Int64(data.count))
        try expect("finish reports the name and size", info.name == name && info.size == Int64(data.count), "\(info.name) \(info.size)")
        try expect("finish makes a new generation", info.generation != old.generation, "\(info.generation)")
        let stat = try await store.stat(name)
        try expect("stat returns the streamed generation and size", stat.generation == info.generation && stat.size == Int64(data.count), "\(stat.generation) \(stat.size)")
        try expect("a streamed object has the put's type and metadata", stat.contentType == "application/x-streamed" && stat.customMetadata == ["k": "v"], "\(stat.contentType ?? "nil") \(stat.customMetadata)")
        let bytes = try await read(store, name, info.generation, 0..<Int64(data.count))
        try expect("a streamed object holds the bytes as they were sent", bytes == data, "\(bytes.count) bytes")

        let emptyName = prefix + "streamed-empty"
        created.insert(emptyName)
        try Data().write(to: URL(fileURLWithPath: path))
        let empty = try await store.startStreamingPut(emptyName, from: path, options: PutOptions()).finish(size: 0)
        let emptyStat = try await store.stat(emptyName)
        try expect("a streamed empty object has size 0", empty.size == 0 && emptyStat.size == 0, "\(empty.size) \(emptyStat.size)")

        let exactName = prefix + "streamed-exact"
        created.insert(exactName)
        let exact = pattern(Int(g), seed: 4)
        try exact.write(to: URL(fileURLWithPath: path))
        let exactUpload = try await store.startStreamingPut(exactName, from: path, options: PutOptions())
        try await exactUpload.send(upTo: g)
        let exactInfo = try await exactUpload.finish(size: g)
        let exactBytes = try await read(store, exactName, exactInfo.generation, 0..<g)
        try expect("a finish with nothing left to send completes the object", exactInfo.size == g && exactBytes == exact, "\(exactInfo.size) \(exactBytes.count)")

        let abandonedName = prefix + "streamed-abandoned"
        created.insert(abandonedName)
        let abandoned = try await store.startStreamingPut(abandonedName, from: path, options: PutOptions())
        try await abandoned.send(upTo: g)
        await abandoned.abandon()
        try await expectError("an abandoned streaming put leaves no object", { _ = try await store.stat(abandonedName) }, isNotFound)
    }

    /// A put in one request whatever the size (a near store's upload at
    /// close): the same object a `put` makes, above the 8 MiB at which a
    /// `put` turns resumable (its precondition: `ObjectStoreConformanceTests`,
    /// as the emulator ignores preconditions).
    private static func oneRequest(_ store: any ObjectStore, _ prefix: String, _ scratch: String, _ created: inout Set<String>) async throws {
        let name = prefix + "one-request.bin"
        let path = scratch + "/one-request"
        let data = pattern((9 << 20) + 4321, seed: 6)
        try data.write(to: URL(fileURLWithPath: path))
        created.insert(name)
        let info = try await store.putInOneRequest(name, from: path, options: PutOptions(contentType: "application/x-one", customMetadata: ["k": "v"]))
        try expect("a put in one request reports the name and size", info.name == name && info.size == Int64(data.count), "\(info.name) \(info.size)")
        let stat = try await store.stat(name)
        try expect("it has the put's type and metadata", stat.contentType == "application/x-one" && stat.customMetadata == ["k": "v"], "\(stat.contentType ?? "nil") \(stat.customMetadata)")
        let bytes = try await read(store, name, info.generation, 0..<Int64(data.count))
        try expect("it holds the file's bytes", bytes == data, "\(bytes.count) bytes")
    }

    /// One request whose body follows a file as it is written (a near
    /// store's upload of a file written in order): the object appears only
    /// when it finishes, with every byte, the put's type and metadata;
    /// abandoned, it leaves nothing. A store that cannot refuses at once.
    private static func oneRequestStream(_ store: any ObjectStore, _ prefix: String, _ scratch: String, _ created: inout Set<String>) async throws {
        let name = prefix + "one-request-stream.bin"
        let path = scratch + "/one-request-stream"
        try Data().write(to: URL(fileURLWithPath: path))
        guard store.capabilities.oneRequestStreams else {
            try await expectError("a store without one-request streams refuses one at once", {
                _ = try await store.startOneRequestStream(name, from: path, options: PutOptions())
            }, isInvalidArgument)
            return
        }
        created.insert(name)
        let old = try await put(store, name, Data("old".utf8), scratch, contentType: nil, metadata: [:])
        let data = pattern((3 << 20) + 777, seed: 7)
        let upload = try await store.startOneRequestStream(
            name, from: path, options: PutOptions(contentType: "application/x-growing", customMetadata: ["k": "v"]))
        try expect("any end may be sent", upload.granularity == 1, "\(upload.granularity)")
        var written = 0
        for end in [1, 1 << 20, (2 << 20) + 5, data.count] {
            try append(data[written..<end], to: path)
            written = end
            try await upload.send(upTo: Int64(end))
            try await Task.sleep(for: .milliseconds(50))
        }
        let during = try await store.stat(name)
        try expect("the object stays as it was until finish", during.generation == old.generation && during.size == 3, "\(during.generation) \(during.size)")
        let info = try await upload.finish(size: Int64(data.count))
        try expect("finish reports the name, size and a new generation",
                   info.name == name && info.size == Int64(data.count) && info.generation != old.generation, "\(info.name) \(info.size)")
        let stat = try await store.stat(name)
        try expect("it has the put's type and metadata", stat.contentType == "application/x-growing" && stat.customMetadata == ["k": "v"],
                   "\(stat.contentType ?? "nil") \(stat.customMetadata)")
        let bytes = try await read(store, name, info.generation, 0..<Int64(data.count))
        try expect("it holds the file's bytes", bytes == data, "\(bytes.count) bytes")

        let abandonedName = prefix + "one-request-stream-abandoned"
        created.insert(abandonedName)
        let abandoned = try await store.startOneRequestStream(abandonedName, from: path, options: PutOptions())
        try await abandoned.send(upTo: 1 << 20)
        try await Task.sleep(for: .milliseconds(100))
        await abandoned.abandon()
        try await Task.sleep(for: .milliseconds(200))
        try await expectError("an abandoned one-request stream leaves no object", { _ = try await store.stat(abandonedName) }, isNotFound)
    }

    /// Parts from regions of a file, composed (`ParallelUploads`).
    private static func composition(
        _ store: any ObjectStore, _ prefix: String, _ scratch: String, _ options: Options, _ created: inout Set<String>
    ) async throws {
        let path = scratch + "/regions"
        let data = pattern(300_000, seed: 5)
        try data.write(to: URL(fileURLWithPath: path))
        let ranges: [Range<Int64>] = [0..<100_000, 100_000..<300_000]
        var parts: [String] = []
        var whole = CRC32C().value
        for (index, range) in ranges.enumerated() {
            let name = prefix + "part-\(index)"
            let crc = try CRC32C.of(file: path, range: range)
            created.insert(name)
            let part = try await store.putRegion(name, from: path, range: range, crc32c: crc, options: PutOptions(ifGenerationMatch: 0))
            try expect("a region's object has its size and CRC32C", part.size == Int64(range.count) && part.crc32c == CRC32C.base64(crc), "\(part.size) \(part.crc32c ?? "nil")")
            let bytes = try await read(store, name, part.generation, 0..<Int64(range.count))
            try expect("a region's object holds those bytes", bytes == data.subdata(in: Int(range.lowerBound)..<Int(range.upperBound)), "\(bytes.count) bytes")
            whole = CRC32C.combine(whole, crc, lengthOfSecond: Int64(range.count))
            parts.append(name)
        }
        if options.refusesWrongChecksums {
            let wrong = prefix + "part-wrong"
            created.insert(wrong)
            try await expectError("a region with another CRC32C is refused", {
                _ = try await store.putRegion(wrong, from: path, range: 0..<10, crc32c: 0, options: PutOptions())
            }, { _ in true })
        }
        let name = prefix + "composed.bin"
        created.insert(name)
        let composed = try await store.compose(
            parts, into: name, options: PutOptions(contentType: "application/x-composed", customMetadata: ["k": "v"], ifGenerationMatch: 0),
            expectedCRC32C: CRC32C.base64(whole))
        try expect("a composite has the sources' bytes' size and CRC32C", composed.size == Int64(data.count) && composed.crc32c == CRC32C.base64(whole), "\(composed.size) \(composed.crc32c ?? "nil")")
        let stat = try await store.stat(name)
        try expect("a composite has the compose's type and metadata", stat.contentType == "application/x-composed" && stat.customMetadata == ["k": "v"], "\(stat.contentType ?? "nil") \(stat.customMetadata)")
        let bytes = try await read(store, name, composed.generation, 0..<Int64(data.count))
        try expect("a composite holds its sources' bytes in order", bytes == data, "\(bytes.count) bytes")
        try await expectError("a compose of a missing source fails", {
            _ = try await store.compose([prefix + "no-such-part"], into: prefix + "never", options: PutOptions(), expectedCRC32C: "")
        }, { _ in true })
        try await expectError("a failed compose makes no object", { _ = try await store.stat(prefix + "never") }, isNotFound)
    }

    // MARK: - Helpers

    private static func expect(_ expectation: String, _ condition: Bool, _ detail: @autoclosure () -> String) throws {
        if !condition { throw Failure(expectation: expectation, detail: detail()) }
    }

    private static func expectError(_ expectation: String, _ body: () async throws -> Void, _ matches: (any Error) -> Bool) async throws {
        do {
            try await body()
        } catch {
            if matches(error) { return }
            throw Failure(expectation: expectation, detail: "failed with \(error)")
        }
        throw Failure(expectation: expectation, detail: "succeeded")
    }

    private static func isNotFound(_ error: any Error) -> Bool {
        if case .notFound? = error as? StoreError { return true }
        return false
    }

    private static func isInvalidArgument(_ error: any Error) -> Bool {
        if case .invalidArgument? = error as? StoreError { return true }
        return false
    }

    private static func append(_ data: Data, to path: String) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
    }

    /// Replaces the file's first bytes with `data`.
    private static func overwrite(_ path: String, with data: Data) throws {
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.write(contentsOf: data)
    }

    private static func pattern(_ count: Int, seed: UInt8) -> Data {
        // A loop, not `(0..<count).map`: about 14 times faster in a debug
        // build, where this made megabytes for every conformance run.
        var bytes = [UInt8](repeating: 0, count: count)
        for i in 0..<count { bytes[i] = UInt8(truncatingIfNeeded: i &* 31 &+ Int(seed) &* 7 &+ i >> 8) }
        return Data(bytes)
    }

    private static func put(_ store: any ObjectStore, _ name: String, _ data: Data, _ scratch: String, contentType: String?, metadata: [String: String]) async throws -> ObjectInfo {
        let path = scratch + "/upload"
        try data.write(to: URL(fileURLWithPath: path))
        return try await store.put(name, from: path, options: PutOptions(contentType: contentType, customMetadata: metadata))
    }

    private static func read(_ store: any ObjectStore, _ name: String, _ generation: Int64, _ range: Range<Int64>) async throws -> Data {
        let received = Mutex(Data())
        let count = try await store.read(name, generation: generation, range: range) { bytes in
            received.withLock { $0.append(contentsOf: bytes) }
        }
        let data = received.withLock { $0 }
        try expect("read returns the count of bytes it delivered", count == Int64(data.count), "\(count) vs \(data.count)")
        return data
    }

    private static func listAll(_ store: any ObjectStore, _ prefix: String) async throws -> ListPage {
        var all = ListPage(prefixes: [], items: [])
        var token: String?
        repeat {
            let page = try await store.list(prefix: prefix, pageToken: token, maxResults: 1000)
            all.prefixes += page.prefixes
            all.items += page.items
            all.placeholders.merge(page.placeholders) { _, later in later }
            token = page.nextPageToken
        } while token != nil
        return all
    }

    private static func patchOf(_ custom: [String: String?], contentType: String?) -> MetadataPatch {
        var patch = MetadataPatch()
        patch.customMetadata = custom
        if let contentType { patch.contentType = .some(contentType) }
        return patch
    }
}
