/// The write-back lifecycle of one staged file, as a value-type state
/// machine with one entry, `handle(_ event:) -> Effects`: the executor
/// (`WriteBackStore.handle`, under the file system's lock) tells it each
/// event and runs the effects it returns. No I/O and no clock in here, and
/// no Task is made or awaited (it holds those the executor made for its
/// effects, in the phase they belong to), so the races of the write path
/// are table tests of this type (`WriteBackTests`).
///
/// What it decides, and nothing else decides:
/// - whether the file holds unsaved writes (`version` against the uploaded
///   one) and whether the last release still owes an upload;
/// - when an upload starts and who waits for it (one at a time per file);
/// - whether the name is live, unlinked (nothing is uploaded any more) or
///   retired (the last handle went and the local copy is deleted: a later
///   change goes to the object);
/// - when the journal beside the local copy is written and removed;
/// - the streamed upload of a file written in order: when it starts, what
///   it sends, when it is abandoned, and that the close takes it over.
///
/// The phases a person sees (`bucketfs status`, the design note's
/// diagram) and what moves a file between them are `transitions`, the
/// machine's own table; `WriteBackTransitionTests` explores the machine to
/// check it and checks docs/architecture.md's table against it.
struct WriteBack: Sendable, Hashable {
    enum Name: Sendable, Hashable {
        /// Bound to its name: changes are uploaded there.
        case live
        /// Unlinked, or replaced by a rename: never uploaded again (unless
        /// the unlink fails and it is live again).
        case unlinked
        /// The last handle went and the local copy was deleted.
        case retired
    }

    enum Phase: String, Sendable, Hashable, CaseIterable {
        /// The bucket holds every byte.
        case clean
        /// Unsaved changes.
        case dirty
        /// One upload of a snapshot version in flight.
        case uploading
        /// The last attempt failed; its bytes are in the recovery folder.
        case failed
        /// The name was unlinked or renamed over: nothing is uploaded.
        case unlinked
        /// Last handle gone, local copy deleted (final).
        case retired
    }

    /// What the mount shows under the file's name: the one question code
    /// outside `WriteBack/` asks of a staged file.
    enum Visibility: Sendable, Equatable {
        /// The name shows this file: stat, getxattr, lookups and listings
        /// show its staged view. `unsaved`: it holds changes the bucket
        /// lacks (a metadata change rides along with the coming upload).
        case shown(unsaved: Bool)
        /// The name is not this file's (unlinked, renamed over, retired):
        /// it shows what the bucket holds.
        case hidden
    }

    /// The upload started while the file is written in order.
    enum Stream: Sendable, Hashable {
        case none
        /// Its start request is in flight; `current`: nothing has happened
        /// since that makes the session useless (a truncation, a write out
        /// of order, an unlink).
        case starting(current: Bool, task: StartTask?)
        /// Open: bytes below `requested` are asked to be sent, in steps of
        /// `granularity`; one send at a time; after a failed send it only
        /// waits to be abandoned (the close uploads the whole file).
        case open(OpenStream)
    }

    /// The Tasks the executor made for the machine's effects, held in the
    /// phase they belong to (the machine never makes, awaits or cancels
    /// one): a second flush joins the upload's, an upload waits for the
    /// stream's start and its latest send.
    typealias UploadTask = Task<Result<Void, FSError>, Never>
    typealias StartTask = Task<Void, Never>
    typealias SendTask = Task<Result<Void, StoreError>, Never>

    /// The upload in flight: the version it uploads, and its Task once made.
    struct Upload: Sendable, Hashable {
        let version: UInt64
        var task: UploadTask?
    }

    struct OpenStream: Sendable, Hashable {
        var requested: Int64
        var granularity: Int64
        /// Bytes between sends (each end rounded down to `granularity`).
        var step: Int64
        /// The most bytes the session may carry (nil: any number).
        var limit: Int64?
        var sending = false
        var failed = false
        /// The session (nil only in table tests, which need none).
        var session: UploadStream?
        /// The latest send's Task, once made.
        var lastSend: SendTask?
    }

