import Foundation
import FSCore
import StorageKit
import Synchronization

/// A complete `ObjectStore` in memory, for tests of the core and of the
/// modules above it. It follows Cloud Storage where the core depends on
/// it: lexicographic (UTF-8 byte) order, real paging by `maxResults` and
/// `pageToken` (items and prefixes both count), the delimiter and
/// placeholder rules of `ListPage`, increasing generations,
/// metagenerations, preconditions, and reads pinned to a generation.
///
/// Tests also get request counters per operation (to assert "no
/// per-object request") and fault injection (`failNext`, `faultHook`).
/// `ObjectStoreConformance` runs against it and against the real store.
public final class InMemoryObjectStore: ObjectStore {
    public enum Operation: String, Sendable, CaseIterable {
        case list, stat, read, put, delete, copy, patch
        /// `put` in one request whatever the size (`putInOneRequest`).
        case putInOneRequest
        /// A listing without delimiter (`listFlat`).
        case listFlat
        /// The calls of a streaming put: its start, each `send`, `finish`.
        case streamingStart, streamingSend, streamingFinish
        /// A single-request upload of a growing file
        /// (`startOneRequestStream`), counted when it ends, as the object
        /// is stored then.
        case oneRequestStream
        /// A part of a parallel upload (`putRegion`), and `compose`.
        case putRegion, compose
        /// `retentionPeriod` (the bucket's metadata).
        case bucketMetadata
    }

    /// Decides whether a call fails: given the operation and the object
    /// name (or listed prefix), return an error to throw, or nil.
    public typealias FaultHook = @Sendable (Operation, String) -> StoreError?

    private struct Object: Sendable {
        var info: ObjectInfo
        var data: Data
    }

    private struct State: Sendable {
        var objects: [String: Object] = [:]
        /// Object names in byte order, rebuilt lazily after a change.
        var sortedNames: [String]?
        var nextGeneration: Int64 = 1_700_000_000_000_001
        var counts: [Operation: Int] = [:]
        var faults: [(remaining: Int, error: StoreError, operations: Set<Operation>)] = []
        var hook: FaultHook?
        var retentionPeriod: Int64?
        var roundTrip: Duration?
    }

    // Leaf lock; nothing is awaited while it is held.
    private let state = Mutex(State())
    private let now: @Sendable () -> Date
    /// Bytes per call of a read's sink, as a network would deliver them.
    public let chunkSize: Int
    /// Reported as every object's `bucket`.
    public let bucket: String

    /// What it pretends to lack: with `listingsCarryMetadata` false its
    /// listings name items only, as Firebase's v0 does (copy and access
    /// rules work as configured through `faultHook`).
    public let capabilities: StoreCapabilities

    /// How a PATCH treats the metageneration.
    public enum Metagenerations: Sendable {
        /// As Cloud Storage: each change adds one, the answer carries it,
        /// and ifMetagenerationMatch is checked.
        case counted
        /// As fake-gcs-server: it stays where it was (1), the PATCH answer
        /// carries none (read as 0), and ifMetagenerationMatch is not
        /// checked. The change itself is stored and answered.
        case notReported
    }

    public let metagenerations: Metagenerations

    public init(
        now: @escaping @Sendable () -> Date = { Date() }, chunkSize: Int = 64 << 10, bucket: String = "in-memory",
        capabilities: StoreCapabilities = .full, metagenerations: Metagenerations = .counted
    ) {
        self.now = now
        self.chunkSize = max(1, chunkSize)
        self.bucket = bucket
        self.capabilities = capabilities
        self.metagenerations = metagenerations
    }

    // MARK: - Test controls

    /// How many calls of `operation` were made (failed ones included).
    public func requestCount(_ operation: Operation) -> Int { state.withLock { $0.counts[operation] ?? 0 } }

    /// All calls so far, by operation.
    public var requestCounts: [Operation: Int] { state.withLock { $0.counts } }

    public var totalRequests: Int { state.withLock { $0.counts.values.reduce(0, +) } }

