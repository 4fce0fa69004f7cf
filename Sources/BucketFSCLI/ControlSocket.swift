import Crypto
import FlyingFox
import FlyingSocks
import Foundation
import FSCore
import Logging

/// Where a mount's control socket lives: one Unix socket per mountpoint in a
/// private (0700) directory of the user, named by a hash of the mountpoint's
/// real path (socket paths are limited to 107 bytes; mountpoints are not).
/// `bucketfs status` finds it from the mountpoint alone.
enum ControlSocketPath {
    /// `$XDG_RUNTIME_DIR/bucketfs`, else `/run/bucketfs` for root, else
    /// `/tmp/bucketfs-UID`.
    static func directory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty { return runtime + "/bucketfs" }
        return getuid() == 0 ? "/run/bucketfs" : "/tmp/bucketfs-\(getuid())"
    }

    static func socket(forMountpoint mountpoint: String) -> String {
        directory() + "/" + hashedName(MountWatch.absolute(mountpoint), bytes: 12) + ".sock"
    }
}

/// A file name derived from `text`: the first `bytes` bytes of its SHA-256
/// in hex (for names that must be short, fixed and free of `/`).
func hashedName(_ text: String, bytes: Int) -> String {
    SHA256.hash(data: Data(text.utf8)).prefix(bytes).map { String(format: "%02x", $0) }.joined()
}

/// What `GET /status` answers: the mount as a whole, then the core's view.
struct MountStatusReport: Codable, Sendable {
    var mountpoint: String
    var bucket: String
    var prefix: String
    var pid: Int32
    var startedAt: Date
    var uptimeSeconds: Double
    var readOnly: Bool
    var cacheDirectory: String
    /// The credentials' type and identity, never a secret (nil from a
    /// mount of an older bucketfs, which did not report them).
    var credentials: String?
    var settings: [String: String]
    var filesystem: FileSystemStatus
}

/// What `POST /drop-caches` answers.
struct DropCachesReport: Codable, Sendable {
    var kernelNames: Int
    var kernelInodes: Int
    var kernelAccepted: Int
}

/// The mount's side: an HTTP server (FlyingFox) on the control socket,
/// `GET /status` and `POST /drop-caches`. Only the mount's user (or root)
/// can reach it: the socket's directory is 0700.
final class ControlServer: Sendable {
    let path: String
    private let server: BackgroundHTTPServer
    private let logger: Logger

    private let status: @Sendable () -> MountStatusReport
    private let dropCaches: @Sendable () -> DropCachesReport

    init(path: String, status: @escaping @Sendable () -> MountStatusReport,
         dropCaches: @escaping @Sendable () -> DropCachesReport, logger: Logger) throws {
        self.path = path
        self.logger = logger
        self.status = status
        self.dropCaches = dropCaches
        try Self.makePrivateDirectory((path as NSString).deletingLastPathComponent)
        // A socket file left by a mount that was killed on this mountpoint.
        unlink(path)
        server = BackgroundHTTPServer(HTTPServer(address: .unix(path: path), logger: .disabled), name: "control socket \(path)")
    }

    /// The directory must be ours, a real directory (not a symlink someone
    /// planted in /tmp) and closed to others: the socket's permissions are
    /// not honoured everywhere, the directory's are.
    private static func makePrivateDirectory(_ directory: String) throws {
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        var info = stat()
        guard lstat(directory, &info) == 0 else {
            throw CLIError.bucket("cannot create \(directory): \(String(cString: strerror(errno)))", exitCode: 1)
        }
        guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == getuid() else {
            throw CLIError.bucket("\(directory) is not a directory of this user; refusing to put the control socket there", exitCode: 1)
        }
        guard chmod(directory, 0o700) == 0 else {
            throw CLIError.bucket("cannot make \(directory) private: \(String(cString: strerror(errno)))", exitCode: 1)
        }
    }

    private static func json(_ value: some Encodable) throws -> HTTPResponse {
        HTTPResponse(statusCode: .ok, headers: [.contentType: "application/json"], body: try ControlClient.encoder.encode(value))
    }

    /// Starts serving; returns once the socket listens.
    func start() async throws {
        let status = self.status
        let dropCaches = self.dropCaches
        await server.server.appendRoute("GET /status") { _ in try Self.json(status()) }
        await server.server.appendRoute("POST /drop-caches") { _ in try Self.json(dropCaches()) }
        try await server.start(logger: logger)
        logger.debug("control socket listening", metadata: ["socket": "\(path)"])
    }

    func stop() async {
        await server.stop()
        unlink(path)
    }
}

/// `bucketfs status`'s side of the control socket.
enum ControlClient {
    static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .iso8601
        return encoder
    }()

    static let decoder: JSONDecoder = {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return decoder
    }()

    struct Unreachable: Error, CustomStringConvertible {
        let description: String
    }

    static func request<Reply: Decodable>(_ method: HTTPMethod, _ path: String, socket: String, as: Reply.Type) async throws -> Reply {
        let response: HTTPResponse
        do {
            response = try await withThrowingTaskGroup(of: HTTPResponse?.self) { group in
                group.addTask {
                    var client = HTTPClient()
                    return try await client.sendHTTPRequest(HTTPRequest(method: method, version: .http11, path: path, query: [], headers: [.host: "bucketfs", .connection: "close"], body: Data()), to: sockaddr_un.unix(path: socket))
                }
                group.addTask {
                    try await Task.sleep(for: .seconds(10))
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let response = first else {
                    throw Unreachable(description: "no answer within 10 s on \(socket)")
                }
                return response
            }
        } catch let error as Unreachable {
            throw error
        } catch {
            throw Unreachable(description: "cannot reach \(socket): \(error)")
        }
        guard response.statusCode == .ok else { throw Unreachable(description: "\(socket) answered \(response.statusCode.code)") }
        return try decoder.decode(Reply.self, from: try await response.bodyData)
    }
}
