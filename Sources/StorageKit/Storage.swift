import Foundation
import Logging
import Synchronization
import Transport

/// The entry point of StorageKit, as in the Firebase SDK: one `Storage` per
/// bucket, from which references are made.
///
///     let storage = Storage.storage()                      // the default app's bucket (FIREBASE_CONFIG)
///     let other = Storage.storage(url: "gs://my-bucket")
///     let ref = storage.reference().child("images/space.jpg")
///
/// Where requests go: `https://storage.googleapis.com` by default; the
/// `STORAGE_EMULATOR_HOST` environment variable (as Google's client libraries
/// read it: `host:port` or a URL) or `useEmulator(withHost:port:)` point it
/// at an emulator with anonymous credentials; `StorageConfiguration` sets any
/// endpoint and credentials explicitly. `Storage+DefaultApp.swift` explains
/// how `storage()` and `storage(url:)` find their bucket and credentials.
public final class Storage: Sendable {
    public let bucket: String
    private let settings: Mutex<StorageConfiguration>
    private let callbacks: Mutex<DispatchQueue>
    /// Set when this instance cannot make requests (no bucket configured):
    /// its references are unusable with this reason (see `StoragePath`).
    let unusableReason: String?
    let logger: Logger
    /// `shortestRoundTrip` in nanoseconds (Int64.max: no answer yet).
    private let shortestAnswer = Atomic<Int64>(.max)

    public init(bucket: String, configuration: StorageConfiguration = StorageConfiguration()) {
        self.bucket = bucket
        self.settings = Mutex(configuration)
        self.callbacks = Mutex(DispatchQueue(label: "StorageKit.callbacks.\(bucket)"))
        self.unusableReason = nil
        self.logger = configuration.logger
    }

    /// A `Storage` whose every request fails with `invalidArgument(reason)`.
    init(unusable reason: String, configuration: StorageConfiguration) {
        self.bucket = ""
        self.settings = Mutex(configuration)
        self.callbacks = Mutex(DispatchQueue(label: "StorageKit.callbacks"))
        self.unusableReason = reason
        self.logger = configuration.logger
    }

    /// A new `Storage` for `gs://bucket` (a path after the bucket is
    /// ignored) with exactly `configuration`; `storage(url:)` without a
    /// configuration is the shared, default-app instance.
    public static func storage(url: String, configuration: StorageConfiguration) -> Storage {
        let bucket = (try? StorageURL.parse(url).bucket) ?? url
        return Storage(bucket: bucket, configuration: configuration)
    }

    /// The queue completion handlers run on (`getMetadata { metadata, error in }`
    /// and every other `completion:` form).
    ///
    /// The default is a serial queue of this instance, served by Dispatch's
    /// own threads: it needs no run loop, so a program may block its main
    /// thread while it waits for a completion. Set `.main` to have them on
    /// the main thread, as on Apple platforms, only if something serves the
    /// main queue (`dispatchMain()`, `RunLoop.main.run()`, an `async` main);
    /// otherwise they never run. Handlers on a serial queue run one at a
    /// time, in the order the operations finished; a handler that blocks
    /// waiting for another completion on the same serial queue deadlocks.
    /// The queue is read when an operation starts.
    ///
    /// Upload-task observers (`observe(_:handler:)`) do not use this queue:
    /// they run on the upload's own task, in order, before `completion()`
    /// returns (see `StorageUploadTask`).
    public var callbackQueue: DispatchQueue {
        get { callbacks.withLock { $0 } }
        set { callbacks.withLock { $0 = newValue } }
    }

    /// Points this instance at an emulator on `host:port`. Call it before
    /// the first request, as with Firebase. A Firebase Auth user stays
    /// signed in (the Storage emulator speaks v0 and applies the rules);
    /// any other credentials are replaced by anonymous access.
    public func useEmulator(withHost host: String, port: Int) {
        settings.withLock {
            $0.endpoint = URL(string: "http://\(host):\(port)")!
            if $0.dialect != .firebase { $0.credentials = AnonymousCredentials() }
        }
    }