    /// A Task the executor made for an effect, in the event's critical
    /// section.
    enum Launched: Sendable, Equatable {
        case upload(UploadTask)
        case streamStart(StartTask)
        case send(SendTask)
    }

    enum Action: Sendable, Equatable {
        /// Write the journal beside the local copy (first change since the
        /// last upload).
        case writeJournal
        /// The file is clean: delete the journal.
        case removeJournal
        /// Start a streaming session from the content as it is now.
        case startStream
        /// Send the stream's bytes up to this offset.
        case sendStream(upTo: Int64)
        /// The stream no longer carries the content: end its session.
        case abandonStream
    }

    /// What the machine is told: every event of a staged file's life.
    enum Event: Sendable, Equatable {
        /// An open attaches a handle; `new`: the file was made for it.
        case attach(new: Bool)
        /// Handles move onto this file at once (readers of an unlinked
        /// generation).
        case adopt(handles: Int)
        /// A handle was released.
        case released
        /// After the last release, and after each upload it led to.
        case retire
        /// create made the file: it must reach the bucket even if empty.
        case created
        case wrote(Range<Int64>)
        case truncated(from: Int64, to: Int64)
        /// A change to ride along with the coming upload (chmod, utimens,
        /// xattrs of a dirty file).
        case rideAlong
        /// A flush, fsync, release, rename or the unmount asks for an upload.
        case uploadRequested
        /// The upload of this version stored it; `hasContent`: not empty.
        case uploadStored(UInt64, hasContent: Bool)
        /// The upload of this version failed (its bytes are in recovery).
        case uploadFailed(UInt64)
        /// The uploader is done (after stored or failed).
        case uploadEnded
        /// Unlinked, or about to be replaced by a rename.
        case unlink
        /// The delete or rename failed: the name is the file's again.
        case relink
        /// The file's name changed (a rename of it).
        case renamed
        /// The stream's start request ended: a session of this
        /// granularity, or nil if none could be started; `step`: bytes
        /// between its sends (nil: `streamChunk`); `limit`: the most it
        /// may carry (nil: no bound), past which another stream starts.
        case streamStarted(granularity: Int64?, step: Int64? = nil, limit: Int64? = nil, session: UploadStream? = nil)
        case streamSent(ok: Bool)
        /// The executor made the Task of an effect (an upload it was told
        /// to start, the stream's start or a send).
        case launched(Launched)
        /// An upload takes the stream over.
        case takeStream
    }

    /// The machine's answer to the one who told it an event.
    enum Answer: Sendable, Equatable {
        case none
        /// attach: a handle was attached; released: it was the last;
        /// rideAlong: the change rides along; streamStarted: the session is
        /// kept (if not, the caller abandons it).
        case accepted(Bool)
        /// A truncate of a retired file: the caller changes the object.
        case refused
        case upload(UploadStep)
        case retire(RetireStep)
        /// unlink: an upload is in flight (the caller waits for it: what
        /// it stores must be deleted too).
        case unlinked(uploadInFlight: Bool)
        case take(StreamTake)
    }

    /// What handling an event gives: the actions the executor carries out
    /// (`WriteBackStore.run`) and the answer.
    struct Effects: Sendable, Equatable {
        var actions: [Action] = []
        var answer: Answer = .none
        /// The session an `.abandonStream` (or a retire) ends: a session
        /// leaves the machine only so, or taken over by an upload.
        var abandoned: UploadStream?
        /// What `.take(.take)` hands over: the session and its latest send.
        var taken: (session: UploadStream, lastSend: SendTask?)?

        static func == (a: Effects, b: Effects) -> Bool {
            a.actions == b.actions && a.answer == b.answer && a.abandoned === b.abandoned
                && a.taken?.session === b.taken?.session && a.taken?.lastSend == b.taken?.lastSend
        }
    }

    /// The machine's one entry: every event goes through here.
    mutating func handle(_ event: Event) -> Effects {
        let before: OpenStream? = if case .open(let open) = stream { open } else { nil }
        var effects = effects(of: event)
        if let session = before?.session, streamSession !== session {
            if case .take(.take) = effects.answer {
                effects.taken = (session, before?.lastSend)
            } else {
                effects.abandoned = session
            }
        }
        return effects
    }

