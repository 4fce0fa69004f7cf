import BucketFSCLI
import FSCore
import Foundation
import GRPCCore
#if canImport(Glibc)
import Glibc
#endif

/// How the controller reaches a volume's bucket for one request: with the
/// request's secret (the provisioner's Secret) when it has one, written to
/// a private file for the length of the request, else as the volume says
/// (`anonymous`) or with the plugin's Application Default Credentials.
struct RequestCredentials: Sendable {
    /// Where the request's secret file lives meanwhile (root's, 0711).
    let secretsDirectory: String

    func withStore<Result>(
        for volume: VolumeID, secrets: [String: String],
        _ body: (any ObjectStore) async throws(RPCError) -> Result
    ) async throws(RPCError) -> Result {
        let parsed: VolumeSecrets
        do {
            parsed = try VolumeSecrets.parse(secrets)
        } catch {
            throw RPCError(code: .invalidArgument, message: error.description)
        }
        let directory = "\(secretsDirectory)/request-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let installed: VolumeSecrets.Installed?
        do {
            installed = try parsed.install(in: directory, uid: getuid(), gid: getgid())
        } catch {
            throw RPCError(code: .internalError, message: error.description)
        }
        let store: any ObjectStore
        do {
            store = try BucketConnection.objectStore(
                bucket: volume.bucket, endpoint: volume.settings["endpoint"], anonymous: ["true", "1", "yes", "on"].contains(volume.settings["anonymous"]?.lowercased() ?? ""),
                keyFile: installed?.setting == "key-file" ? installed?.path : nil,
                tokenFile: installed?.setting == "token-file" ? installed?.path : nil)
        } catch {
            throw RPCError(code: .failedPrecondition, message: error.description)
        }
        return try await body(store)
    }
}
