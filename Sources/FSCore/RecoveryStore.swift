import Foundation
import Logging

/// The one owner of what a mount keeps for bytes it could not upload: the
/// recovery folder (entries and sidecars), the journals beside staged
/// files (scanned for a previous process's leftovers once, when the store
/// is made), and the background retries. The CLI makes it once per mount
/// and hands it to `FileSystem`, so `--retry-pending` and the mount share
/// one folder, one leftover scan and one retry routine
/// (`RecoveryFolder.retry`).
///
/// What the write path calls (kept few on purpose):
/// - `folder.save(_:objectName:options:reason:notRetried:move:)` after an
///   upload failed for good: keeps the bytes with every upload option;
/// - `retrier?.track(_:)`: retries those entries in the background;
/// - `folder.remove(objectName:)` after an upload succeeded.
public final class RecoveryStore: Sendable {
    public let folder: RecoveryFolder
    /// Where the mount stages files being written (`CACHE/staging`).
    public let stagingDirectory: String
    /// The background retry loop (nil with `recoveryRetryInterval` 0).
    let retrier: RecoveryRetrier?

    /// Makes the store and scans `stagingDirectory` for what a previous
    /// process left (see `RecoveryFolder.adoptLeftovers`): the only scan.
    public init(cacheDirectory: String, store: any ObjectStore, options: MountOptions, logger: Logger) {
        let folder = RecoveryFolder(cacheDirectory: cacheDirectory, bucket: options.bucket, logger: logger)
        self.folder = folder
        self.stagingDirectory = RecoveryFolder.stagingDirectory(cacheDirectory: cacheDirectory)
        self.retrier = options.recoveryRetryInterval > 0
            ? RecoveryRetrier(
                folder: folder, store: store, initialInterval: Duration(seconds: options.recoveryRetryInterval),
                maxInterval: Duration(seconds: options.recoveryRetryMaxInterval), logger: logger)
            : nil
        RecoveryFolder.adoptLeftovers(staging: stagingDirectory, recovery: folder, logger: logger)
    }
}