    /// The open stream's session.
    var streamSession: UploadStream? {
        if case .open(let open) = stream { return open.session }
        return nil
    }

    private mutating func effects(of event: Event) -> Effects {
        switch event {
        case .attach(let new): return Effects(answer: .accepted(attach(new: new)))
        case .adopt(let count):
            adopt(handles: count)
            return Effects()
        case .released: return Effects(answer: .accepted(released()))
        case .retire: return Effects(answer: .retire(retire()))
        case .created:
            created()
            return Effects()
        case .wrote(let range): return Effects(actions: wrote(range))
        case .truncated(let from, let to):
            guard let actions = truncated(from: from, to: to) else { return Effects(answer: .refused) }
            return Effects(actions: actions)
        case .rideAlong: return Effects(answer: .accepted(rideAlong()))
        case .uploadRequested: return Effects(answer: .upload(uploadRequested()))
        case .uploadStored(let version, let hasContent): return Effects(actions: uploadStored(version, hasContent: hasContent))
        case .uploadFailed(let version):
            uploadFailed(version)
            return Effects()
        case .uploadEnded:
            uploadEnded()
            return Effects()
        case .unlink:
            let (inFlight, actions) = unlink()
            return Effects(actions: actions, answer: .unlinked(uploadInFlight: inFlight))
        case .relink:
            relink()
            return Effects()
        case .renamed: return Effects(actions: renamed())
        case .streamStarted(let granularity, let step, let limit, let session):
            let (kept, actions) = streamStarted(granularity: granularity, step: step, limit: limit, session: session)
            return Effects(actions: actions, answer: .accepted(kept))
        case .streamSent(let ok):
            streamSent(ok: ok)
            return Effects()
        case .takeStream: return Effects(answer: .take(takeStream()))
        case .launched(let launched):
            switch (launched, stream) {
            case (.upload(let task), _): upload?.task = task
            case (.streamStart(let task), .starting(let current, _)): stream = .starting(current: current, task: task)
            case (.send(let task), .open(var open)):
                open.lastSend = task
                stream = .open(open)
            default: break
            }
            return Effects()
        }
    }

    /// What a flush, fsync or release asking for an upload does.
    enum UploadStep: Sendable, Equatable {
        /// Nothing to upload (clean, or unlinked).
        case nothing
        /// Upload this version (the caller is the uploader).
        case start(version: UInt64)
        /// One is in flight: wait for it, then ask again.
        case join
    }

    /// What the last release does next.
    enum RetireStep: Sendable, Equatable {
        /// A handle is open again: the file stays.
        case keep
        /// Unsaved writes that were not tried yet: upload, then ask again.
        case uploadFirst
        /// Retired: delete the local copy.
        case discard
    }

    /// What an upload does with the stream.
    enum StreamTake: Sendable, Equatable {
        case none
        /// Its start is in flight: wait for it, then ask again.
        case waitForStart
        /// Hand the open stream to the uploader (the file has none after);
        /// `sendFailed`: a send failed already (the uploader abandons it).
        case take(sendFailed: Bool)
    }

    /// Bytes a stream sends at a time, unless it has a step of its own.
    let streamChunk: Int64
    /// Bytes the file holds before its stream starts (`streamChunk`, or
    /// what `ParallelUploads.streamStart` says: less near the store, where
    /// one request follows the file). The first send then carries
    /// everything written so far.
    let streamStart: Int64
    /// Every change bumps it; the file is dirty while it differs from
    /// `uploadedVersion`.
    private(set) var version: UInt64 = 0
    private(set) var uploadedVersion: UInt64 = 0
    /// The version whose upload failed (its bytes are in the recovery
    /// folder): the last release does not try it again.
    private(set) var failedVersion: UInt64?
    private(set) var handles = 0
    private(set) var name: Name = .live
    /// The journal beside the local copy is written.
    private(set) var journaled = false
    /// Bytes [0, sequentialEnd) were written in order from an empty file,
    /// and nothing else: such a file can stream its upload.
    private(set) var sequentialEnd: Int64?
    /// The upload in flight.
    private(set) var upload: Upload?
    /// The version being uploaded.
    var uploading: UInt64? { upload?.version }
    private(set) var stream: Stream = .none
    /// After a start that gave no stream (it failed, or no stream may be
    /// open now), the next start waits until the file holds this much
    /// (another `streamChunk`), not the next write; 0: no such wait.
    private(set) var streamRetryFrom: Int64 = 0

