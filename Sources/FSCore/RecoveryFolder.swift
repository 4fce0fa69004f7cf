import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Where written bytes go when they could not be uploaded, so that nothing
/// written is ever lost silently: `CACHE/recovery/BUCKET/OBJECT-NAME` holds
/// the bytes, and `CACHE/recovery/BUCKET/OBJECT-NAME.bucketfs-pending.json`
/// beside it says where they were going (bucket, object, the generation
/// precondition, content type, custom metadata, why the upload failed).
/// A person finds a file under its own name; `bucketfs mount
/// --retry-pending` uploads every entry (see `retryAll`).
public struct RecoveryFolder: Sendable {
    public static let sidecarSuffix = ".bucketfs-pending.json"

    public let root: String
    let bucket: String
    let logger: Logger

    public init(cacheDirectory: String, bucket: String, logger: Logger) {
        self.root = cacheDirectory + "/recovery"
        self.bucket = bucket
        self.logger = logger
    }

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

    /// What a sidecar records.
    public struct Entry: Codable, Sendable, Equatable {
        public var bucket: String
        public var object: String
        /// The upload's precondition (0: the object must not exist).
        public var ifGenerationMatch: Int64?
        public var contentType: String?
        public var metadata: [String: String]
        public var size: Int64
        public var savedAt: Date
        public var reason: String
    }

    /// Copies `localPath` (a staged file) for `objectName`; returns where,
    /// or nil if even that failed (logged: then the bytes are only in the
    /// staged file, which stays until release).
    func save(_ localPath: String, objectName: String, options: PutOptions, reason: String) -> String? {
        let target = path(for: objectName)
        let fm = FileManager.default
        do {
            try fm.createDirectory(atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try? fm.removeItem(atPath: target)
            try fm.copyItem(atPath: localPath, toPath: target)
            let size = (try? fm.attributesOfItem(atPath: target)[.size] as? NSNumber)?.int64Value ?? 0
            let entry = Entry(
                bucket: bucket, object: objectName, ifGenerationMatch: options.ifGenerationMatch, contentType: options.contentType,
                metadata: options.customMetadata, size: size, savedAt: Date(), reason: reason)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            encoder.dateEncodingStrategy = .iso8601
            try encoder.encode(entry).write(to: URL(fileURLWithPath: target + Self.sidecarSuffix), options: .atomic)
            return target
        } catch {
            logger.critical("cannot keep unsaved bytes in the recovery folder", metadata: [
                "object": "\(objectName)", "target": "\(target)", "cause": "\(error)"])
            return nil
        }
    }

    /// Drops the recovery copy of `objectName` (its upload has succeeded).
    func remove(objectName: String) {
        let target = path(for: objectName)
        guard FileManager.default.fileExists(atPath: target + Self.sidecarSuffix) else { return }
        try? FileManager.default.removeItem(atPath: target)
        try? FileManager.default.removeItem(atPath: target + Self.sidecarSuffix)
    }

    /// Every pending entry, with the path of its bytes.
    public func pending() -> [(path: String, entry: Entry)] {
        guard let walker = FileManager.default.enumerator(atPath: root) else { return [] }
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        var found: [(String, Entry)] = []
        while let relative = walker.nextObject() as? String {
            guard relative.hasSuffix(Self.sidecarSuffix) else { continue }
            let sidecar = root + "/" + relative
            let bytes = String(sidecar.dropLast(Self.sidecarSuffix.count))
            guard let data = FileManager.default.contents(atPath: sidecar),
                let entry = try? decoder.decode(Entry.self, from: data),
                FileManager.default.fileExists(atPath: bytes)
            else {
                logger.warning("unreadable recovery entry left alone", metadata: ["sidecar": "\(sidecar)"])
                continue
            }
            found.append((bytes, entry))
        }
        return found.sorted { $0.0 < $1.0 }
    }

    /// Uploads every pending entry of this bucket with its recorded
    /// precondition; an entry that uploads is removed. Returns the paths
    /// uploaded and the ones that failed (with why).
    public func retryAll(store: any ObjectStore) async -> (uploaded: [String], failed: [(String, StoreError)]) {
        var uploaded: [String] = []
        var failed: [(String, StoreError)] = []
        for (path, entry) in pending() where entry.bucket == bucket {
            do {
                _ = try await store.put(entry.object, from: path, options: PutOptions(
                    contentType: entry.contentType, customMetadata: entry.metadata, ifGenerationMatch: entry.ifGenerationMatch))
                remove(objectName: entry.object)
                uploaded.append(path)
                logger.notice("recovered: uploaded a pending file", metadata: ["object": "\(entry.object)", "from": "\(path)"])
            } catch {
                failed.append((path, error))
                logger.error("pending file not uploaded; it stays in the recovery folder", metadata: [
                    "object": "\(entry.object)", "path": "\(path)", "cause": "\(error)"])
            }
        }
        return (uploaded, failed)
    }

    /// Staged files a previous process left behind (it crashed or was
    /// killed with unsaved writes): their object names are unknown, so
    /// they are moved to `recovery/unattributed/` for a person to look at,
    /// never deleted. Creates the staging directory.
    static func adoptLeftovers(staging: String, recovery: RecoveryFolder?, logger: Logger) {
        let fm = FileManager.default
        let leftovers = (try? fm.contentsOfDirectory(atPath: staging)) ?? []
        if !leftovers.isEmpty {
            let target = (recovery?.root ?? staging + "-leftovers") + "/unattributed"
            let stamp = Int(Date().timeIntervalSince1970)
            for name in leftovers {
                let source = staging + "/" + name
                if let size = (try? fm.attributesOfItem(atPath: source)[.size]) as? NSNumber, size.int64Value == 0 {
                    // No bytes to lose.
                    try? fm.removeItem(atPath: source)
                    continue
                }
                let destination = "\(target)/\(stamp)-\(name)"
                do {
                    try fm.createDirectory(atPath: target, withIntermediateDirectories: true)
                    try fm.moveItem(atPath: source, toPath: destination)
                    logger.warning("a previous mount left unsaved bytes; kept for you", metadata: ["path": "\(destination)"])
                } catch {
                    logger.error("cannot move a leftover staged file", metadata: ["path": "\(staging)/\(name)", "cause": "\(error)"])
                }
            }
        }
        do {
            try fm.createDirectory(atPath: staging, withIntermediateDirectories: true)
        } catch {
            logger.error("cannot create the staging directory: writes will fail", metadata: ["directory": "\(staging)", "cause": "\(error)"])
        }
    }
}