    public func resetCounters() { state.withLock { $0.counts = [:] } }

    /// The next `count` calls of `operations` (default: any) fail with `error`.
    public func failNext(_ count: Int, with error: StoreError, operations: Set<Operation> = Set(Operation.allCases)) {
        state.withLock { $0.faults.append((count, error, operations)) }
    }

    public func setFaultHook(_ hook: FaultHook?) { state.withLock { $0.hook = hook } }

    /// What `retentionPeriod` answers (nil: no retention policy).
    public func setRetentionPeriod(_ seconds: Int64?) { state.withLock { $0.retentionPeriod = seconds } }

    /// What `roundTrip` answers (nil, as at first: nothing measured).
    public func setRoundTrip(_ roundTrip: Duration?) { state.withLock { $0.roundTrip = roundTrip } }
    public var roundTrip: Duration? { state.withLock { $0.roundTrip } }

    /// A stored object's bytes (no request counted).
    public func data(of name: String) -> Data? { state.withLock { $0.objects[name]?.data } }

    /// Stores `data` as `name` without counting a request (test setup).
    @discardableResult
    public func seed(_ name: String, _ data: Data = Data(), contentType: String? = nil, customMetadata: [String: String] = [:]) -> ObjectInfo {
        state.withLock { s in
            store(&s, name: name, data: data, options: PutOptions(contentType: contentType, customMetadata: customMetadata), at: now())
        }
    }

    /// Stored objects' names (no request counted).
    public var objectNames: [String] { state.withLock { Self.sorted(&$0) } }

    // MARK: - ObjectStore

