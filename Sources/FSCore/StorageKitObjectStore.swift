import Foundation
import StorageKit
import Transport

/// `ObjectStore` over StorageKit: the real bucket (or an emulator).
public struct StorageKitObjectStore: ObjectStore {
    public let storage: Storage

    public init(storage: Storage) {
        self.storage = storage
    }

    /// What the credentials' API offers: Firebase's v0 lists names only,
    /// copies through this process and applies Security Rules.
    public var capabilities: StoreCapabilities {
        storage.configuration.dialect == .firebase ? .firebase : .full
    }

    /// Object names reach the bucket verbatim (`dir/` placeholders included).
    private func reference(_ name: String) -> StorageReference { storage.reference(objectName: name) }

    public func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage {
        let listed = storage.reference().child(prefix)
        return Self.page(try await Self.run { try await listed.listPage(maxResults: Int64(maxResults), pageToken: pageToken) }, of: prefix)
    }

    /// Pipelined: each page is requested before the previous one is parsed
    /// (`StorageReference.listPages`).
    public func listPages(
        prefix: String, after pageToken: String?, maxResults: Int, _ each: (ListPage) -> Void
    ) async throws(StoreError) {
        let listed = storage.reference().child(prefix)
        try await Self.run {
            try await listed.listPages(after: pageToken, maxResults: Int64(maxResults)) { each(Self.page($0, of: prefix)) }
        }
    }

    private static func page(_ result: StorageListResult, of prefix: String) -> ListPage {
        // v0 listings name their items only (`capabilities`).
        let items = result.itemMetadata.count == result.items.count
            ? result.itemMetadata.map(Self.info)
            : result.items.map { ObjectInfo(name: $0.fullPath, size: 0, generation: 0, metageneration: 0, updated: Date(timeIntervalSince1970: 0)) }
        return ListPage(
            prefixes: result.prefixes.map { $0.fullPath + "/" },
            items: items,
            placeholders: result.placeholderMetadata.filter { $0.key != prefix }.mapValues(info),
            nextPageToken: result.pageToken)
    }

    /// The JSON API lists without delimiter; Firebase's v0 does not here.
    public var supportsFlatListing: Bool { storage.configuration.dialect != .firebase }

    public func listFlat(
        prefix: String, startOffset: String?, endOffset: String?, pageToken: String?, maxResults: Int
    ) async throws(StoreError) -> ObjectPage {
        let listed = storage.reference().child(prefix)
        let result = try await Self.run {
            try await listed.listObjects(
                maxResults: Int64(maxResults), pageToken: pageToken, startOffset: startOffset, endOffset: endOffset)
        }
        return ObjectPage(objects: result.items.map(Self.info), nextPageToken: result.pageToken)
    }

    public func stat(_ name: String) async throws(StoreError) -> ObjectInfo {
        let ref = reference(name)
        return Self.info(try await Self.run { try await ref.getMetadata() })
    }

    public func read(
        _ name: String, generation: Int64, range: Range<Int64>,
        into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
    ) async throws(StoreError) -> Int64 {
        let ref = reference(name)
        return try await Self.run { try await ref.read(range: range, generation: generation, into: sink) }
    }

    public func put(_ name: String, from path: String?, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        let ref = reference(name)
        let metadata = Self.metadata(options)
        let stored = try await Self.run {
            if let path {
                try await ref.putFileAsync(from: URL(fileURLWithPath: path), metadata: metadata, ifGenerationMatch: options.ifGenerationMatch)
            } else {
                try await ref.putDataAsync(Data(), metadata: metadata, ifGenerationMatch: options.ifGenerationMatch)
            }
        }
        return Self.info(stored)
    }

    public func putInOneRequest(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        let ref = reference(name)
        let metadata = Self.metadata(options)
        return Self.info(try await Self.run {
            try await ref.putFileInOneRequest(from: URL(fileURLWithPath: path), metadata: metadata, ifGenerationMatch: options.ifGenerationMatch)
        })
    }

    public func startStreamingPut(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        let ref = reference(name)
        let metadata = Self.metadata(options)
        let upload = try await Self.run {
            try await ref.startStreamingUpload(fromFile: path, metadata: metadata, ifGenerationMatch: options.ifGenerationMatch)
        }
        return StorageKitStreamingPut(upload: upload)
    }

    public func startOneRequestStream(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        let ref = reference(name)
        let metadata = Self.metadata(options)
        let upload = try await Self.run {
            try ref.startOneRequestStream(fromFile: path, metadata: metadata, ifGenerationMatch: options.ifGenerationMatch)
        }
        return StorageKitOneRequestStream(upload: upload)
    }

    /// The uploaded object's standard properties and custom metadata.
    private static func metadata(_ options: PutOptions) -> StorageMetadata {
        let metadata = StorageMetadata()
        for property in StandardProperty.allCases { metadata[property] = options.properties[property] }
        if !options.customMetadata.isEmpty { metadata.customMetadata = options.customMetadata }
        return metadata
    }

    public func putRegion(
        _ name: String, from path: String, range: Range<Int64>, crc32c: UInt32, options: PutOptions
    ) async throws(StoreError) -> ObjectInfo {
        let ref = reference(name)
        let metadata = Self.metadata(options)
        return Self.info(try await Self.run {
            try await ref.putFile(
                atPath: path, range: range, crc32c: CRC32C.base64(crc32c), metadata: metadata, ifGenerationMatch: options.ifGenerationMatch)
        })
    }

