import Foundation
import Logging
import StorageKit
#if canImport(Glibc)
import Glibc
#endif

/// Where written bytes go when they could not be uploaded, so that nothing
/// written is ever lost silently: `CACHE/recovery/BUCKET/OBJECT-NAME` holds
/// the bytes, and `CACHE/recovery/BUCKET/OBJECT-NAME.bucketfs-pending.json`
/// beside it says where they were going (bucket, object, the generation
/// precondition, the standard properties, custom metadata, why the upload
/// failed).
/// A person finds a file under its own name; `bucketfs mount
/// --retry-pending` uploads every entry (see `retryAll`).
public struct RecoveryFolder: Sendable {
    public static let sidecarSuffix = ".bucketfs-pending.json"
    /// Beside a staged file: where its bytes are going (see `adoptLeftovers`).
    static let journalSuffix = ".json"

    public let root: String
    let bucket: String
    let logger: Logger

    public init(cacheDirectory: String, bucket: String, logger: Logger) {
        self.root = cacheDirectory + "/recovery"
        self.bucket = bucket
        self.logger = logger
    }

    /// Where a mount with this cache directory stages files being written.
    public static func stagingDirectory(cacheDirectory: String) -> String { cacheDirectory + "/staging" }

    var bucketDirectory: String { root + "/" + (bucket.isEmpty ? "_" : bucket) }

    /// The local path for `objectName`. Object names may hold segments a
    /// path cannot (`..`, empty ones): those are escaped.
    public func path(for objectName: String) -> String {
        let segments = objectName.split(separator: "/", omittingEmptySubsequences: false).map { segment -> String in
            switch segment {
            case "": return "%empty"
            case ".": return "%2E"
            case "..": return "%2E%2E"
            default: return String(segment)
            }
        }
        return bucketDirectory + "/" + segments.joined(separator: "/")
    }

    /// What a sidecar records. The standard properties are stored flat
    /// beside the other fields (`contentType`, `cacheControl`, ...), so a
    /// sidecar of an older bucketfs, which kept `contentType` only, reads
    /// as an entry with that one property. Its standard properties read as
    /// `entry.contentType` and so on.
    @dynamicMemberLookup
    public struct Entry: Codable, Sendable, Equatable {
        public var bucket: String
        public var object: String
        /// The upload's precondition (0: the object must not exist).
        public var ifGenerationMatch: Int64?
        /// The upload's standard properties, all five.
        public var properties: ObjectProperties
        public var metadata: [String: String]
        public var size: Int64
        public var savedAt: Date
        public var reason: String
        /// Set when the mount stopped retrying this entry in the background
        /// (someone else changed the object meanwhile, or the service
        /// refused it for good): why. `--retry-pending` still tries it.
        public var retryStopped: String?

        public init(
            bucket: String, object: String, ifGenerationMatch: Int64?, properties: ObjectProperties, metadata: [String: String],
            size: Int64, savedAt: Date, reason: String, retryStopped: String? = nil
        ) {
            self.bucket = bucket
            self.object = object
            self.ifGenerationMatch = ifGenerationMatch
            self.properties = properties
            self.metadata = metadata
            self.size = size
            self.savedAt = savedAt
            self.reason = reason
            self.retryStopped = retryStopped
        }

        public subscript<T>(dynamicMember property: KeyPath<ObjectProperties, T>) -> T { properties[keyPath: property] }

        /// The upload's options: the recorded precondition, standard
        /// properties and metadata.
        var putOptions: PutOptions {
            PutOptions(properties: properties, customMetadata: metadata, ifGenerationMatch: ifGenerationMatch)
        }

        private enum CodingKeys: String, CodingKey {
            case bucket, object, ifGenerationMatch, metadata, size, savedAt, reason, retryStopped
        }

        public init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            bucket = try c.decode(String.self, forKey: .bucket)
            object = try c.decode(String.self, forKey: .object)
            ifGenerationMatch = try c.decodeIfPresent(Int64.self, forKey: .ifGenerationMatch)
            properties = try ObjectProperties(from: decoder)
            metadata = try c.decode([String: String].self, forKey: .metadata)
            size = try c.decode(Int64.self, forKey: .size)
            savedAt = try c.decode(Date.self, forKey: .savedAt)
            reason = try c.decode(String.self, forKey: .reason)
            retryStopped = try c.decodeIfPresent(String.self, forKey: .retryStopped)
        }

