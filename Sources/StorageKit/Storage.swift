import Foundation
import Logging
import Synchronization
import Transport

/// The entry point of StorageKit, as in the Firebase SDK: one `Storage` per
/// bucket, from which references are made.
///
///     let storage = Storage.storage(url: "gs://my-bucket")
///     let ref = storage.reference().child("images/space.jpg")
///
/// Where requests go: `https://storage.googleapis.com` by default; the
/// `STORAGE_EMULATOR_HOST` environment variable (as Google's client libraries
/// read it: `host:port` or a URL) or `useEmulator(withHost:port:)` point it
/// at an emulator with anonymous credentials; `StorageConfiguration` sets any
/// endpoint and credentials explicitly.
public final class Storage: Sendable {
    public let bucket: String
    private let settings: Mutex<StorageConfiguration>
    let logger: Logger

    public init(bucket: String, configuration: StorageConfiguration = StorageConfiguration()) {
        self.bucket = bucket
        self.settings = Mutex(configuration)
        self.logger = configuration.logger
    }

    /// A `Storage` for `gs://bucket` (a path after the bucket is ignored).
    /// Honours `STORAGE_EMULATOR_HOST`.
    public static func storage(url: String, configuration: StorageConfiguration = .fromEnvironment()) -> Storage {
        let bucket = (try? StorageURL.parse(url).bucket) ?? url
        return Storage(bucket: bucket, configuration: configuration)
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

    /// The reference to the root of the bucket.
    public func reference() -> StorageReference {
        StorageReference(storage: self, path: StoragePath(""))
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
        StorageReference(storage: self, path: StoragePath(verbatim: name))
    }

    /// The reference named by a `gs://bucket/path` (or https download) URL.
    /// Throws `invalidArgument` when the URL is malformed or names another
    /// bucket (where Firebase would raise an exception).
    public func reference(forURL url: String) throws -> StorageReference {
        let parsed = try StorageURL.parse(url)
        guard parsed.bucket == bucket else {
            throw StorageError.invalidArgument("\(url) is in bucket \(parsed.bucket), not in \(bucket)")
        }
        return reference().child(parsed.path)
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
    private var explicitEndpoint: URL?
    /// Emulators named by the environment, per dialect.
    private var environmentEndpoints: [StorageDialect: URL] = [:]

    /// The API requests speak, as the credentials choose it.
    public var dialect: StorageDialect { credentials.dialect }

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