    public var configuration: StorageConfiguration { settings.withLock { $0 } }

    /// The shortest time an answer to one of this instance's GET, HEAD or
    /// DELETE requests took to start arriving after the request went out
    /// (any status; nil before the first; `HTTPResponse.timeToFirstByte`):
    /// the best estimate of the store's round trip a client has, the
    /// server's own time included. Requests to other hosts (tokens,
    /// sign-ins) do not count.
    public var shortestRoundTrip: Duration? {
        let nanoseconds = shortestAnswer.load(ordering: .relaxed)
        return nanoseconds == .max ? nil : .nanoseconds(nanoseconds)
    }

    /// Keeps `response`'s time to first byte if it is the shortest yet.
    func noteAnswer(_ response: HTTPResponse) {
        guard let waited = response.timeToFirstByte else { return }
        let nanoseconds = waited.nanoseconds
        var current = shortestAnswer.load(ordering: .relaxed)
        while nanoseconds < current {
            let (exchanged, original) = shortestAnswer.compareExchange(
                expected: current, desired: nanoseconds, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// The reference to the root of the bucket.
    public func reference() -> StorageReference {
        StorageReference(storage: self, path: usable(StoragePath("")))
    }

    /// The reference to `path` in this bucket.
    public func reference(withPath path: String) -> StorageReference {
        reference().child(path)
    }

    /// The reference to exactly the object `name`, without the Firebase
    /// normalisation of `child(_:)`: for names with a trailing `/` (the
    /// `dir/` placeholders of directories) or empty segments. Meant for
    /// object operations (metadata, upload, download, delete, copy), not for
    /// navigation.
    public func reference(objectName name: String) -> StorageReference {
        StorageReference(storage: self, path: usable(StoragePath(verbatim: name)))
    }

    /// The reference named by a `gs://bucket/path` (or https download) URL,
    /// as Firebase's `reference(forURL:)`.
    ///
    /// Firebase traps on a malformed URL or one in another bucket; a server
    /// process must not. Here such input gives an *unusable* reference
    /// (`isUsable` is false, its path is the root, and its description says
    /// why): every operation on it, or on any reference derived from it with
    /// `child`, `parent` or `root`, fails with `StorageError.invalidArgument`
    /// naming the URL and the reason, and nothing is sent. The problem is
    /// also logged as a warning. To find out at once, use
    /// `reference(validatingURL:)`, which throws instead.
    public func reference(forURL url: String) -> StorageReference {
        do throws(StorageError) {
            return try reference(validatingURL: url)
        } catch {
            logger.warning("reference(forURL:) made an unusable reference", metadata: ["reason": "\(error)"])
            return StorageReference(storage: self, path: .unusable(Self.reason(error)))
        }
    }

    /// `reference(forURL:)` that throws `invalidArgument` when the URL is
    /// malformed or names another bucket.
    public func reference(validatingURL url: String) throws(StorageError) -> StorageReference {
        if let unusableReason { throw StorageError.invalidArgument(unusableReason) }
        let parsed = try StorageURL.parse(url)
        guard parsed.bucket == bucket else {
            throw StorageError.invalidArgument("\(url) is in bucket \(parsed.bucket), not in \(bucket)")
        }
        return reference().child(parsed.path)
    }

    /// Firebase's throwing form: `reference(validatingURL: url.absoluteString)`.
    public func reference(for url: URL) throws(StorageError) -> StorageReference {
        try reference(validatingURL: url.absoluteString)
    }

    private func usable(_ path: StoragePath) -> StoragePath {
        unusableReason.map(StoragePath.unusable) ?? path
    }

    /// The message of an `invalidArgument`, else the error's description.
    static func reason(_ error: StorageError) -> String {
        if case .invalidArgument(let message) = error { return message }
        return error.description
    }
}

extension Storage: Hashable {
    public static func == (a: Storage, b: Storage) -> Bool { a === b }
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// Where and how a `Storage` talks to its bucket. The credentials choose
/// the API (`StorageDialect`): the Cloud Storage JSON API, or the Firebase
/// Storage REST API for a Firebase Auth user.
public struct StorageConfiguration: Sendable {
    /// The JSON API's endpoint (`StorageDialect.jsonAPI.defaultEndpoint`).
    public static let defaultEndpoint = StorageDialect.jsonAPI.defaultEndpoint

    /// Where requests go: the endpoint set here, else the emulator the
    /// environment names for the credentials' dialect (`fromEnvironment`),
    /// else that dialect's default (storage.googleapis.com,
    /// firebasestorage.googleapis.com).
    public var endpoint: URL {
        get { explicitEndpoint ?? environmentEndpoints[dialect] ?? dialect.defaultEndpoint }
        set { explicitEndpoint = newValue }
    }
    public var credentials: any CredentialsProvider
    public var transport: HTTPTransport
    /// Objects up to this size go up in one multipart request; larger ones
    /// as resumable uploads.
    public var multipartThreshold: Int64
    /// The chunk of a resumable upload; rounded to a multiple of 256 KiB.
    public var uploadChunkSize: Int64
    public var logger: Logger
    /// The project billed for requests to a requester-pays bucket, sent as
    /// the JSON API's `userProject` parameter
    /// (https://cloud.google.com/storage/docs/requester-pays).
    public var billingProject: String?
    private var explicitEndpoint: URL?
    /// Emulators named by the environment, per dialect.
    private var environmentEndpoints: [StorageDialect: URL] = [:]

    /// The API requests speak, as the credentials choose it.
    public var dialect: StorageDialect { credentials.dialect }

    /// Whether requests go to the Firebase Local Emulator Suite's Storage
    /// emulator rather than Firebase Storage: the Firebase dialect over plain
    /// HTTP. Production Firebase Storage is served over HTTPS only, and every
    /// way to name the emulator (`FIREBASE_STORAGE_EMULATOR_HOST`,
    /// `useEmulator(withHost:port:)`, an `http://` endpoint) gives http.
    public var isFirebaseEmulator: Bool { dialect == .firebase && endpoint.scheme?.lowercased() == "http" }

    /// - Parameter endpoint: nil: the dialect's default endpoint.
    public init(
        endpoint: URL? = nil,
        credentials: any CredentialsProvider = AnonymousCredentials(),
        transport: HTTPTransport = .shared,
        multipartThreshold: Int64 = 8 << 20,
        uploadChunkSize: Int64 = 16 << 20,
        logger: Logger = Logger(label: "bucketfs.storage")
    ) {
        self.explicitEndpoint = endpoint
        self.credentials = credentials
        self.transport = transport
        self.multipartThreshold = multipartThreshold
        self.uploadChunkSize = uploadChunkSize
        self.logger = logger
    }

    /// Anonymous, with the emulators the environment names:
    /// `STORAGE_EMULATOR_HOST` for the JSON API (as Google's client
    /// libraries read it), `FIREBASE_STORAGE_EMULATOR_HOST` for Firebase
    /// credentials (as the Firebase SDKs do).
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> StorageConfiguration {
        var configuration = StorageConfiguration()
        for dialect in StorageDialect.allCases {
            if let host = environment[dialect.emulatorVariable], !host.isEmpty, let url = emulatorURL(host) {
                configuration.environmentEndpoints[dialect] = url
            }
        }
        return configuration
    }

    /// `localhost:9023`, `http://127.0.0.1:9023` or `http://host:port/` as a base URL.
    public static func emulatorURL(_ value: String) -> URL? {
        let withScheme = value.contains("://") ? value : "http://\(value)"
        let trimmed = withScheme.hasSuffix("/") ? String(withScheme.dropLast()) : withScheme
        return URL(string: trimmed)
    }
}