    /// `emptyAtStart`: a new or truncated file, which may stream;
    /// `streamStart` nil: at `streamChunk`.
    init(streamChunk: Int64, streamStart: Int64? = nil, emptyAtStart: Bool) {
        self.streamChunk = max(1, streamChunk)
        self.streamStart = max(1, streamStart ?? self.streamChunk)
        sequentialEnd = emptyAtStart ? 0 : nil
    }

    var dirty: Bool { version != uploadedVersion }

    var phase: Phase {
        switch name {
        case .retired: return .retired
        case .unlinked: return .unlinked
        case .live:
            if !dirty { return .clean }
            if uploading != nil { return .uploading }
            return failedVersion == version ? .failed : .dirty
        }
    }

    var visibility: Visibility { name == .live ? .shown(unsaved: dirty) : .hidden }

    /// Unsaved writes for the file's name (what the recovery retrier must
    /// not overwrite).
    var holdsUnsavedWrites: Bool { dirty && name != .unlinked }

    /// The last release still owes an upload.
    var owesFinalUpload: Bool { dirty && failedVersion != version && name == .live }

    /// Made by create and nothing done to it since.
    var untouchedSinceCreate: Bool { version == 1 && uploadedVersion == 0 && name == .live }

    // MARK: - Handles

    /// create made the file: it must reach the bucket even if nothing is
    /// written.
    private mutating func created() {
        version += 1
    }

    /// An open attaches a handle. A retired file takes none (its local copy
    /// is gone), unless it is `new`: made for this very open.
    private mutating func attach(new: Bool) -> Bool {
        guard new || name != .retired else { return false }
        handles += 1
        return true
    }

    /// `count` handles move onto this file at once (readers of an unlinked
    /// generation).
    private mutating func adopt(handles count: Int) {
        handles += count
    }

    /// A handle was released; true if it was the last.
    private mutating func released() -> Bool {
        handles = max(0, handles - 1)
        return handles == 0
    }

    /// After the last release (and after each upload it led to).
    private mutating func retire() -> RetireStep {
        guard handles == 0 else { return .keep }
        if owesFinalUpload { return .uploadFirst }
        name = .retired
        stream = .none
        return .discard
    }

    // MARK: - Changes

    /// Bytes `range` were written.
    private mutating func wrote(_ range: Range<Int64>) -> [Action] {
        version += 1
        if let end = sequentialEnd { sequentialEnd = range.lowerBound == end ? range.upperBound : nil }
        var actions: [Action] = []
        if !journaled {
            journaled = true
            actions.append(.writeJournal)
        }
        return actions + advanceStream()
    }

    /// The size was set to `newSize` from `oldSize`. nil: the file is
    /// retired, the caller changes the object instead.
    private mutating func truncated(from oldSize: Int64, to newSize: Int64) -> [Action]? {
        guard name != .retired else { return nil }
        // The stream carries bytes that may no longer be the content.
        let actions = dropStream()
        guard oldSize != newSize else { return actions }
        version += 1
        if newSize == 0 {
            sequentialEnd = 0
            streamRetryFrom = 0
        } else if sequentialEnd != newSize {
            sequentialEnd = nil
        }
        return actions
    }

    /// A change that rides along with the coming upload (chmod, utimens,
    /// xattrs of a dirty file): accepted only while there is one, that is,
    /// while dirty and live; else the caller changes the object itself.
    /// It counts as a change, so an upload in flight is followed by another.
    private mutating func rideAlong() -> Bool {
        guard dirty, name == .live else { return false }
        version += 1
        return true
    }

    // MARK: - Uploads

    private mutating func uploadRequested() -> UploadStep {
        if uploading != nil { return .join }
        guard dirty, name == .live else { return .nothing }
        upload = Upload(version: version)
        return .start(version: version)
    }