    public func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .list, prefix)
            guard (1...1000).contains(maxResults) else { throw .invalidArgument("maxResults \(maxResults) not in 1...1000") }
            let names = Self.sorted(&s)
            // Names below `prefix` form one contiguous run in byte order.
            var start = Self.firstIndex(in: names) { !$0.utf8.lexicographicallyPrecedes(prefix.utf8) }
            if let token = pageToken {
                // The token is the last name or prefix returned; after a
                // prefix, everything below it was returned too.
                start = Self.firstIndex(in: names, from: start) {
                    !Self.precedesOrEqual($0, token) && !(token.hasSuffix("/") && $0.utf8.starts(with: token.utf8))
                }
            }
            var page = ListPage(prefixes: [], items: [])
            var index = start
            var taken = 0
            var lastKey: String?
            while index < names.count {
                let name = names[index]
                guard name.utf8.starts(with: prefix.utf8) else { break }
                let rest = name.utf8.dropFirst(prefix.utf8.count)
                if rest.isEmpty {
                    // The listed prefix's own placeholder is the directory
                    // being listed, not an entry of it.
                    index += 1
                    continue
                }
                if taken == maxResults {
                    page.nextPageToken = lastKey
                    break
                }
                if let slash = rest.firstIndex(of: UInt8(ascii: "/")) {
                    let sub = prefix + String(Substring(rest[...slash]))
                    // Skip everything below this prefix.
                    index = Self.firstIndex(in: names, from: index) { !$0.utf8.starts(with: sub.utf8) }
                    if slash == rest.startIndex { continue }  // "prefix//…": an empty segment
                    page.prefixes.append(sub)
                    // v0 listings have no includeTrailingDelimiter: a
                    // prefix's placeholder is not returned.
                    if capabilities.listingsCarryMetadata, let placeholder = s.objects[sub] {
                        page.placeholders[sub] = placeholder.info
                    }
                    lastKey = sub
                } else {
                    let info = s.objects[name]!.info
                    page.items.append(capabilities.listingsCarryMetadata ? info
                        : ObjectInfo(name: name, size: 0, generation: 0, metageneration: 0, updated: Date(timeIntervalSince1970: 0)))
                    lastKey = name
                    index += 1
                }
                taken += 1
            }
            return page
        }
    }

    /// Like the stores it plays: only one whose listings carry metadata lists flat.
    public var supportsFlatListing: Bool { capabilities.listingsCarryMetadata }

    public func listFlat(
        prefix: String, startOffset: String?, endOffset: String?, pageToken: String?, maxResults: Int
    ) async throws(StoreError) -> ObjectPage {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .listFlat, prefix)
            guard (1...1000).contains(maxResults) else { throw .invalidArgument("maxResults \(maxResults) not in 1...1000") }
            let names = Self.sorted(&s)
            // The token is the last name returned.
            var index = Self.firstIndex(in: names) { name in
                if let token = pageToken { return !Self.precedesOrEqual(name, token) }
                if let startOffset, name.utf8.lexicographicallyPrecedes(startOffset.utf8) { return false }
                return !name.utf8.lexicographicallyPrecedes(prefix.utf8)
            }
            var page = ObjectPage(objects: [])
            while index < names.count, names[index].utf8.starts(with: prefix.utf8),
                endOffset.map({ names[index].utf8.lexicographicallyPrecedes($0.utf8) }) ?? true
            {
                if page.objects.count == maxResults {
                    page.nextPageToken = page.objects.last?.name
                    break
                }
                page.objects.append(s.objects[names[index]]!.info)
                index += 1
            }
            return page
        }
    }

    public func stat(_ name: String) async throws(StoreError) -> ObjectInfo {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .stat, name)
            guard let object = s.objects[name] else { throw .notFound(name) }
            return object.info
        }
    }

    public func read(
        _ name: String, generation: Int64, range: Range<Int64>,
        into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
    ) async throws(StoreError) -> Int64 {
        let data = try state.withLock { s throws(StoreError) -> Data in
            try Self.begin(&s, .read, name)
            guard let object = s.objects[name], object.info.generation == generation else {
                throw .notFound("\(name)#\(generation)")
            }
            guard range.lowerBound >= 0 else { throw .invalidArgument("range \(range)") }
            let lower = Int(min(range.lowerBound, Int64(object.data.count)))
            let upper = Int(min(range.upperBound, Int64(object.data.count)))
            return object.data.subdata(in: lower..<upper)
        }
        var offset = 0
        while offset < data.count {
            if Task.isCancelled { throw .cancelled }
            let end = min(data.count, offset + chunkSize)
            do {
                try data[offset..<end].withUnsafeBytes { try sink($0) }
            } catch {
                throw .other("sink refused bytes: \(error)")
            }
            offset = end
        }
        return Int64(data.count)
    }

    public func put(_ name: String, from path: String?, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try putFile(name, from: path, options: options, as: .put)
    }

    /// Counted apart from `put` (`Operation.putInOneRequest`), so tests
    /// see which way a file went up.
    public func putInOneRequest(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try putFile(name, from: path, options: options, as: .putInOneRequest)
    }

    private func putFile(_ name: String, from path: String?, options: PutOptions, as operation: Operation) throws(StoreError) -> ObjectInfo {
        var data = Data()
        if let path {
            do { data = try Data(contentsOf: URL(fileURLWithPath: path)) } catch { throw .invalidArgument("cannot read \(path): \(error)") }
        }
        return try state.withLock { s throws(StoreError) in
            try Self.begin(&s, operation, name)
            try Self.validate(name)
            try Self.check(s.objects[name]?.info.generation, matches: options.ifGenerationMatch, name)
            return store(&s, name: name, data: data, options: options, at: now())
        }
    }

    public func startStreamingPut(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .streamingStart, name)
            try Self.validate(name)
            // Cloud Storage checks the precondition when the session starts, too.
            try Self.check(s.objects[name]?.info.generation, matches: options.ifGenerationMatch, name)
        }
        return InMemoryStreamingPut(store: self, name: name, path: path, options: options)
    }

    public func startOneRequestStream(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        guard capabilities.oneRequestStreams else { throw .invalidArgument("this store cannot upload a growing file in one request") }
        try Self.validate(name)
        return InMemoryOneRequestStream(store: self, name: name, path: path, options: options)
    }

    public func delete(_ name: String, ifGenerationMatch: Int64?) async throws(StoreError) {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .delete, name)
            guard let object = s.objects[name] else { throw .notFound(name) }
            try Self.check(object.info.generation, matches: ifGenerationMatch, name)
            s.objects[name] = nil
            s.sortedNames = nil
        }
    }

    public func copy(_ source: String, to destination: String, ifSourceGenerationMatch: Int64?, ifGenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .copy, source)
            try Self.validate(destination)
            guard let original = s.objects[source] else { throw .notFound(source) }
            try Self.check(original.info.generation, matches: ifSourceGenerationMatch, source)
            try Self.check(s.objects[destination]?.info.generation, matches: ifGenerationMatch, destination)
            var info = store(&s, name: destination, data: original.data, options: PutOptions(
                keeping: original.info, customMetadata: original.info.customMetadata, ifGenerationMatch: nil), at: now())
            s.objects[destination]?.info = info
            return info
        }
    }

    public func patch(_ name: String, _ patch: MetadataPatch, ifMetagenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .patch, name)
            guard var info = s.objects[name]?.info else { throw .notFound(name) }
            if metagenerations == .counted, let expected = ifMetagenerationMatch, expected != info.metageneration {
                throw .preconditionFailed("\(name): metageneration \(info.metageneration), expected \(expected)")
            }
            for (key, value) in patch.customMetadata { info.customMetadata[key] = value }
            info.properties.apply(patch.properties)
            switch metagenerations {
            case .counted:
                info.metageneration += 1
                info.updated = now()
                s.objects[name]!.info = info
                return info
            case .notReported:
                s.objects[name]!.info = info
                var answer = info
                answer.metageneration = 0
                return answer
            }
        }
    }

    // MARK: - Parallel uploads

    /// As Cloud Storage: the part's bytes are refused unless they have the
    /// CRC-32C the request names.
    public func putRegion(
        _ name: String, from path: String, range: Range<Int64>, crc32c: UInt32, options: PutOptions
    ) async throws(StoreError) -> ObjectInfo {
        let data: Data
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(range.lowerBound))
            data = try handle.read(upToCount: range.count) ?? Data()
        } catch {
            throw .invalidArgument("cannot read \(path): \(error)")
        }
        guard data.count == range.count else { throw .invalidArgument("\(path) has no bytes \(range)") }
        var crc = CRC32C()
        crc.update(data)
        return try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .putRegion, name)
            try Self.validate(name)
            guard crc.value == crc32c else { throw .invalidArgument("\(name): CRC32C of the bytes is not the one given") }
            try Self.check(s.objects[name]?.info.generation, matches: options.ifGenerationMatch, name)
            return store(&s, name: name, data: data, options: options, at: now(), crc32c: crc.base64)
        }
    }

    /// As Cloud Storage's compose: 1 to 32 existing sources, the
    /// destination's precondition, the request's properties and metadata,
    /// a CRC-32C and no MD5.
    public func compose(_ sources: [String], into destination: String, options: PutOptions, expectedCRC32C: String) async throws(StoreError) -> ObjectInfo {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .compose, destination)
            try Self.validate(destination)
            guard (1...32).contains(sources.count) else { throw .invalidArgument("compose of \(sources.count) sources") }
            var data = Data()
            for source in sources {
                guard let object = s.objects[source] else { throw .notFound(source) }
                data.append(object.data)
            }
            try Self.check(s.objects[destination]?.info.generation, matches: options.ifGenerationMatch, destination)
            var crc = CRC32C()
            crc.update(data)
            return store(&s, name: destination, data: data, options: options, at: now(), crc32c: crc.base64)
        }
    }

    public func retentionPeriod() async throws(StoreError) -> Int64? {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .bucketMetadata, "")
            return s.retentionPeriod
        }
    }

    // MARK: - Streaming puts

    /// Counts a `send` of a streaming put and applies injected faults.
    /// Stores what a single-request upload of a growing file sent, if its
    /// precondition holds (the server checks it when the request ends).
    fileprivate func commitOneRequestStream(_ name: String, _ data: Data, _ options: PutOptions) throws(StoreError) -> ObjectInfo {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .oneRequestStream, name)
            try Self.check(s.objects[name]?.info.generation, matches: options.ifGenerationMatch, name)
            return store(&s, name: name, data: data, options: options, at: now())
        }
    }

    fileprivate func beginStreamingSend(_ name: String) throws(StoreError) {
        try state.withLock { s throws(StoreError) in try Self.begin(&s, .streamingSend, name) }
    }

    /// Creates the object a streaming put finished, if its precondition
    /// still holds.
    fileprivate func commitStreamingPut(_ name: String, _ data: Data, _ options: PutOptions) throws(StoreError) -> ObjectInfo {
        try state.withLock { s throws(StoreError) in
            try Self.begin(&s, .streamingFinish, name)
            try Self.check(s.objects[name]?.info.generation, matches: options.ifGenerationMatch, name)
            return store(&s, name: name, data: data, options: options, at: now())
        }
    }

    // MARK: - Internals (under the lock)

    /// Counts the call and applies injected faults.
    private static func begin(_ s: inout State, _ operation: Operation, _ name: String) throws(StoreError) {
        s.counts[operation, default: 0] += 1
        if let index = s.faults.firstIndex(where: { $0.remaining > 0 && $0.operations.contains(operation) }) {
            s.faults[index].remaining -= 1
            let error = s.faults[index].error
            if s.faults[index].remaining == 0 { s.faults.remove(at: index) }
            throw error
        }
        if let error = s.hook?(operation, name) { throw error }
    }

    private static func validate(_ name: String) throws(StoreError) {
        let bytes = name.utf8.count
        guard bytes >= 1, bytes <= 1024, !name.contains("\r"), !name.contains("\n") else {
            throw .invalidArgument("object name \(name.debugDescription)")
        }
    }

    /// `ifGenerationMatch`: 0 means "only if absent".
    private static func check(_ live: Int64?, matches expected: Int64?, _ name: String) throws(StoreError) {
        guard let expected else { return }
        guard (live ?? 0) == expected else {
            throw .preconditionFailed("\(name): generation \(live ?? 0), expected \(expected)")
        }
    }

    private func store(_ s: inout State, name: String, data: Data, options: PutOptions, at date: Date, crc32c: String? = nil) -> ObjectInfo {
        var info = ObjectInfo(
            name: name, size: Int64(data.count), generation: s.nextGeneration, metageneration: 1, updated: date,
            customMetadata: options.customMetadata)
        info.properties = options.properties
        info.contentType = options.contentType ?? "application/octet-stream"
        info.bucket = bucket
        info.crc32c = crc32c
        info.timeCreated = date
        s.nextGeneration += 1
        if s.objects[name] == nil { s.sortedNames = nil }
        s.objects[name] = Object(info: info, data: data)
        return info
    }

    private static func sorted(_ s: inout State) -> [String] {
        if let names = s.sortedNames { return names }
        let names = s.objects.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
        s.sortedNames = names
        return names
    }

    private static func precedesOrEqual(_ a: String, _ b: String) -> Bool {
        !b.utf8.lexicographicallyPrecedes(a.utf8)
    }

    /// First index at or after `from` where `condition` holds, assuming it
    /// is false then true along `names` (binary search).
    private static func firstIndex(in names: [String], from: Int = 0, where condition: (String) -> Bool) -> Int {
        var low = from, high = names.count
        while low < high {
            let mid = (low + high) / 2
            if condition(names[mid]) { high = mid } else { low = mid + 1 }
        }
        return low
    }
}

