import Crypto
import Foundation
import GRPCCore
#if canImport(Glibc)
import Glibc
#endif

/// Where the node service keeps what a publication needs besides the
/// mount, one set per target path (named by a digest of the path):
///
///     STATE/targets/<id>.json   the publication record (no secret)
///     STATE/secrets/<id>/       the secret file, 0600 in a 0700 directory
///     STATE/logs/<id>.log       the mount process's log
///     CACHE/<id>/               the mount's cache directory
///
/// STATE is the plugin's own (a tmpfs such as /run in the container:
/// secrets never reach a disk there); CACHE is on the node's disk.
struct StateDirectory: Sendable {
    let root: String
    let cacheRoot: String

    struct TargetPaths {
        let path: String
        let record: String
        let secrets: String
        let log: String
        let cache: String
    }

    init(root: String, cacheRoot: String) throws {
        self.root = root
        self.cacheRoot = cacheRoot
        for (directory, mode) in [(root, 0o711), (root + "/targets", 0o700), (root + "/secrets", 0o711), (root + "/logs", 0o711), (cacheRoot, 0o711)] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            // 0711: a mount's user may reach its own entry, and list none.
            chmod(directory, mode_t(mode))
        }
    }

    func paths(for target: String) -> TargetPaths {
        let id = SHA256.hash(data: Data(target.utf8)).prefix(12).map { String(format: "%02x", $0) }.joined()
        return TargetPaths(
            path: target, record: "\(root)/targets/\(id).json", secrets: "\(root)/secrets/\(id)", log: "\(root)/logs/\(id).log",
            cache: "\(cacheRoot)/\(id)")
    }

    func record(at target: TargetPaths) -> PublicationRecord? {
        guard let data = FileManager.default.contents(atPath: target.record) else { return nil }
        return try? JSONDecoder().decode(PublicationRecord.self, from: data)
    }

    func write(_ record: PublicationRecord, at target: TargetPaths) throws(RPCError) {
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(record).write(to: URL(fileURLWithPath: target.record), options: .atomic)
        } catch {
            throw RPCError(code: .internalError, message: "cannot write \(target.record): \(error.localizedDescription)")
        }
    }

    func removeRecord(_ target: TargetPaths) {
        unlink(target.record)
    }

    func removeSecrets(_ target: TargetPaths) {
        try? FileManager.default.removeItem(atPath: target.secrets)
    }

    /// The cache directory and log file the mount's user can write, and
    /// the bucketfs arguments that name them.
    func prepareMountDirectories(_ target: TargetPaths, uid: uid_t, gid: gid_t) throws(RPCError) -> [String] {
        if mkdir(target.cache, 0o700) != 0 && errno != EEXIST {
            throw RPCError(code: .internalError, message: "cannot make \(target.cache): \(TargetMounts.lastError())")
        }
        let log = open(target.log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard log >= 0 else { throw RPCError(code: .internalError, message: "cannot open \(target.log): \(TargetMounts.lastError())") }
        defer { close(log) }
        guard chown(target.cache, uid, gid) == 0, fchown(log, uid, gid) == 0 else {
            throw RPCError(code: .internalError, message: "cannot give \(target.cache) to uid \(uid): \(TargetMounts.lastError())")
        }
        return ["--cache-dir", target.cache, "--log-file", target.log]
    }
}
