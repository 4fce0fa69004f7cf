import GRPCCore

/// The checks every request gets before anything is done, with the codes
/// the CSI spec (and csi-sanity) expect: a missing or malformed field is
/// INVALID_ARGUMENT.
enum Require {
    static func nonEmpty(_ value: String, _ field: String) throws(RPCError) {
        guard !value.isEmpty else { throw RPCError(code: .invalidArgument, message: "\(field) is required") }
    }

    static func absolute(_ path: String, _ field: String) throws(RPCError) {
        guard path.hasPrefix("/"), !path.split(separator: "/").contains(where: { $0 == ".." }) else {
            throw RPCError(code: .invalidArgument, message: "\(field) \(path) is not an absolute path")
        }
    }

    /// A filesystem volume with an access mode: bucketfs serves files, not
    /// a block device, and every mode works (a bucket is shared by nature;
    /// the reader-only modes publish read-only).
    static func supported(_ capability: Csi_V1_VolumeCapability) throws(RPCError) {
        if let reason = unsupported(capability) { throw RPCError(code: .invalidArgument, message: reason) }
    }

    /// Why `capability` cannot be served, or nil.
    static func unsupported(_ capability: Csi_V1_VolumeCapability) -> String? {
        switch capability.accessType {
        case .block?: return "block volumes are not supported: bucketfs is a filesystem"
        case nil: return "volume_capability needs an access type (mount)"
        case .mount(let mount)?:
            if !mount.fsType.isEmpty && mount.fsType != "fuse.bucketfs" && mount.fsType != "bucketfs" {
                return "fs_type \(mount.fsType) is not supported: the volume is a bucketfs mount"
            }
        }
        guard capability.hasAccessMode else { return "volume_capability needs an access_mode" }
        switch capability.accessMode.mode {
        case .unknown, .UNRECOGNIZED: return "access mode \(capability.accessMode.mode) is not supported"
        default: return nil
        }
    }

    static func isReadOnly(_ mode: Csi_V1_VolumeCapability.AccessMode.Mode) -> Bool {
        mode == .singleNodeReaderOnly || mode == .multiNodeReaderOnly
    }
}
