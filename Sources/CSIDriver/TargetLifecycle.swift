/// The lifecycle of one publication target (the directory kubelet names in
/// NodePublishVolume): a value type whose events return the actions the
/// node service then runs, in order, outside any lock. Every race the CO
/// can cause (a repeated publish, a publish over a dead mount, an
/// unpublish of something never published) is a row of its table tests.
///
/// The node service observes the target (mount table, a stat, the record
/// it wrote at publish) and hands that in as `Observed`; the machine
/// decides.
public struct TargetLifecycle: Sendable, Equatable {
    /// What is at the target now.
    public enum Observed: Sendable, Equatable {
        /// Not a mount point (the directory may or may not exist).
        case unmounted
        /// A mount that answers, published with `record` (nil: no record,
        /// someone else's mount).
        case served(PublicationRecord?)
        /// A FUSE mount whose process is gone: "Transport endpoint is not
        /// connected".
        case disconnected(PublicationRecord?)
    }

    public enum Action: Sendable, Equatable {
        /// Make the target directory (and its parents).
        case makeTarget
        /// Write the request's secret for the mount to read (again: a
        /// republish brings a fresh token).
        case installSecrets
        /// Mount through `bucketfs fuse-fd-mount` and wait until it serves.
        case mount
        case writeRecord
        /// umount(2); lazily (MNT_DETACH) if the mount is busy.
        case unmount
        /// MNT_DETACH at once: a dead mount cannot be unmounted otherwise.
        case detach
        case removeTarget
        case removeSecrets
        case removeRecord
    }

    public enum Decision: Sendable, Equatable {
        case run([Action])
        /// ALREADY_EXISTS: the target holds another publication.
        case refuse(String)
    }

    public let observed: Observed

    public init(observed: Observed) {
        self.observed = observed
    }

    /// NodePublishVolume of `wanted`.
    public func publish(_ wanted: PublicationRecord) -> Decision {
        switch observed {
        case .unmounted:
            return .run([.makeTarget, .installSecrets, .mount, .writeRecord])
        case .served(let record):
            guard let record else { return .refuse("\(wanted.targetPath) is already a mount point that the driver did not make") }
            guard record == wanted else { return .refuse(Self.difference(record, wanted)) }
            // The same publication: nothing to mount; the secret may be new.
            return .run([.installSecrets])
        case .disconnected(let record):
            if let record, record != wanted { return .refuse(Self.difference(record, wanted)) }
            // Its process died: clear the dead mount and mount again.
            return .run([.detach, .makeTarget, .installSecrets, .mount, .writeRecord])
        }
    }

    /// The mount of a publish failed: nothing of it may stay (the kernel
    /// mount, if fuse-fd-mount got that far, is the caller's to undo).
    public func mountFailed() -> [Action] {
        [.detach, .removeSecrets, .removeRecord]
    }

    /// NodeUnpublishVolume: whatever is there, the target ends unmounted
    /// and removed, which is also the answer when nothing was published.
    public func unpublish() -> [Action] {
        switch observed {
        case .unmounted: return [.removeTarget, .removeSecrets, .removeRecord]
        case .served: return [.unmount, .removeTarget, .removeSecrets, .removeRecord]
        case .disconnected: return [.detach, .removeTarget, .removeSecrets, .removeRecord]
        }
    }

    static func difference(_ have: PublicationRecord, _ wanted: PublicationRecord) -> String {
        if have.volumeID != wanted.volumeID {
            return "\(wanted.targetPath) already publishes volume \(have.volumeID)"
        }
        if have.readOnly != wanted.readOnly {
            return "\(wanted.targetPath) already publishes \(have.volumeID) \(have.readOnly ? "read-only" : "read-write")"
        }
        return "\(wanted.targetPath) already publishes \(have.volumeID) with other mount settings"
    }
}

/// What the node service remembers of a publication, in the state
/// directory: everything that makes two publish requests the same, and no
/// secret.
public struct PublicationRecord: Codable, Sendable, Equatable {
    public var volumeID: String
    public var targetPath: String
    public var readOnly: Bool
    public var url: String
    /// The bucketfs settings the mount got (context and mount flags).
    public var settings: [String: String]

    public init(volumeID: String, targetPath: String, readOnly: Bool, url: String, settings: [String: String]) {
        self.volumeID = volumeID
        self.targetPath = targetPath
        self.readOnly = readOnly
        self.url = url
        self.settings = settings
    }
}
