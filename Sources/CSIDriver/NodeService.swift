import BucketFSCLI
import Crypto
import Foundation
import GRPCCore
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The CSI Node service: publishes a volume at the target path kubelet
/// names by mounting it there, and unpublishes it. No staging (a bucket
/// has no device to attach), no volume stats, no expansion.
struct NodeService: Csi_V1_Node.SimpleServiceProtocol {
    let nodeID: String
    let mounts: TargetMounts
    let state: StateDirectory
    let logger: Logger
    /// Targets with a publish or unpublish under way: a second request for
    /// the same target meanwhile is ABORTED, as the spec asks, rather than
    /// racing the first.
    let busy = TargetClaims()

    func nodeGetInfo(request: Csi_V1_NodeGetInfoRequest, context: ServerContext) async throws -> Csi_V1_NodeGetInfoResponse {
        .with { $0.nodeID = nodeID }
    }

    func nodeGetCapabilities(
        request: Csi_V1_NodeGetCapabilitiesRequest, context: ServerContext
    ) async throws -> Csi_V1_NodeGetCapabilitiesResponse {
        // None: publish and unpublish are always there.
        Csi_V1_NodeGetCapabilitiesResponse()
    }

    func nodePublishVolume(
        request: Csi_V1_NodePublishVolumeRequest, context: ServerContext
    ) async throws -> Csi_V1_NodePublishVolumeResponse {
        try Require.nonEmpty(request.volumeID, "volume_id")
        try Require.nonEmpty(request.targetPath, "target_path")
        try Require.absolute(request.targetPath, "target_path")
        guard request.hasVolumeCapability else { throw RPCError(code: .invalidArgument, message: "volume_capability is required") }
        try Require.supported(request.volumeCapability)
        let secrets: VolumeSecrets
        do {
            secrets = try VolumeSecrets.parse(request.secrets)
        } catch {
            throw RPCError(code: .invalidArgument, message: error.description)
        }
        let flags = try MountFlags(request.volumeCapability.mount.mountFlags)
        var attributes = request.volumeContext
        attributes.merge(flags.settings) { _, flag in flag }
        let spec: VolumeSpec
        do {
            spec = try await VolumeSpec.parse(attributes, fallbackID: request.volumeID)
        } catch {
            throw RPCError(code: .invalidArgument, message: "volume \(request.volumeID): \(error.description)")
        }
        let readOnly = request.readonly || flags.readOnly || Require.isReadOnly(request.volumeCapability.accessMode.mode)
        let wanted = PublicationRecord(
            volumeID: request.volumeID, targetPath: request.targetPath, readOnly: readOnly, url: spec.url, settings: spec.settings)
        try await exclusively(request.targetPath) { () async throws(RPCError) in
            let target = state.paths(for: request.targetPath)
            let lifecycle = TargetLifecycle(observed: mounts.observe(request.targetPath, record: state.record(at: target)))
            switch lifecycle.publish(wanted) {
            case .refuse(let reason):
                throw RPCError(code: .alreadyExists, message: reason)
            case .run(let actions):
                do throws(RPCError) {
                    try await run(actions, wanted: wanted, secrets: secrets, target: target)
                } catch {
                    logger.warning("publish failed", metadata: ["volume": "\(request.volumeID)", "target": "\(request.targetPath)", "error": "\(error.message)"])
                    try? await run(lifecycle.mountFailed(), wanted: wanted, secrets: secrets, target: target)
                    throw error
                }
            }
            logger.info("published", metadata: ["volume": "\(request.volumeID)", "target": "\(request.targetPath)", "read-only": "\(readOnly)"])
        }
        return Csi_V1_NodePublishVolumeResponse()
    }

    func nodeUnpublishVolume(
        request: Csi_V1_NodeUnpublishVolumeRequest, context: ServerContext
    ) async throws -> Csi_V1_NodeUnpublishVolumeResponse {
        try Require.nonEmpty(request.volumeID, "volume_id")
        try Require.nonEmpty(request.targetPath, "target_path")
        try Require.absolute(request.targetPath, "target_path")
        try await exclusively(request.targetPath) { () async throws(RPCError) in
            let target = state.paths(for: request.targetPath)
            let record = state.record(at: target)
            let lifecycle = TargetLifecycle(observed: mounts.observe(request.targetPath, record: record))
            try await run(lifecycle.unpublish(), wanted: record, secrets: .none, target: target)
            logger.info("unpublished", metadata: ["volume": "\(request.volumeID)", "target": "\(request.targetPath)"])
        }
        return Csi_V1_NodeUnpublishVolumeResponse()
    }

    /// Carries out the machine's actions in order.
    private func run(
        _ actions: [TargetLifecycle.Action], wanted: PublicationRecord?, secrets: VolumeSecrets, target: StateDirectory.TargetPaths
    ) async throws(RPCError) {
        var secretArguments: [String] = []
        for action in actions {
            switch action {
            case .makeTarget:
                try mounts.makeTarget(target.path)
            case .installSecrets:
                do {
                    secretArguments = try secrets.install(in: target.secrets, uid: mounts.uid, gid: mounts.gid)?.arguments ?? []
                } catch {
                    throw RPCError(code: .internalError, message: error.description)
                }
            case .mount:
                guard let wanted else { continue }
                let process = try state.prepareMountDirectories(target, uid: mounts.uid, gid: mounts.gid)
                try await mounts.mount(
                    url: wanted.url, target: target.path, readOnly: wanted.readOnly,
                    arguments: VolumeSettings.mountArguments(wanted.settings) + process + secretArguments)
            case .writeRecord:
                guard let wanted else { continue }
                try state.write(wanted, at: target)
            case .unmount:
                try mounts.unmount(target.path)
            case .detach:
                try mounts.detach(target.path)
            case .removeTarget:
                try mounts.removeTarget(target.path)
            case .removeSecrets:
                state.removeSecrets(target)
            case .removeRecord:
                state.removeRecord(target)
            }
        }
    }

    private func exclusively(_ target: String, _ body: () async throws(RPCError) -> Void) async throws(RPCError) {
        guard busy.claim(target) else { throw RPCError(code: .aborted, message: "another operation on \(target) is under way") }
        defer { busy.release(target) }
        try await body()
    }
}

/// A volume capability's mount flags (a PersistentVolume's or
/// StorageClass's `mountOptions`): `ro`/`rw`, and bucketfs settings as
/// `name=value` or a bare `name` for a flag.
struct MountFlags {
    var readOnly = false
    var settings: [String: String] = [:]

    init(_ flags: [String]) throws(RPCError) {
        for flag in flags.flatMap({ $0.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }) where !flag.isEmpty {
            switch flag {
            case "ro": readOnly = true
            case "rw": continue
            default:
                let parts = flag.split(separator: "=", maxSplits: 1)
                let name = String(parts[0]).replacingOccurrences(of: "_", with: "-")
                settings[name] = parts.count > 1 ? String(parts[1]) : "true"
            }
        }
    }
}

/// The targets with an operation under way.
final class TargetClaims: Sendable {
    private let claimed = Mutex<Set<String>>([])

    func claim(_ target: String) -> Bool { claimed.withLock { $0.insert(target).inserted } }
    func release(_ target: String) { _ = claimed.withLock { $0.remove(target) } }
}