/// A streaming put into an `InMemoryObjectStore`: like the real service it
/// takes the file's bytes when they are sent (later changes to the file do
/// not reach the object) and creates the object only at `finish`.
final class InMemoryStreamingPut: StreamingPut {
    let granularity: Int64 = 256 * 1024
    private let store: InMemoryObjectStore
    private let name: String
    private let path: String
    private let options: PutOptions

    private struct Progress {
        /// The bytes received so far; `received.count` is `acknowledged`.
        var received = Data()
        var abandoned = false
    }

    // Leaf lock, never held across an await or the store's lock.
    private let progress = Mutex(Progress())

    init(store: InMemoryObjectStore, name: String, path: String, options: PutOptions) {
        self.store = store
        self.name = name
        self.path = path
        self.options = options
    }

    var acknowledged: Int64 { progress.withLock { Int64($0.received.count) } }

    func send(upTo end: Int64) async throws(StoreError) {
        let start = try usableOffset()
        guard end % granularity == 0, end > start else {
            throw .invalidArgument("a streaming put sends up to a multiple of \(granularity) above the \(start) bytes acknowledged, not \(end)")
        }
        // Like the real store: a file too short is found before any request.
        let bytes = try read(start..<end)
        try store.beginStreamingSend(name)
        progress.withLock { $0.received.append(bytes) }
    }

