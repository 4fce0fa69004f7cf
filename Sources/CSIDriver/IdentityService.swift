import GRPCCore
import SwiftProtobuf
import Transport

/// The CSI Identity service: the driver's name and version, that it has a
/// Controller service, and that it is ready.
struct IdentityService: Csi_V1_Identity.SimpleServiceProtocol {
    let driverName: String

    /// The name the CSIDriver object, the node's registrar and
    /// StorageClasses use unless `--driver-name` says otherwise.
    static let defaultDriverName = "csi.bucketfs.dev"

    func getPluginInfo(request: Csi_V1_GetPluginInfoRequest, context: ServerContext) async throws -> Csi_V1_GetPluginInfoResponse {
        .with {
            $0.name = driverName
            $0.vendorVersion = bucketfsVersion
        }
    }

    func getPluginCapabilities(
        request: Csi_V1_GetPluginCapabilitiesRequest, context: ServerContext
    ) async throws -> Csi_V1_GetPluginCapabilitiesResponse {
        .with { $0.capabilities = [.with { $0.service = .with { $0.type = .controllerService } }] }
    }

    /// Ready as soon as it answers: the services need nothing warmed up
    /// (each request makes its own connection to the bucket).
    func probe(request: Csi_V1_ProbeRequest, context: ServerContext) async throws -> Csi_V1_ProbeResponse {
        .with { $0.ready = Google_Protobuf_BoolValue(true) }
    }
}
