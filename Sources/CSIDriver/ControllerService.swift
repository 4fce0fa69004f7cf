import BucketFSCLI
import FSCore
import Foundation
import GRPCCore
import Logging

/// The CSI Controller service: a dynamically provisioned volume is a
/// prefix of a bucket, `[PREFIX/]NAME/`, so one bucket holds many volumes.
/// CreateVolume writes the prefix's marker object (`NAME/`, which bucketfs
/// shows as the volume's root directory) carrying the request's
/// parameters; DeleteVolume removes every object under the prefix.
/// Nothing else (publish, snapshots, expansion, listing) is offered: the
/// gRPC server answers those UNIMPLEMENTED.
struct ControllerService: Csi_V1_Controller.SimpleServiceProtocol {
    let credentials: RequestCredentials
    let logger: Logger

    func controllerGetCapabilities(
        request: Csi_V1_ControllerGetCapabilitiesRequest, context: ServerContext
    ) async throws -> Csi_V1_ControllerGetCapabilitiesResponse {
        .with { $0.capabilities = [.with { $0.rpc = .with { $0.type = .createDeleteVolume } }] }
    }

    func createVolume(request: Csi_V1_CreateVolumeRequest, context: ServerContext) async throws -> Csi_V1_CreateVolumeResponse {
        try Require.nonEmpty(request.name, "name")
        try VolumeMarker.checkName(request.name)
        guard !request.volumeCapabilities.isEmpty else { throw RPCError(code: .invalidArgument, message: "volume_capabilities is required") }
        for capability in request.volumeCapabilities { try Require.supported(capability) }
        guard !request.hasVolumeContentSource else {
            throw RPCError(code: .invalidArgument, message: "volumes from snapshots or other volumes are not supported")
        }
        let capacity = try Self.capacity(request.capacityRange)
        let parent: VolumeSpec
        do {
            parent = try await VolumeSpec.parse(request.parameters)
        } catch {
            throw RPCError(code: .invalidArgument, message: "parameters: \(error.description)")
        }
        let spec = VolumeSpec(bucket: parent.bucket, prefix: parent.prefix + request.name, settings: parent.settings)
        let marker = VolumeMarker(name: request.name, parameters: request.parameters, capacity: capacity)
        try await credentials.withStore(for: VolumeID(spec), secrets: request.secrets) { store async throws(RPCError) in
            try await marker.create(at: spec.prefix, in: store)
        }
        logger.info("created volume", metadata: ["name": "\(request.name)", "volume": "\(VolumeID(spec))"])
        return .with {
            $0.volume = .with {
                $0.volumeID = VolumeID(spec).description
                $0.capacityBytes = capacity
                $0.volumeContext = spec.context
            }
        }
    }

    func deleteVolume(request: Csi_V1_DeleteVolumeRequest, context: ServerContext) async throws -> Csi_V1_DeleteVolumeResponse {
        try Require.nonEmpty(request.volumeID, "volume_id")
        // An id that is not one of ours names nothing to delete: a volume
        // that is gone, as far as the spec is concerned.
        guard let id = VolumeID(request.volumeID), !id.prefix.isEmpty else { return Csi_V1_DeleteVolumeResponse() }
        let removed = try await credentials.withStore(for: id, secrets: request.secrets) { store async throws(RPCError) in
            try await VolumeMarker.deleteVolume(at: id.prefix, in: store)
        }
        logger.info("deleted volume", metadata: ["volume": "\(request.volumeID)", "objects": "\(removed)"])
        return Csi_V1_DeleteVolumeResponse()
    }

    func validateVolumeCapabilities(
        request: Csi_V1_ValidateVolumeCapabilitiesRequest, context: ServerContext
    ) async throws -> Csi_V1_ValidateVolumeCapabilitiesResponse {
        try Require.nonEmpty(request.volumeID, "volume_id")
        guard !request.volumeCapabilities.isEmpty else { throw RPCError(code: .invalidArgument, message: "volume_capabilities is required") }
        guard let id = VolumeID(request.volumeID) else { throw RPCError(code: .notFound, message: "no volume \(request.volumeID)") }
        let exists = try await credentials.withStore(for: id, secrets: request.secrets) { store async throws(RPCError) in
            try await VolumeMarker.exists(prefix: id.prefix, in: store)
        }
        guard exists else { throw RPCError(code: .notFound, message: "no volume \(request.volumeID)") }
        if let reason = request.volumeCapabilities.lazy.compactMap(Require.unsupported).first {
            return .with { $0.message = reason }
        }
        return .with {
            $0.confirmed = .with {
                $0.volumeCapabilities = request.volumeCapabilities
                $0.volumeContext = request.volumeContext
                $0.parameters = request.parameters
            }
        }
    }

    /// The capacity recorded for a volume: the least asked for (a bucket
    /// has no size, so nothing is reserved or enforced).
    static func capacity(_ range: Csi_V1_CapacityRange) throws(RPCError) -> Int64 {
        guard range.requiredBytes >= 0, range.limitBytes >= 0 else {
            throw RPCError(code: .invalidArgument, message: "capacity_range must not be negative")
        }
        if range.limitBytes > 0 && range.limitBytes < range.requiredBytes {
            throw RPCError(code: .outOfRange, message: "capacity_range: limit_bytes is below required_bytes")
        }
        return range.requiredBytes > 0 ? range.requiredBytes : range.limitBytes
    }
}

extension StoreError {
    /// The gRPC code of a store failure.
    var rpcCode: RPCError.Code {
        switch self {
        case .notFound, .bucketNotFound: return .notFound
        case .preconditionFailed: return .aborted
        case .unauthenticated: return .unauthenticated
        case .permissionDenied: return .permissionDenied
        case .invalidArgument: return .invalidArgument
        case .unavailable: return .unavailable
        case .quotaExceeded: return .resourceExhausted
        case .cancelled: return .cancelled
        case .other: return .internalError
        }
    }

    var rpcError: RPCError { RPCError(code: rpcCode, message: description) }
}