    public func compose(_ sources: [String], into destination: String, options: PutOptions, expectedCRC32C: String) async throws(StoreError) -> ObjectInfo {
        let ref = reference(destination)
        let parts = sources.map(reference)
        let metadata = Self.metadata(options)
        return Self.info(try await Self.run {
            try await ref.compose(parts, metadata: metadata, ifGenerationMatch: options.ifGenerationMatch, expectedCRC32C: expectedCRC32C)
        })
    }

    /// The shortest time to first byte of the mount's requests so far.
    public var roundTrip: Duration? { storage.shortestRoundTrip }

    public func retentionPeriod() async throws(StoreError) -> Int64? {
        try await Self.run { try await storage.retentionPeriod() }
    }

    public func delete(_ name: String, ifGenerationMatch: Int64?) async throws(StoreError) {
        let ref = reference(name)
        try await Self.run { try await ref.delete(ifGenerationMatch: ifGenerationMatch) }
    }

    public func copy(
        _ source: String, to destination: String, ifSourceGenerationMatch: Int64?, ifGenerationMatch: Int64?
    ) async throws(StoreError) -> ObjectInfo {
        let from = reference(source), to = reference(destination)
        return Self.info(try await Self.run {
            try await from.copy(to: to, ifGenerationMatch: ifGenerationMatch, ifSourceGenerationMatch: ifSourceGenerationMatch)
        })
    }

    public func patch(_ name: String, _ patch: MetadataPatch, ifMetagenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo {
        let ref = reference(name)
        let metadata = StorageMetadata()
        for property in StandardProperty.allCases {
            if let change = patch.properties[property] { metadata[property] = change }
        }
        let set = patch.customMetadata.compactMapValues { $0 }
        if !set.isEmpty { metadata.customMetadata = set }
        for (key, value) in patch.customMetadata where value == nil { metadata.removeCustomMetadata(forKey: key) }
        return Self.info(try await Self.run { try await ref.updateMetadata(metadata, ifMetagenerationMatch: ifMetagenerationMatch) })
    }

    static func info(_ m: StorageMetadata) -> ObjectInfo {
        var info = ObjectInfo(
            name: m.fullPath, size: m.size, generation: m.generation, metageneration: m.metageneration,
            updated: m.updated ?? m.timeCreated ?? Date(timeIntervalSince1970: 0), customMetadata: m.customMetadata ?? [:])
        info.bucket = m.bucket.isEmpty ? nil : m.bucket
        info.properties = m.standardProperties
        info.md5Hash = m.md5Hash
        info.crc32c = m.crc32c
        info.timeCreated = m.timeCreated
        return info
    }

    /// Runs a StorageKit call and translates its failure.
    static func run<T>(_ body: () async throws -> T) async throws(StoreError) -> T {
        do {
            return try await body()
        } catch {
            throw Self.translate(error)
        }
    }

    static func translate(_ error: any Error) -> StoreError {
        guard let error = error as? StorageError else {
            return error is CancellationError ? .cancelled : .other(String(describing: error))
        }
        switch error {
        case .objectNotFound(let m): return .notFound(m)
        case .bucketNotFound(let m): return .bucketNotFound(m)
        case .preconditionFailed(let m): return .preconditionFailed(m)
        case .unauthenticated(let m): return .unauthenticated(m)
        case .unauthorized(let m): return .permissionDenied(m)
        case .invalidArgument(let m): return .invalidArgument(m)
        case .retryLimitExceeded(let m): return .unavailable(m)
        case .quotaExceeded(let m): return .quotaExceeded(m)
        case .cancelled: return .cancelled
        case .nonMatchingChecksum, .downloadSizeExceeded, .unknown: return .other(String(describing: error))
        }
    }
}

/// `StreamingPut` over StorageKit's `StreamingUpload`.
struct StorageKitStreamingPut: StreamingPut {
    let upload: StreamingUpload

    var granularity: Int64 { StreamingUpload.granularity }
    var acknowledged: Int64 { upload.acknowledged }

    func send(upTo end: Int64) async throws(StoreError) {
        try await StorageKitObjectStore.run { try await upload.send(upTo: end) }
    }

    func finish(size: Int64) async throws(StoreError) -> ObjectInfo {
        StorageKitObjectStore.info(try await StorageKitObjectStore.run { try await upload.finish(size: size) })
    }

    func abandon() async {
        await upload.abandon()
    }
}

/// `OneRequestStream` as a `StreamingPut`: any end may be sent (granularity
/// 1), and a send returns once the request may read that far.
final class StorageKitOneRequestStream: StreamingPut {
    let upload: OneRequestStream

    init(upload: OneRequestStream) { self.upload = upload }

    var granularity: Int64 { 1 }
    var acknowledged: Int64 { upload.handedOver }

    func send(upTo end: Int64) async throws(StoreError) {
        try await StorageKitObjectStore.run { try upload.send(upTo: end) }
    }

    func finish(size: Int64) async throws(StoreError) -> ObjectInfo {
        StorageKitObjectStore.info(try await StorageKitObjectStore.run { try await upload.finish(size: size) })
    }

    func abandon() async {
        upload.abandon()
    }
}
