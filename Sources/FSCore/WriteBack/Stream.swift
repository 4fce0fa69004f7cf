import Foundation
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The upload of a file written in order, started while it is written.
///
/// A file written from offset 0 strictly in order (`cp`, `dd`, a download
/// into the mount), once it holds `MountOptions.streamChunkSize` bytes,
/// starts a resumable upload of unknown length and sends every further
/// `MountOptions.streamChunkSize` bytes as they arrive, from the staged file
/// (so memory stays bounded whatever the size). The close then only sends
/// the tail and finishes the session, instead of uploading everything after
/// the last write. A write anywhere else, or a truncation, ends streaming
/// for that content (the session is abandoned) and the close uploads as
/// usual. If the session fails, the close also falls back to a whole
/// upload: the stream is an optimisation, never the only way the bytes can
/// go. When to start, send and abandon is the `WriteBack` machine's call;
/// this is the executor's side.
final class UploadStream: Sendable {
    let put: any StreamingPut
    /// The metadata the session was started with; if the upload's metadata
    /// differs at finish (the mtime moved on, a chmod came), one patch
    /// follows.
    let sentMetadata: [String: String]

    init(put: any StreamingPut, sentMetadata: [String: String]) {
        self.put = put
        self.sentMetadata = sentMetadata
    }
}

/// An open stream handed to the upload that finishes it: its latest send,
/// which the uploader waits for, and whether an earlier one failed (then
/// the session is abandoned and the whole file is put).
struct TakenStream: Sendable {
    let stream: UploadStream
    let lastSend: Task<Result<Void, StoreError>, Never>?
    let sendFailed: Bool
}

extension WriteBackStore {
    /// Launches, under the file's lock, the machine's actions that must be
    /// there (see `StagedFile.transition`): the stream's start and sends,
    /// whose Tasks an upload must find to wait for, and the abandon, which
    /// takes the stream out of the state. The journal is left for after.
    func launcher(_ staged: StagedFile, inode: UInt64) -> StagedFile.Launch {
        { [self] action, s in
            switch action {
            case .startStream:
                let options = Self.uploadOptions(s)
                s.streamStart = Task { await self.startStream(staged, inode: inode, options: options) }
                return true
            case .sendStream(let end):
                guard let stream = s.stream else { return true }
                s.streamSend = Task { await self.send(stream, upTo: end, of: staged) }
                return true
            case .abandonStream:
                return Self.endingStream(action, &s)
            case .writeJournal, .removeJournal:
                return false
            }
        }
    }

    /// The launcher of events that can only end the stream (unlink, a
    /// rename over the file): takes it out of the state and abandons its
    /// session.
    static func endingStream(_ action: WriteBack.Action, _ s: inout StagedFile.State) -> Bool {
        guard action == .abandonStream else { return false }
        if let stream = s.stream {
            s.stream = nil
            s.streamSend = nil
            Task { await stream.put.abandon() }
        }
        return true
    }

    /// Performs what `launcher` left for after the lock.
    func perform(_ actions: [WriteBack.Action], _ staged: StagedFile, inode: UInt64) {
        for action in actions {
            switch action {
            case .writeJournal: writeJournal(staged, inode: inode)
            // `StagedFile.uploaded` removes the journal under the lock (a
            // write racing it must re-create it after, not before), and
            // launch ran the stream's actions there.
            case .removeJournal, .startStream, .sendStream, .abandonStream: break
            }
        }
    }

    private func send(_ stream: UploadStream, upTo end: Int64, of staged: StagedFile) async -> Result<Void, StoreError> {
        let result: Result<Void, StoreError>
        do {
            try await stream.put.send(upTo: end)
            result = .success(())
        } catch {
            logger.warning("streaming upload failed; the close will upload the whole file", metadata: ["cause": "\(error)"])
            result = .failure(error)
        }
        staged.streamSent(stream, ok: (try? result.get()) != nil)
        return result
    }

    private func startStream(_ staged: StagedFile, inode: UInt64, options: PutOptions) async {
        var put: (any StreamingPut)?
        if let path = state.withLock({ $0.inodes[inode]?.path }) {
            do {
                put = try await store.startStreamingPut(objectName(path), from: staged.file.path, options: options)
            } catch {
                logger.debug("streaming upload not started; the close will upload the whole file", metadata: ["object": "\(objectName(path))", "cause": "\(error)"])
            }
        }
        let stream = put.map { UploadStream(put: $0, sentMetadata: options.customMetadata) }
        let (kept, later) = staged.transition({ s -> (Bool, [WriteBack.Action]) in
            s.streamStart = nil
            let (kept, actions) = s.writeBack.streamStarted(granularity: put?.granularity)
            // Before the actions are launched: they send on it.
            if kept { s.stream = stream }
            return (kept, actions)
        }, launch: launcher(staged, inode: inode))
        perform(later, staged, inode: inode)
        if !kept, let put { await put.abandon() }
    }
}
