import Testing
@testable import CSIDriver

/// The publication lifecycle's table: what is at the target, what the CO
/// asks, and what the node service must do.
@Suite("CSI.TargetLifecycle")
struct TargetLifecycleTests {
    static let wanted = PublicationRecord(
        volumeID: "bucket/vol-1", targetPath: "/var/lib/kubelet/pods/p/volumes/v/mount", readOnly: false,
        url: "gs://bucket/vol-1/", settings: ["stat-ttl": "5"])
    static var otherVolume: PublicationRecord { var r = wanted; r.volumeID = "bucket/vol-2"; return r }
    static var readOnlyVariant: PublicationRecord { var r = wanted; r.readOnly = true; return r }
    static var otherSettings: PublicationRecord { var r = wanted; r.settings = ["stat-ttl": "60"]; return r }

    typealias Row = (observed: TargetLifecycle.Observed, decision: TargetLifecycle.Decision)

    static let publishRows: [Row] = [
        // First publish: make, mount, remember.
        (.unmounted, .run([.makeTarget, .installSecrets, .mount, .writeRecord])),
        // The same publish again (kubelet retries; requiresRepublish): only the secret is refreshed.
        (.served(wanted), .run([.installSecrets])),
        // Another volume, or the same one read-only or with other settings, at a served target.
        (.served(otherVolume), .refuse("/var/lib/kubelet/pods/p/volumes/v/mount already publishes volume bucket/vol-2")),
        (.served(readOnlyVariant), .refuse("/var/lib/kubelet/pods/p/volumes/v/mount already publishes bucket/vol-1 read-only")),
        (.served(otherSettings), .refuse("/var/lib/kubelet/pods/p/volumes/v/mount already publishes bucket/vol-1 with other mount settings")),
        // A mount someone else made is never taken over.
        (.served(nil), .refuse("/var/lib/kubelet/pods/p/volumes/v/mount is already a mount point that the driver did not make")),
        // The mount process died: the dead mount is detached and the volume mounted again.
        (.disconnected(wanted), .run([.detach, .makeTarget, .installSecrets, .mount, .writeRecord])),
        (.disconnected(nil), .run([.detach, .makeTarget, .installSecrets, .mount, .writeRecord])),
        (.disconnected(otherVolume), .refuse("/var/lib/kubelet/pods/p/volumes/v/mount already publishes volume bucket/vol-2")),
    ]

    @Test("publish", arguments: publishRows)
    func publish(_ row: Row) {
        #expect(TargetLifecycle(observed: row.observed).publish(Self.wanted) == row.decision)
    }

    static let unpublishRows: [(TargetLifecycle.Observed, [TargetLifecycle.Action])] = [
        // Never published, or already unpublished: still success, and nothing left behind.
        (.unmounted, [.removeTarget, .removeSecrets, .removeRecord]),
        (.served(wanted), [.unmount, .removeTarget, .removeSecrets, .removeRecord]),
        (.served(nil), [.unmount, .removeTarget, .removeSecrets, .removeRecord]),
        // "Transport endpoint is not connected": only a lazy unmount clears it.
        (.disconnected(wanted), [.detach, .removeTarget, .removeSecrets, .removeRecord]),
    ]

    @Test("unpublish", arguments: unpublishRows)
    func unpublish(_ observed: TargetLifecycle.Observed, _ actions: [TargetLifecycle.Action]) {
        #expect(TargetLifecycle(observed: observed).unpublish() == actions)
    }

    @Test("a failed mount leaves no mount, secret or record")
    func failedMount() {
        for observed in Self.publishRows.map(\.observed) {
            #expect(TargetLifecycle(observed: observed).mountFailed() == [.detach, .removeSecrets, .removeRecord])
        }
    }
}