    /// The upload of `stored` succeeded. `hasContent`: the file is not
    /// empty (appends after an upload cannot continue its session).
    private mutating func uploadStored(_ stored: UInt64, hasContent: Bool) -> [Action] {
        uploadedVersion = max(uploadedVersion, stored)
        failedVersion = nil
        if hasContent { sequentialEnd = nil }
        guard journaled, !dirty else { return [] }
        journaled = false
        return [.removeJournal]
    }

    /// The upload of `version` failed: its bytes are in the recovery folder.
    private mutating func uploadFailed(_ version: UInt64) {
        failedVersion = version
    }

    /// The uploader is done (after `uploadStored` or `uploadFailed`).
    private mutating func uploadEnded() {
        upload = nil
    }

    // MARK: - The name

    /// Unlinked, or about to be replaced by a rename. Returns whether an
    /// upload is in flight (the caller waits for it: what it stores must
    /// be deleted too) and the actions.
    private mutating func unlink() -> (uploadInFlight: Bool, actions: [Action]) {
        if name == .live { name = .unlinked }
        return (uploading != nil, dropStream())
    }

    /// The delete or rename failed: the name is the file's again.
    private mutating func relink() {
        if name == .unlinked { name = .live }
    }

    /// The file's name changed (rename): a journal written for the old
    /// name is rewritten for the new one.
    private mutating func renamed() -> [Action] {
        journaled ? [.writeJournal] : []
    }

    // MARK: - The stream

    /// After a write: start, feed or drop the stream.
    private mutating func advanceStream() -> [Action] {
        guard let end = sequentialEnd, name == .live else { return dropStream() }
        switch stream {
        case .none:
            guard end >= max(streamStart, streamRetryFrom) else { return [] }
            stream = .starting(current: true, task: nil)
            return [.startStream]
        case .starting:
            return []
        case .open(var open):
            if let limit = open.limit, end > limit {
                // The session cannot carry the file any more (one request
                // near the store, past `singleRequestMax`): another kind
                // starts, and its first send catches up.
                stream = .starting(current: true, task: nil)
                return [.abandonStream, .startStream]
            }
            let target = end / open.step * open.step / open.granularity * open.granularity
            guard !open.sending, !open.failed, target > open.requested else { return [] }
            open.requested = target
            open.sending = true
            stream = .open(open)
            return [.sendStream(upTo: target)]
        }
    }

    private mutating func dropStream() -> [Action] {
        switch stream {
        case .none: return []
        case .starting(_, let task):
            stream = .starting(current: false, task: task)
            return []
        case .open:
            stream = .none
            return [.abandonStream]
        }
    }

    /// The stream's start request ended: a session of `granularity`, or
    /// nil if it could not be started. `kept`: the session is the file's
    /// stream now; if not (the content moved away from it meanwhile, or a
    /// close uploaded it), the caller abandons it.
    private mutating func streamStarted(
        granularity: Int64?, step: Int64?, limit: Int64?, session: UploadStream?
    ) -> (kept: Bool, actions: [Action]) {
        guard case .starting(let current, _) = stream else { return (false, []) }
        stream = .none
        guard let granularity else {
            if current, let end = sequentialEnd { streamRetryFrom = end + streamChunk }
            return (false, [])
        }
        guard current, sequentialEnd != nil, dirty, name == .live else { return (false, []) }
        stream = .open(OpenStream(
            requested: 0, granularity: max(1, granularity), step: max(1, step ?? streamChunk), limit: limit, session: session))
        return (true, advanceStream())
    }

    /// A send ended.
    private mutating func streamSent(ok: Bool) {
        guard case .open(var open) = stream else { return }
        open.sending = false
        open.failed = open.failed || !ok
        stream = .open(open)
    }

    /// An upload takes the stream over (or learns there is none).
    private mutating func takeStream() -> StreamTake {
        switch stream {
        case .none: return .none
        case .starting: return .waitForStart
        case .open(let open):
            stream = .none
            return .take(sendFailed: open.failed)
        }
    }

    /// The content is exactly what the stream carries (written in order
    /// from empty and nothing else).
    func streamCarries(size: Int64) -> Bool { sequentialEnd == size }
}