    func finish(size: Int64) async throws(StoreError) -> ObjectInfo {
        let start = try usableOffset()
        guard size >= start else { throw .invalidArgument("a streaming put of \(start) acknowledged bytes cannot end at \(size)") }
        let data = progress.withLock { $0.received } + (try read(start..<size))
        let info = try store.commitStreamingPut(name, data, options)
        progress.withLock { $0.received = data }
        return info
    }

    func abandon() async {
        progress.withLock { $0.abandoned = true }
    }

    private func usableOffset() throws(StoreError) -> Int64 {
        let (offset, abandoned) = progress.withLock { (Int64($0.received.count), $0.abandoned) }
        if abandoned { throw .other("the streaming put of \(name) was abandoned") }
        return offset
    }

    /// Bytes `range` of the file, which must hold them all.
    private func read(_ range: Range<Int64>) throws(StoreError) -> Data {
        guard !range.isEmpty else { return Data() }
        do {
            let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
            defer { try? handle.close() }
            try handle.seek(toOffset: UInt64(range.lowerBound))
            let data = try handle.read(upToCount: range.count) ?? Data()
            guard data.count == range.count else {
                throw StoreError.invalidArgument("\(path) ends before byte \(range.upperBound)")
            }
            return data
        } catch let error as StoreError {
            throw error
        } catch {
            throw .invalidArgument("cannot read \(path): \(error)")
        }
    }
}

