import Foundation
import FSCore
import Logging

/// What a mount does about bytes earlier mounts could not upload (kept in
/// the recovery folder): says so on every mount, and uploads them with
/// `--retry-pending`.
enum PendingUploads {
    static func handle(_ recovery: RecoveryFolder, store: any ObjectStore, retry: Bool, logger: Logger) async {
        let pending = recovery.pending()
        guard !pending.isEmpty || retry else { return }
        guard retry else {
            let message = "\(pending.count) file(s) could not be uploaded earlier and wait in \(recovery.root); mount with --retry-pending to upload them"
            logger.warning("\(message)", metadata: ["files": "\(pending.map(\.path))"])
            eprint("bucketfs: \(message)")
            return
        }
        let (uploaded, failed) = await recovery.retryAll(store: store)
        logger.notice("pending uploads retried", metadata: ["uploaded": "\(uploaded.count)", "failed": "\(failed.count)"])
        for (path, error) in failed {
            eprint("bucketfs: still pending, not uploaded: \(path): \(error)")
        }
        if !uploaded.isEmpty { eprint("bucketfs: uploaded \(uploaded.count) pending file(s) from \(recovery.root)") }
    }
}
