import Foundation
import Logging
import Synchronization

/// The default app, as Firebase's server SDKs find it on a machine without
/// `GoogleService-Info.plist`: `Storage.storage()` and
/// `Storage.storage(url:)` need no argument beyond the Firebase one.
///
/// - **Bucket** (`storage()` only): `storageBucket` of `FIREBASE_CONFIG`,
///   which holds either the JSON itself (when it starts with `{`) or the
///   path of a JSON file, as Firebase Admin SDKs and Cloud Functions use it:
///
///       FIREBASE_CONFIG='{"projectId":"my-app","storageBucket":"my-app.firebasestorage.app"}'
///
///   The bucket is *not* guessed from `GOOGLE_CLOUD_PROJECT`: projects made
///   since October 2024 have `PROJECT.firebasestorage.app`, older ones
///   `PROJECT.appspot.com`, and a wrong guess would send every request to a
///   bucket that is not the app's (or is someone else's).
/// - **Endpoint and credentials** (both): a Firebase user when the
///   environment names one (`FirebaseAuthCredentials.fromEnvironment`:
///   the Firebase Storage REST API at `FIREBASE_STORAGE_EMULATOR_HOST` or
///   firebasestorage.googleapis.com, signed in with the API key of
///   `FIREBASE_CONFIG`); else `STORAGE_EMULATOR_HOST` names an emulator
///   (anonymous); otherwise `https://storage.googleapis.com` with
///   `Credentials.fromEnvironment` (`GOOGLE_APPLICATION_CREDENTIALS`, then
///   `GCE_METADATA_HOST`, else anonymous).
///
/// Both return one shared instance per bucket, as Firebase does, so
/// `Storage.storage().callbackQueue = .main` holds for later calls. The
/// environment is read when a bucket's instance is first made.
///
/// Neither traps. Without a bucket, `storage()` logs an error and returns an
/// instance whose every operation fails with `StorageError.invalidArgument`
/// saying which variable to set; unusable credentials fail every request
/// with `unauthenticated` naming the file or variable. Use
/// `storageFromEnvironment()` to get those errors thrown at startup instead.
extension Storage {
    /// The default app's `Storage` (bucket from `FIREBASE_CONFIG`).
    public static func storage() -> Storage {
        shared(key: nil) {
            do throws(StorageError) {
                return try storageFromEnvironment()
            } catch {
                let configuration = StorageConfiguration.defaultApp()
                configuration.logger.error("Storage.storage() has no bucket", metadata: ["reason": "\(error)"])
                return Storage(unusable: Self.reason(error), configuration: configuration)
            }
        }
    }

    /// The shared `Storage` of the bucket of `url` (`gs://bucket`; a path
    /// after the bucket is ignored), with the default app's endpoint and
    /// credentials.
    public static func storage(url: String) -> Storage {
        let bucket = (try? StorageURL.parse(url).bucket) ?? url
        return shared(key: bucket) { Storage(bucket: bucket, configuration: .defaultApp()) }
    }

    /// A new `Storage` for the default app of `environment`, or the reason
    /// there is none: `FIREBASE_CONFIG` unset, unreadable, not JSON, or
    /// without `storageBucket` (`invalidArgument`), or credentials that
    /// cannot be loaded (`unauthenticated`).
    public static func storageFromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(StorageError) -> Storage {
        let bucket = try defaultBucket(environment)
        let configuration = try StorageConfiguration.defaultAppOrError(environment)
        return Storage(bucket: bucket, configuration: configuration)
    }

