/// The phases a person sees and what moves a file between them: the
/// machine's own table, shown by docs/architecture.md and checked against
/// the machine by `WriteBackTransitionTests`.
extension WriteBack {
    /// The events that move a file between phases, as the transition
    /// table names them.
    enum EventName: String, Sendable, Hashable, CaseIterable {
        case created, wrote, truncated, rideAlong, uploadRequested, uploadStored, uploadEnded, unlink, relink, retire
    }

    /// One row of the transition table: `event` in phase `from` can leave
    /// the file in phase `to`.
    struct Transition: Sendable, Hashable {
        let from: Phase
        let event: EventName
        let to: Phase
        let note: String
        init(_ from: Phase, _ event: EventName, _ to: Phase, _ note: String) {
            self.from = from
            self.event = event
            self.to = to
            self.note = note
        }
    }

    /// Every change of phase the machine makes (a file starts clean; events
    /// not listed leave the phase as it is). docs/architecture.md shows
    /// this table; the tests check both against the machine.
    static let transitions: [Transition] = [
        Transition(.clean, .created, .dirty, "create: the file must reach the bucket even if nothing is written"),
        Transition(.clean, .wrote, .dirty, "a write"),
        Transition(.clean, .truncated, .dirty, "a truncate to another size"),
        Transition(.clean, .wrote, .uploading, "a write after an upload stored every byte, before its uploader is done"),
        Transition(.clean, .truncated, .uploading, "a truncate after an upload stored every byte, before its uploader is done"),
        Transition(.clean, .unlink, .unlinked, "unlink, or renamed over"),
        Transition(.clean, .retire, .retired, "last release: the local copy is deleted"),
        Transition(.dirty, .uploadRequested, .uploading, "close, fsync, last release, rename, unmount"),
        Transition(.dirty, .unlink, .unlinked, "unlink, or renamed over"),
        Transition(.uploading, .uploadStored, .clean, "stored, nothing written meanwhile"),
        Transition(.uploading, .uploadEnded, .dirty, "the uploader is done; written meanwhile"),
        Transition(.uploading, .uploadEnded, .failed, "the uploader is done; failed past --upload-retry-time, or a 4xx"),
        Transition(.uploading, .unlink, .unlinked, "unlink, or renamed over (the unlink waits for the upload)"),
        Transition(.uploading, .retire, .retired, "last release after the upload failed, before its uploader is done"),
        Transition(.failed, .wrote, .dirty, "a new change"),
        Transition(.failed, .truncated, .dirty, "a new change"),
        Transition(.failed, .rideAlong, .dirty, "a new change (chmod, utimens, xattr: they ride along only while there are unsaved changes)"),
        Transition(.failed, .uploadRequested, .uploading, "close, fsync, rename, unmount try again"),
        Transition(.failed, .unlink, .unlinked, "unlink, or renamed over"),
        Transition(.failed, .retire, .retired, "last release: the recovery folder has the bytes"),
        Transition(.unlinked, .relink, .clean, "the delete or rename failed: back where it was"),
        Transition(.unlinked, .relink, .dirty, "the delete or rename failed: back where it was"),
        Transition(.unlinked, .relink, .uploading, "the delete or rename failed: back where it was"),
        Transition(.unlinked, .relink, .failed, "the delete or rename failed: back where it was"),
        Transition(.unlinked, .retire, .retired, "last release: nothing uploaded"),
    ]
}