        public func encode(to encoder: any Encoder) throws {
            try properties.encode(to: encoder)
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(bucket, forKey: .bucket)
            try c.encode(object, forKey: .object)
            try c.encodeIfPresent(ifGenerationMatch, forKey: .ifGenerationMatch)
            try c.encode(metadata, forKey: .metadata)
            try c.encode(size, forKey: .size)
            try c.encode(savedAt, forKey: .savedAt)
            try c.encode(reason, forKey: .reason)
            try c.encodeIfPresent(retryStopped, forKey: .retryStopped)
        }
    }

    /// Copies `localPath` (a staged file) for `objectName`; returns where,
    /// or nil if even that failed (logged: then the bytes are only in the
    /// staged file, which stays until release).
    /// `notRetried`: why the mount will not retry it in the background (the
    /// sidecar's `retryStopped` from the start, so `bucketfs status` says so).
    func save(
        _ localPath: String, objectName: String, options: PutOptions, reason: String, notRetried: String? = nil,
        move: Bool = false
    ) -> String? {
        let target = path(for: objectName)
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            // A newer failed upload of the same object supersedes an older one.
            try? fm.removeItem(atPath: target)
            if move {
                try fm.moveItem(atPath: localPath, toPath: target)
            } else {
                try fm.copyItem(atPath: localPath, toPath: target)
            }
            var info = stat()
            let size = stat(target, &info) == 0 ? Int64(info.st_size) : 0
            let entry = Entry(
                bucket: bucket, object: objectName, ifGenerationMatch: options.ifGenerationMatch, properties: options.properties,
                metadata: options.customMetadata, size: size, savedAt: Date(), reason: reason, retryStopped: notRetried)
            try Self.write(entry, to: target + Self.sidecarSuffix)
            return target
        } catch {
            logger.critical("cannot keep unsaved bytes in the recovery folder", metadata: [
                "object": "\(objectName)", "target": "\(target)", "cause": "\(error)"])
            return nil
        }
    }

    static func write(_ entry: Entry, to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.dateEncodingStrategy = .iso8601
        try LocalFile.replace(path, with: try encoder.encode(entry))
    }

    static func read(_ path: String) -> Entry? {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return FileManager.default.contents(atPath: path).flatMap { try? decoder.decode(Entry.self, from: $0) }
    }

    /// Drops the recovery copy of `objectName` (its upload has succeeded).
    func remove(objectName: String) {
        // Called after every upload: one unlink that usually finds nothing.
        let target = path(for: objectName)
        guard unlink(target + Self.sidecarSuffix) == 0 else { return }
        unlink(target)
    }

    /// Uploads one entry (the bytes at `path`) with its recorded
    /// precondition, and removes it once uploaded, unless a newer failed
    /// upload of the same object replaced it meanwhile. The bytes are read
    /// from a hard link taken first, so a replacement written while the
    /// upload runs can neither be mixed into it nor be removed by it.
    ///
    /// `whenUploaded` runs after the upload and before the entry is removed,
    /// so whoever sees the entry gone also sees what it did.
    public func upload(
        _ path: String, _ entry: Entry, store: any ObjectStore, whenUploaded: (ObjectInfo) -> Void = { _ in }
    ) async throws(StoreError) -> ObjectInfo {
        let snapshot = root + "/.uploading-\(getpid())-\(UUID().uuidString.prefix(8))"
        let source = link(path, snapshot) == 0 ? snapshot : path
        defer { if source == snapshot { unlink(snapshot) } }
        let info = try await store.put(entry.object, from: source, options: entry.putOptions)
        whenUploaded(info)
        let sidecar = self.path(for: entry.object) + Self.sidecarSuffix
        if let current = Self.read(sidecar), current.savedAt == entry.savedAt, current.size == entry.size {
            remove(objectName: entry.object)
        }
        return info
    }

    /// Records in `objectName`'s sidecar why background retries stopped.
    func markStopped(objectName: String, savedAt: Date, reason: String) {
        let sidecar = path(for: objectName) + Self.sidecarSuffix
        guard var entry = Self.read(sidecar), entry.savedAt == savedAt else { return }
        entry.retryStopped = reason
        try? Self.write(entry, to: sidecar)
    }

    /// Every pending entry, with the path of its bytes.
    public func pending() -> [(path: String, entry: Entry)] {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        var found: [(String, Entry)] = []
        while let relative = walker.nextObject() as? String {
            guard relative.hasSuffix(Self.sidecarSuffix) else { continue }
            let sidecar = root + "/" + relative
            let bytes = String(sidecar.dropLast(Self.sidecarSuffix.count))
            guard let entry = Self.read(sidecar), FileManager.default.fileExists(atPath: bytes)
            else {
                logger.warning("unreadable recovery entry left alone", metadata: ["sidecar": "\(sidecar)"])
                continue
            }
            found.append((bytes, entry))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    /// Uploads every pending entry of this bucket (those whose background
    /// retries stopped too) by the rules of `retry`. Returns the paths
    /// uploaded and the ones that were not (with why).
    public func retryAll(store: any ObjectStore) async -> (uploaded: [String], failed: [(String, StoreError)]) {
        await retry(pending().filter { $0.entry.bucket == bucket }, store: store, success: "recovered: uploaded a pending file")
    }

    /// The one retry routine, for `--retry-pending` (`retryAll`) and the
    /// background loop (`RecoveryRetrier`): each entry is uploaded with its
    /// recorded precondition and options and removed once uploaded
    /// (`whenUploaded` runs first). A transient failure ends the pass: the
    /// service is still unreachable, and the entries after it would only
    /// spend their retry budgets the same way (they are reported with that
    /// cause). Any other failure (someone else changed the object, the
    /// service refuses it for good) is written into the entry's sidecar
    /// (`retryStopped`), so no background pass tries it again. An entry
    /// `skip` names (its object is being written in the mount) is left for
    /// that file's own upload. `success` is the notice logged per upload.
    func retry(
        _ entries: [(path: String, entry: Entry)], store: any ObjectStore, success: String, skip: (String) -> Bool = { _ in false },
        whenUploaded: (Entry, ObjectInfo) -> Void = { _, _ in }
    ) async -> (uploaded: [String], failed: [(String, StoreError)]) {
        var uploaded: [String] = []
        var failed: [(String, StoreError)] = []
        for (index, (path, entry)) in entries.enumerated() where !skip(entry.object) {
            do throws(StoreError) {
                _ = try await upload(path, entry, store: store) { info in whenUploaded(entry, info) }
                uploaded.append(path)
                logger.notice("\(success)", metadata: [
                    "object": "\(entry.object)", "size": "\(entry.size)", "from": "\(path)"])
            } catch where error.isTransient {
                logger.info("recovery entry still not uploaded; the service is unreachable", metadata: [
                    "object": "\(entry.object)", "cause": "\(error)"])
                failed += entries[index...].filter { !skip($0.entry.object) }.map { ($0.path, error) }
                break
            } catch {
                failed.append((path, error))
                let why = if case .preconditionFailed = error { "the object changed since the bytes were written" } else { "\(error)" }
                markStopped(objectName: entry.object, savedAt: entry.savedAt, reason: why)
                logger.error("recovery entry not uploaded; it stays in the recovery folder", metadata: [
                    "object": "\(entry.object)", "path": "\(path)", "cause": "\(error)"])
            }
        }
        return (uploaded, failed)
    }

    /// Staged files a previous process left behind (it crashed or was
    /// killed before it could upload them). A staged file gets a journal
    /// (`ID.json`, a recovery entry) at its first write, so those are moved
    /// into the recovery folder under their object's name, reported and
    /// retried like any failed upload; one without a journal holds no
    /// written bytes (a copy of an object, or empty) and is deleted. With
    /// no recovery folder they stay in `staging-leftovers/`. Creates the
    /// staging directory.
    public static func adoptLeftovers(staging: String, recovery: RecoveryFolder?, logger: Logger) {
        let fm = FileManager.default
        let names = Set((try? fm.contentsOfDirectory(atPath: staging)) ?? [])
        for name in names where !name.hasSuffix(journalSuffix) {
            let bytes = staging + "/" + name
            let journal = bytes + journalSuffix
            guard names.contains(name + journalSuffix), let entry = read(journal) else {
                try? fm.removeItem(atPath: bytes)
                continue
            }
            let options = entry.putOptions
            let reason = "written through a mount that ended before uploading it"
            if let saved = recovery?.save(bytes, objectName: entry.object, options: options, reason: reason, move: true) {
                try? fm.removeItem(atPath: journal)
                logger.warning("a previous mount left unsaved writes; kept in the recovery folder", metadata: [
                    "object": "\(entry.object)", "path": "\(saved)"])
            } else {
                let kept = staging + "-leftovers"
                try? fm.createDirectory(atPath: kept, withIntermediateDirectories: true)
                try? fm.moveItem(atPath: bytes, toPath: kept + "/" + name)
                try? fm.moveItem(atPath: journal, toPath: kept + "/" + name + journalSuffix)
                logger.error("a previous mount left unsaved writes", metadata: ["object": "\(entry.object)", "path": "\(kept)/\(name)"])
            }
        }
        for name in names where name.hasSuffix(journalSuffix) && !names.contains(String(name.dropLast(journalSuffix.count))) {
            try? fm.removeItem(atPath: staging + "/" + name)
        }
        makeStagingDirectory(staging, logger: logger)
    }

    static func makeStagingDirectory(_ staging: String, logger: Logger) {
        do {
            try FileManager.default.createDirectory(atPath: staging, withIntermediateDirectories: true)
        } catch {
            logger.error("cannot create the staging directory: writes will fail", metadata: ["directory": "\(staging)", "cause": "\(error)"])
        }
    }
}