/// A single-request upload of a growing file: sends only move the point
/// the request may read to; the object is stored, from the file's bytes,
/// when it finishes; once abandoned it fails.
final class InMemoryOneRequestStream: StreamingPut {
    let granularity: Int64 = 1
    private let store: InMemoryObjectStore
    private let name: String
    private let path: String
    private let options: PutOptions

    private struct Progress {
        var handedOver: Int64 = 0
        var abandoned = false
    }

    // Leaf lock, never held across an await or the store's lock.
    private let progress = Mutex(Progress())

    init(store: InMemoryObjectStore, name: String, path: String, options: PutOptions) {
        self.store = store
        self.name = name
        self.path = path
        self.options = options
    }

    var acknowledged: Int64 { progress.withLock { $0.handedOver } }

    func send(upTo end: Int64) async throws(StoreError) {
        try progress.withLock { p throws(StoreError) in
            if p.abandoned { throw .other("the upload of \(name) was abandoned") }
            p.handedOver = max(p.handedOver, end)
        }
    }

    func finish(size: Int64) async throws(StoreError) -> ObjectInfo {
        if progress.withLock({ $0.abandoned }) { throw .other("the upload of \(name) was abandoned") }
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw .invalidArgument("cannot read \(path): \(error)")
        }
        guard data.count >= size else { throw .invalidArgument("\(path) ends before byte \(size)") }
        return try store.commitOneRequestStream(name, data.prefix(Int(size)), options)
    }

    func abandon() async {
        progress.withLock { $0.abandoned = true }
    }
}
