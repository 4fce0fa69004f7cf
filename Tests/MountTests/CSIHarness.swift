import CSIDriver
import Foundation
import TestSupport
import GRPCCore
import GRPCNIOTransportHTTP2Posix
#if canImport(Glibc)
import Glibc
#endif

/// The real `bucketfs csi` (run through `bucketfs`, which hands over to
/// `bucketfs-csi`) on a socket in a scratch directory, with its own state
/// and cache directories, serving mounts as an unprivileged user; and a
/// gRPC client of it. `cleanup()` (in a defer) unmounts whatever targets
/// are still mounted, stops the plugin and removes the directories.
final class CSIPlugin: Sendable {
    static let uid: UInt32 = 4242
    static let gid: UInt32 = 4343

    let scratch: String
    let process: Tools.Running

    var socket: String { scratch + "/csi.sock" }
    var stateDirectory: String { scratch + "/state" }
    var cacheRoot: String { scratch + "/cache" }
    var log: String { (try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "" }

    /// A target path in the scratch directory (kubelet's would be under
    /// /var/lib/kubelet/pods/…); its parent exists, the target does not.
    /// Every directory above it is open to the mount's user (kubelet's
    /// pods directory is not): the mount process can then reach its own
    /// mountpoint, which it must never stat before it serves.
    func target(_ name: String) -> String {
        let parent = scratch + "/pods/" + name
        try? FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        return parent + "/mount"
    }

    init(extraArguments: [String] = []) async throws {
        _ = Kernel.becomeSubreaper
        scratch = try Scratch.directory()
        try FileManager.default.createDirectory(atPath: scratch + "/pods", withIntermediateDirectories: true)
        process = try Tools.Running(try MountEnv.binary(), [
            "csi", "--endpoint", "unix://\(scratch)/csi.sock", "--node-id", "test-node", "--state-dir", scratch + "/state",
            "--cache-root", scratch + "/cache", "--mount-uid", "\(Self.uid)", "--mount-gid", "\(Self.gid)", "--log-level", "debug",
            "--mount-timeout", "60",
        ] + extraArguments)
        let deadline = ContinuousClock.now + .seconds(30)
        while !FileManager.default.fileExists(atPath: socket) {
            guard process.isRunning, ContinuousClock.now < deadline else {
                let result = process.result()
                cleanup()
                throw HarnessError("bucketfs csi did not start: \(result.summary)")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    struct Clients: Sendable {
        let raw: GRPCClient<HTTP2ClientTransport.Posix>
        var identity: Csi_V1_Identity.Client<HTTP2ClientTransport.Posix> { .init(wrapping: raw) }
        var controller: Csi_V1_Controller.Client<HTTP2ClientTransport.Posix> { .init(wrapping: raw) }
        var node: Csi_V1_Node.Client<HTTP2ClientTransport.Posix> { .init(wrapping: raw) }
    }

    /// A client connected to the plugin's socket for the length of `body`.
    func withClients<Result: Sendable>(_ body: (Clients) async throws -> Result) async throws -> Result {
        try await withGRPCClient(
            transport: .http2NIOPosix(target: .unixDomainSocket(path: socket), transportSecurity: .plaintext)
        ) { client in
            try await body(Clients(raw: client))
        }
    }

    /// Every mount still under the scratch directory, lazily unmounted
    /// (their processes then end); the plugin stopped; the files removed.
    func cleanup() {
        for mountpoint in Kernel.mountpoints() where mountpoint.hasPrefix(scratch + "/") {
            umount2(mountpoint, Int32(MNT_DETACH))
        }
        if process.isRunning {
            kill(process.pid, SIGTERM)
            if !process.waitBlocking(.seconds(10)) { process.kill() }
        }
        _ = process.result()
        Kernel.reapOrphans()
        Scratch.remove(scratch)
    }
}

/// Requests as the tests send them.
enum CSIRequests {
    static func mountCapability(
        _ mode: Csi_V1_VolumeCapability.AccessMode.Mode = .multiNodeMultiWriter, flags: [String] = []
    ) -> Csi_V1_VolumeCapability {
        .with {
            $0.mount = .with { $0.mountFlags = flags }
            $0.accessMode = .with { $0.mode = mode }
        }
    }

    static func create(_ name: String, parameters: [String: String], requiredBytes: Int64 = 1 << 30) -> Csi_V1_CreateVolumeRequest {
        .with {
            $0.name = name
            $0.parameters = parameters
            $0.volumeCapabilities = [mountCapability()]
            $0.capacityRange = .with { $0.requiredBytes = requiredBytes }
        }
    }

    static func publish(
        _ volume: Csi_V1_Volume, target: String, readOnly: Bool = false, secrets: [String: String] = [:],
        capability: Csi_V1_VolumeCapability = mountCapability()
    ) -> Csi_V1_NodePublishVolumeRequest {
        .with {
            $0.volumeID = volume.volumeID
            $0.volumeContext = volume.volumeContext
            $0.targetPath = target
            $0.readonly = readOnly
            $0.secrets = secrets
            $0.volumeCapability = capability
        }
    }

    static func unpublish(_ volumeID: String, target: String) -> Csi_V1_NodeUnpublishVolumeRequest {
        .with {
            $0.volumeID = volumeID
            $0.targetPath = target
        }
    }

    /// The gRPC code a call failed with (nil: it succeeded).
    static func code(_ call: () async throws -> Void) async -> RPCError.Code? {
        do {
            try await call()
            return nil
        } catch let error as RPCError {
            return error.code
        } catch {
            return .unknown
        }
    }
}
