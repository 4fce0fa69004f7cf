import Foundation

/// Resumable uploads that Ctrl-C interrupted, so the next identical `cp`
/// or `put` goes on where the server stopped instead of starting over.
/// One small JSON file per upload in `~/.cache/bucketfs/uploads/` (or
/// `$XDG_CACHE_HOME/bucketfs/uploads/`), named by a hash of the bucket,
/// object and absolute local path; it holds the session URI, which is as
/// good as a credential for that one upload, so the directory is 0700.
struct InterruptedUploads {
    struct Entry: Codable, Equatable {
        var bucket: String
        var object: String
        var file: String
        var size: Int64
        var modified: Double
        var sessionURI: String
        var savedAt: Date
    }

    let directory: String

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        let cache = environment["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"] ?? "/tmp") + "/.cache"
        directory = cache + "/bucketfs/uploads"
    }

    func path(bucket: String, object: String, file: String) -> String {
        directory + "/" + hashedName("\(bucket)\n\(object)\n\(file)", bytes: 16) + ".json"
    }

    func load(bucket: String, object: String, file: String) -> Entry? {
        guard let data = FileManager.default.contents(atPath: path(bucket: bucket, object: object, file: file)) else { return nil }
        return try? Self.decoder.decode(Entry.self, from: data)
    }

    func save(_ entry: Entry) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let target = path(bucket: entry.bucket, object: entry.object, file: entry.file)
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(entry).write(to: URL(fileURLWithPath: target), options: .atomic)
        chmod(target, 0o600)
    }

    func remove(bucket: String, object: String, file: String) {
        unlink(path(bucket: bucket, object: object, file: file))
    }

    private static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()
}