    /// The default app's bucket: `storageBucket` of `FIREBASE_CONFIG`.
    public static func defaultBucket(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(StorageError) -> String {
        if let bucket = try FirebaseConfig.fromEnvironment(environment)?.storageBucket { return bucket }
        var message = "Storage.storage() needs the default app's bucket: set FIREBASE_CONFIG to JSON with "
            + "\"storageBucket\" (FIREBASE_CONFIG='{\"storageBucket\":\"my-app.firebasestorage.app\"}') or to the "
            + "path of such a file, or name the bucket with Storage.storage(url: \"gs://BUCKET\")"
        if let project = environment["GOOGLE_CLOUD_PROJECT"], !project.isEmpty {
            message += ". GOOGLE_CLOUD_PROJECT=\(project) is set, but the bucket is not guessed from it: it is "
                + "\(project).firebasestorage.app for projects made since October 2024, \(project).appspot.com before"
        }
        throw StorageError.invalidArgument(message)
    }

    /// Instances of `storage()` (key nil) and `storage(url:)` (key: bucket).
    private static let instances = Mutex<[String?: Storage]>([:])

    private static func shared(key: String?, make: () -> Storage) -> Storage {
        instances.withLock { cache in
            if let existing = cache[key] { return existing }
            let made = make()
            cache[key] = made
            return made
        }
    }
}

extension StorageConfiguration {
    /// The default app's endpoint and credentials (see `Storage.storage()`).
    /// Credentials that cannot be loaded become a provider that fails every
    /// request with the reason, so this never throws.
    public static func defaultApp(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> StorageConfiguration {
        do {
            return try defaultAppOrError(environment)
        } catch {
            var configuration = fromEnvironment(environment)
            configuration.credentials = UnusableCredentials(reason: "\(error)")
            return configuration
        }
    }

    static func defaultAppOrError(_ environment: [String: String]) throws(StorageError) -> StorageConfiguration {
        var configuration = fromEnvironment(environment)
        do {
            if let user = try FirebaseAuthCredentials.fromEnvironment(environment) {
                configuration.credentials = user
                return configuration
            }
            if let host = environment["STORAGE_EMULATOR_HOST"], !host.isEmpty { return configuration }
            configuration.credentials = try Credentials.fromEnvironment(environment)
        } catch {
            throw StorageError.unauthenticated("credentials: \(error)")
        }
        return configuration
    }
}

/// Credentials that could not be loaded: every request fails with why.
struct UnusableCredentials: CredentialsProvider, CustomStringConvertible {
    let reason: String
    func authorizationHeader() async throws -> String? { throw StorageError.unauthenticated(reason) }
    var description: String { "UnusableCredentials(\(reason))" }
}

/// The Firebase app settings of `FIREBASE_CONFIG`: the JSON itself when the
/// value starts with `{`, else the path of a JSON file (the convention of
/// Firebase's Admin SDKs). Unknown keys are ignored.
public struct FirebaseConfig: Sendable, Equatable {
    public static let environmentVariable = "FIREBASE_CONFIG"

    /// The app's default bucket, without `gs://` (a `gs://` prefix and a
    /// trailing `/` in the JSON are accepted and removed).
    public var storageBucket: String?
    public var projectId: String?
    /// The web API key. The JSON API dialect does not use it; Firebase Auth does.
    public var apiKey: String?

    public init(storageBucket: String? = nil, projectId: String? = nil, apiKey: String? = nil) {
        self.storageBucket = storageBucket
        self.projectId = projectId
        self.apiKey = apiKey
    }

    /// The settings of `FIREBASE_CONFIG`; nil when it is unset or empty.
    /// Throws `invalidArgument` when it is set but cannot be read or is not
    /// a JSON object.
    public static func fromEnvironment(
        _ environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws(StorageError) -> FirebaseConfig? {
        guard let value = environment[environmentVariable]?.trimmingCharacters(in: .whitespacesAndNewlines),
              !value.isEmpty else { return nil }
        if value.hasPrefix("{") {
            return try FirebaseConfig(json: Data(value.utf8), source: "\(environmentVariable) (inline JSON)")
        }
        let json: Data
        do {
            json = try Data(contentsOf: URL(fileURLWithPath: value))
        } catch {
            throw StorageError.invalidArgument(
                "\(environmentVariable) names \(value), which cannot be read (\(CredentialsError.reason(error))); "
                    + "it must be JSON or the path of a JSON file")
        }
        return try FirebaseConfig(json: json, source: "\(environmentVariable) file \(value)")
    }

    /// Parses the JSON object of a Firebase config; `source` names it in errors.
    public init(json: Data, source: String) throws(StorageError) {
        guard let object = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw StorageError.invalidArgument("\(source) is not a JSON object")
        }
        func text(_ key: String) -> String? {
            guard let value = object[key] as? String, !value.isEmpty else { return nil }
            return value
        }
        self.init(storageBucket: text("storageBucket").flatMap(Self.bucketName), projectId: text("projectId"), apiKey: text("apiKey"))
    }

    private static func bucketName(_ value: String) -> String? {
        var name = Substring(value)
        if name.hasPrefix("gs://") { name = name.dropFirst(5) }
        while name.hasSuffix("/") { name = name.dropLast() }
        return name.isEmpty ? nil : String(name)
    }
}
