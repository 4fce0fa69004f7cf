import Foundation
import Logging
import Synchronization

/// Uploads recovery-folder entries again in the background while the mount
/// runs, so that an outage longer than the upload retry window costs time,
/// not the bytes' arrival: the entries a failed upload of this mount saved
/// (and, with `--retry-pending`, every entry of the bucket) are retried
/// after `initialInterval`, then at doubling intervals up to `maxInterval`
/// while they keep failing for a transient reason; any success brings the
/// interval back down.
///
/// Each upload keeps the entry's recorded precondition, so nothing newer
/// than what the bytes were written over is ever overwritten. An entry
/// whose precondition fails (someone else changed the object) or that the
/// service refuses for good is no longer retried: its sidecar says why
/// (`Entry.retryStopped`) and it waits for a person. An entry whose object
/// the mount is writing right now is skipped: that file's own upload
/// carries newer bytes and removes the entry when it succeeds. Each success
/// is logged at notice level, and the entry is removed.
final class RecoveryRetrier: Sendable {
    private let folder: RecoveryFolder
    private let store: any ObjectStore
    private let initialInterval: Duration
    private let maxInterval: Duration
    private let logger: Logger

    private struct State {
        /// Object names whose entries are retried.
        var objects: Set<String> = []
        var loop: Task<Void, Never>?
        /// Whether the mount has a file with unsaved writes for this object.
        var isBeingWritten: @Sendable (String) -> Bool = { _ in false }
        /// Called after an entry is uploaded, with its object name and metadata.
        var uploaded: @Sendable (String, ObjectInfo) -> Void = { _, _ in }
    }

    private let state = OrderedLock("recovery retrier", State())

    init(folder: RecoveryFolder, store: any ObjectStore, initialInterval: Duration, maxInterval: Duration, logger: Logger) {
        self.folder = folder
        self.store = store
        self.initialInterval = initialInterval
        self.maxInterval = max(initialInterval, maxInterval)
        self.logger = logger
    }

    /// What the retrier asks of the mount (set once it exists).
    func attach(
        isBeingWritten: @escaping @Sendable (String) -> Bool, uploaded: @escaping @Sendable (String, ObjectInfo) -> Void
    ) {
        state.withLock { s in
            s.isBeingWritten = isBeingWritten
            s.uploaded = uploaded
        }
    }

    /// Object names whose entries are being retried.
    var retrying: Set<String> { state.withLock { $0.objects } }

    /// Retries the entry of `object` from now on.
    func track(_ objects: some Sequence<String>) {
        state.withLock { s in
            s.objects.formUnion(objects)
            guard s.loop == nil, !s.objects.isEmpty else { return }
            s.loop = Task { await self.run() }
        }
    }

    private func run() async {
        var interval = initialInterval
        while true {
            do {
                try await Task.sleep(for: interval)
            } catch {
                state.withLock { $0.loop = nil }
                return
            }
            let (progress, remaining) = await pass()
            let done = state.withLock { s -> Bool in
                guard s.objects.isEmpty else { return false }
                s.loop = nil
                return true
            }
            if done { return }
            interval = progress ? initialInterval : min(interval * 2, maxInterval)
            logger.info("recovery folder: entries still waiting; retrying in the background", metadata: [
                "entries": "\(remaining)", "next in": "\(interval)", "folder": "\(folder.root)",
            ])
        }
    }

    /// One attempt at every tracked entry; whether any was uploaded, and
    /// how many are still tracked.
    private func pass() async -> (progress: Bool, remaining: Int) {
        let tracked = retrying
        let pending = folder.pending().filter { $0.entry.bucket == folder.bucket && tracked.contains($0.entry.object) }
        // Entries gone meanwhile (uploaded by a later close, removed by a
        // person) or stopped are not tracked any more.
        let live = Set(pending.filter { $0.entry.retryStopped == nil }.map(\.entry.object))
        state.withLock { $0.objects.formIntersection(live) }
        let (isBeingWritten, uploaded) = state.withLock { ($0.isBeingWritten, $0.uploaded) }
        let result = await folder.retry(
            pending.filter { $0.entry.retryStopped == nil }, store: store,
            success: "recovered in the background: a file kept in the recovery folder is uploaded", skip: isBeingWritten
        ) { entry, info in
            // Untracked and reported before the entry is removed: no one
            // sees the entry gone while it still shows as retried.
            untrack(entry.object)
            uploaded(entry.object, info)
        }
        // Entries stopped for good (not transient) are not tracked any more.
        for (path, error) in result.failed where !error.isTransient {
            if let entry = pending.first(where: { $0.path == path })?.entry { untrack(entry.object) }
        }
        return (!result.uploaded.isEmpty, retrying.count)
    }

    private func untrack(_ object: String) {
        _ = state.withLock { $0.objects.remove(object) }
    }
}
