import Foundation
import StorageKit

/// The seam between the filesystem and the bucket: what the core needs of
/// an object store, as plain requests and values. `StorageKitObjectStore`
/// implements it over Cloud Storage; `InMemoryObjectStore` (in FSCoreTesting) for tests; both
/// pass the same conformance suite. Caching and prefix views are wrappers.
public protocol ObjectStore: Sendable {
    /// One page of the objects and prefixes directly below `prefix` (which
    /// is "" or ends in "/"), delimiter "/". Placeholder objects named
    /// exactly like a listed prefix (`dir/`) are never in `items`; they are
    /// reported in `placeholders`, with their metadata (a directory's mode
    /// and owner), when the listings carry metadata.
    func list(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ListPage

    /// Every page of that listing after the one that returned `pageToken`
    /// (from the first when nil), handed to `each` in order. A store may
    /// request the next page while `each` (and its own parsing) works on
    /// this one; the default asks page after page (`list`).
    func listPages(prefix: String, after pageToken: String?, maxResults: Int, _ each: (ListPage) -> Void) async throws(StoreError)

    /// Whether `listFlat` works (a store that cannot list without a
    /// delimiter says false; the file system then lists directory by
    /// directory).
    var supportsFlatListing: Bool { get }

    /// One page of every object whose name starts with `prefix`, with no
    /// delimiter: placeholders (`dir/`) and names no file can have
    /// included, in name order (UTF-8 bytes), so all names below any
    /// prefix come one after another. The file system walks a subtree
    /// with it (`TreeWalk`). `startOffset` and `endOffset` (the JSON API's
    /// parameters of the same names) keep the names in
    /// [startOffset, endOffset): a walk lists key ranges of one subtree
    /// side by side (`WalkSchedule`). A server may ignore them (the Python
    /// emulator does); the walk notices the names outside and falls back
    /// to one sequential listing. A page token continues the listing it
    /// came from, so a request with one repeats that listing's offsets.
    func listFlat(
        prefix: String, startOffset: String?, endOffset: String?, pageToken: String?, maxResults: Int
    ) async throws(StoreError) -> ObjectPage

    /// The object's current metadata.
    func stat(_ name: String) async throws(StoreError) -> ObjectInfo

    /// Streams bytes `range` of generation `generation` to `sink` (called
    /// sequentially, on an arbitrary thread); returns how many arrived
    /// (fewer than asked only at the end of the object). A generation that
    /// is no longer live fails with `.notFound`.
    func read(
        _ name: String, generation: Int64, range: Range<Int64>,
        into sink: @escaping @Sendable (UnsafeRawBufferPointer) throws -> Void
    ) async throws(StoreError) -> Int64

    /// Stores the file at `path` (or nothing, for an empty object) as
    /// `name`; with `ifGenerationMatch` only if the live generation is that
    /// (0: only if absent).
    func put(_ name: String, from path: String?, options: PutOptions) async throws(StoreError) -> ObjectInfo

    /// `put` of the file at `path` in one request whatever its size (a
    /// store near enough that a cut upload is cheaper to send again whole
    /// than to resume; `ParallelUploads.route`). The default is `put`.
    func putInOneRequest(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> ObjectInfo

    /// Starts a resumable upload of `name` from the file at `path`, whose final length is not known yet.
    func startStreamingPut(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut

    /// Starts a single-request upload of `name` whose body is the file at
    /// `path` as it is written (`StoreCapabilities.oneRequestStreams`): a
    /// send only lets the request read further and returns at once; a
    /// failed request cannot be resumed (`send` and `finish` throw); the
    /// precondition is checked when it ends. The default throws.
    func startOneRequestStream(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut

    func delete(_ name: String, ifGenerationMatch: Int64?) async throws(StoreError)

    /// Server-side copy; content type and custom metadata travel along.
    func copy(_ source: String, to destination: String, ifSourceGenerationMatch: Int64?, ifGenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo

    /// Changes custom metadata keys (nil deletes a key) and standard
    /// properties (nil deletes a property) in one request.
    func patch(_ name: String, _ patch: MetadataPatch, ifMetagenerationMatch: Int64?) async throws(StoreError) -> ObjectInfo

    /// What this store can and cannot do (default: everything, as the
    /// Cloud Storage JSON API).
    var capabilities: StoreCapabilities { get }

    // Parallel composite uploads (`ParallelUpload`).

    /// Stores bytes `range` of the file at `path` as `name`, refused by the
    /// store unless they have CRC-32C `crc32c`; with `ifGenerationMatch`
    /// of the options as `put`.
    func putRegion(_ name: String, from path: String, range: Range<Int64>, crc32c: UInt32, options: PutOptions) async throws(StoreError) -> ObjectInfo

    /// Makes `destination` the concatenation of `sources` (1 to 32, in
    /// order), with the options' properties, custom metadata and
    /// precondition, as a `put` of those bytes would. The answer carries
    /// the composite's CRC-32C. `expectedCRC32C` (base64) lets a store
    /// recognise the object a lost first attempt made.
    func compose(_ sources: [String], into destination: String, options: PutOptions, expectedCRC32C: String) async throws(StoreError) -> ObjectInfo

    /// The bucket's retention period in seconds, nil when it has none.
    func retentionPeriod() async throws(StoreError) -> Int64?

    /// The store's round trip as measured so far: the shortest time an
    /// answer to a request without a body took to start arriving (nil:
    /// nothing measured yet, or a store that cannot say). `ParallelUploads`
    /// chooses by it.
    var roundTrip: Duration? { get }
}

extension ObjectStore {
    public var capabilities: StoreCapabilities { .full }

    public func putInOneRequest(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try await put(name, from: path, options: options)
    }

    public func putRegion(
        _ name: String, from path: String, range: Range<Int64>, crc32c: UInt32, options: PutOptions
    ) async throws(StoreError) -> ObjectInfo {
        throw .invalidArgument("this store cannot store part of a file")
    }

    public func startOneRequestStream(_ name: String, from path: String, options: PutOptions) async throws(StoreError) -> any StreamingPut {
        throw .invalidArgument("this store cannot upload a growing file in one request")
    }

    public func compose(_ sources: [String], into destination: String, options: PutOptions, expectedCRC32C: String) async throws(StoreError) -> ObjectInfo {
        throw .invalidArgument("this store cannot compose objects")
    }

    public func retentionPeriod() async throws(StoreError) -> Int64? { nil }

    public var roundTrip: Duration? { nil }

    public func listPages(
        prefix: String, after pageToken: String?, maxResults: Int, _ each: (ListPage) -> Void
    ) async throws(StoreError) {
        var token = pageToken
        repeat {
            let page = try await list(prefix: prefix, pageToken: token, maxResults: maxResults)
            each(page)
            token = page.nextPageToken
        } while token != nil
    }

    /// `stat`, with a reply for another name (a store that normalises
    /// `a/` to `a`) read as absent.
    func statResult(_ name: String) async -> Result<ObjectInfo, StoreError> {
        do {
            let info = try await stat(name)
            return info.name == name ? .success(info) : .failure(.notFound(name))
        } catch {
            return .failure(error)
        }
    }
}

/// Where a store falls short of the Cloud Storage JSON API, so the core
/// can work around it (Firebase Storage's v0 API: see StorageKit).
public struct StoreCapabilities: Sendable, Equatable {
    /// Listing items carry their metadata. When false they carry a name
    /// only (size, generation and the rest are zero) and the core stats
    /// each item it shows.
    public var listingsCarryMetadata = true
    /// `copy` happens in the store. When false the bytes go through this
    /// process, so rename copies only files up to a size limit.
    public var serverSideCopy = true
    /// Access is decided per path (Security Rules), so a name the store
    /// refuses to describe at the top of the mount may still be a
    /// directory the user can enter (`users/` above `users/UID/`).
    public var accessRulesPerPath = false
    /// `putRegion` and `compose` work, so a large file can go up as parts
    /// side by side (`ParallelUpload`).
    public var compose = true
    /// `startOneRequestStream` works: near the store a file written in
    /// order goes up in one request while it is written (`ParallelUploads`).
    public var oneRequestStreams = true

    public init(
        listingsCarryMetadata: Bool = true, serverSideCopy: Bool = true, accessRulesPerPath: Bool = false, compose: Bool = true,
        oneRequestStreams: Bool = true
    ) {
        self.listingsCarryMetadata = listingsCarryMetadata
        self.serverSideCopy = serverSideCopy
        self.accessRulesPerPath = accessRulesPerPath
        self.compose = compose
        self.oneRequestStreams = oneRequestStreams
    }

    /// The JSON API: everything.
    public static let full = StoreCapabilities()
    /// Firebase Storage's v0 API: names-only listings, no server-side
    /// copy, Security Rules, no compose, no upload of a growing file (what
    /// its production endpoint makes of a body of unknown length, no
    /// Firebase SDK tells: they all send a known length).
    public static let firebase = StoreCapabilities(
        listingsCarryMetadata: false, serverSideCopy: false, accessRulesPerPath: true, compose: false, oneRequestStreams: false)
}

/// An upload of a file that is still being written sequentially
/// (`ObjectStore.startStreamingPut`): the owner sends each region once it
/// is on disk and final, then finishes with the file's size. The store
/// reads the file's bytes when they are sent. `ifGenerationMatch` of the
/// put's options is checked at the start and again at `finish`; until
/// then the object stays as it was. One call at a time.
public protocol StreamingPut: Sendable {
    /// What every `send(upTo:)` end must be a multiple of.
    var granularity: Int64 { get }
    /// Bytes the store has received.
    var acknowledged: Int64 { get }
    /// Sends bytes [acknowledged, end) of the file; `end` is a multiple of
    /// `granularity` above `acknowledged`.
    func send(upTo end: Int64) async throws(StoreError)
    /// Sends bytes [acknowledged, size) of the file and creates the object
    /// with the options the put started with.
    func finish(size: Int64) async throws(StoreError) -> ObjectInfo
    /// Like `finish(size:)`, given the options of the close. A stream whose
    /// metadata went with its first request (a resumable session, one
    /// request) stores the options it started with, and the caller patches
    /// the difference; one that creates the object only at the end (a
    /// compose) stores `options`, and says so in `storesOptionsAtFinish`.
    func finish(size: Int64, options: PutOptions) async throws(StoreError) -> ObjectInfo
    /// Whether `finish(size:options:)` stores the options it is given.
    var storesOptionsAtFinish: Bool { get }
    /// Drops the upload (best effort); the object stays as it was.
    func abandon() async
}

extension StreamingPut {
    /// Metadata and precondition went with the first request.
    public var storesOptionsAtFinish: Bool { false }

    public func finish(size: Int64, options: PutOptions) async throws(StoreError) -> ObjectInfo {
        try await finish(size: size)
    }
}

/// Its standard properties read as `info.contentType` and so on
/// (`properties` holds them).
@dynamicMemberLookup
public struct ObjectInfo: Sendable, Equatable {
    public var name: String
    /// The bucket holding the object, when the store says (read as the
    /// `gcs.bucket` extended attribute).
    public var bucket: String?
    public var size: Int64
    public var generation: Int64
    public var metageneration: Int64
    public var updated: Date
    public var properties = ObjectProperties()
    public var md5Hash: String?
    public var crc32c: String?
    public var timeCreated: Date?
    public var customMetadata: [String: String]

    public init(
        name: String, size: Int64, generation: Int64, metageneration: Int64 = 1, updated: Date,
        contentType: String? = nil, customMetadata: [String: String] = [:]
    ) {
        self.name = name
        self.size = size
        self.generation = generation
        self.metageneration = metageneration
        self.updated = updated
        self.properties = ObjectProperties(contentType: contentType)
        self.customMetadata = customMetadata
    }

    public subscript<T>(dynamicMember property: WritableKeyPath<ObjectProperties, T>) -> T {
        get { properties[keyPath: property] }
        set { properties[keyPath: property] = newValue }
    }
}

public struct ListPage: Sendable, Equatable {
    /// Full prefixes ("a/b/"), never containing an empty segment.
    public var prefixes: [String]
    /// Objects directly below the listed prefix, excluding placeholders.
    public var items: [ObjectInfo]
    /// The placeholder objects of listed prefixes, by prefix ("a/b/"): an
    /// explicit directory's mode, owner and times are in its placeholder's
    /// custom metadata. A store whose listings cannot return them (v0) has
    /// none here; the file system stats them (`ListingReader.withEntryMetadata`).
    public var placeholders: [String: ObjectInfo]
    public var nextPageToken: String?

    public init(prefixes: [String], items: [ObjectInfo], placeholders: [String: ObjectInfo] = [:], nextPageToken: String? = nil) {
        self.prefixes = prefixes
        self.items = items
        self.placeholders = placeholders
        self.nextPageToken = nextPageToken
    }

    /// Prefixes ("a/b/") that have an explicit placeholder object.
    public var placeholderPrefixes: Set<String> { Set(placeholders.keys) }
}

/// A page of a flat listing (`ObjectStore.listFlat`).
public struct ObjectPage: Sendable, Equatable {
    public var objects: [ObjectInfo]
    public var nextPageToken: String?

    public init(objects: [ObjectInfo], nextPageToken: String? = nil) {
        self.objects = objects
        self.nextPageToken = nextPageToken
    }
}

extension ObjectStore {
    /// Stores written before flat listings existed list directory by
    /// directory.
    public var supportsFlatListing: Bool { false }

    public func listFlat(
        prefix: String, startOffset: String?, endOffset: String?, pageToken: String?, maxResults: Int
    ) async throws(StoreError) -> ObjectPage {
        throw .invalidArgument("this store cannot list without a delimiter")
    }

    /// The whole flat listing of `prefix`, page by page (no offsets).
    public func listFlat(prefix: String, pageToken: String?, maxResults: Int) async throws(StoreError) -> ObjectPage {
        try await listFlat(prefix: prefix, startOffset: nil, endOffset: nil, pageToken: pageToken, maxResults: maxResults)
    }
}

/// Its standard properties read as `options.contentType` and so on.
@dynamicMemberLookup
public struct PutOptions: Sendable {
    /// The standard properties the object gets (nil: not set).
    public var properties: ObjectProperties
    public var customMetadata: [String: String]
    public var ifGenerationMatch: Int64?

    public init(contentType: String? = nil, customMetadata: [String: String] = [:], ifGenerationMatch: Int64? = nil) {
        self.init(properties: ObjectProperties(contentType: contentType), customMetadata: customMetadata, ifGenerationMatch: ifGenerationMatch)
    }

    public init(properties: ObjectProperties, customMetadata: [String: String], ifGenerationMatch: Int64?) {
        self.properties = properties
        self.customMetadata = customMetadata
        self.ifGenerationMatch = ifGenerationMatch
    }

    /// Options that keep `object`'s standard properties.
    public init(keeping object: ObjectInfo?, customMetadata: [String: String], ifGenerationMatch: Int64?) {
        self.init(properties: object?.properties ?? ObjectProperties(), customMetadata: customMetadata, ifGenerationMatch: ifGenerationMatch)
    }

    public subscript<T>(dynamicMember property: WritableKeyPath<ObjectProperties, T>) -> T {
        get { properties[keyPath: property] }
        set { properties[keyPath: property] = newValue }
    }
}

/// A metadata change: `.some(nil)` deletes, absent keys stay as they are.
/// Its standard properties read as `patch.contentType` and so on.
@dynamicMemberLookup
public struct MetadataPatch: Sendable, Equatable {
    public var customMetadata: [String: String?] = [:]
    public var properties = PropertyChanges()

    public init() {}

    public subscript<T>(dynamicMember property: WritableKeyPath<PropertyChanges, T>) -> T {
        get { properties[keyPath: property] }
        set { properties[keyPath: property] = newValue }
    }
}

extension MetadataPatch {
    /// The standard properties of this patch applied to `info` (custom
    /// keys are not touched).
    func apply(to info: inout ObjectInfo) {
        info.properties.apply(properties)
    }
}

/// Store failures, in the filesystem's vocabulary.
public enum StoreError: Error, Sendable, Equatable, CustomStringConvertible {
    case notFound(String)
    case bucketNotFound(String)
    /// A generation/metageneration precondition did not hold.
    case preconditionFailed(String)
    case unauthenticated(String)
    case permissionDenied(String)
    case invalidArgument(String)
    /// Retries exhausted: endpoint unreachable, server errors, stalls.
    case unavailable(String)
    case quotaExceeded(String)
    case cancelled
    case other(String)

    /// Failures that may go away by themselves (the network or the
    /// service is down, a rate limit): worth another upload attempt later.
    public var isTransient: Bool {
        switch self {
        case .unavailable, .quotaExceeded: return true
        case .notFound, .bucketNotFound, .preconditionFailed, .unauthenticated, .permissionDenied,
             .invalidArgument, .cancelled, .other:
            return false
        }
    }

    public var description: String {
        switch self {
        case .notFound(let m): return "not found: \(m)"
        case .bucketNotFound(let m): return "no such bucket: \(m)"
        case .preconditionFailed(let m): return "changed by someone else: \(m)"
        case .unauthenticated(let m): return "credentials missing or refused: \(m)"
        case .permissionDenied(let m): return "permission denied: \(m)"
        case .invalidArgument(let m): return "invalid argument: \(m)"
        case .unavailable(let m): return "storage unavailable: \(m)"
        case .quotaExceeded(let m): return "quota exceeded: \(m)"
        case .cancelled: return "cancelled"
        case .other(let m): return m
        }
    }
}
