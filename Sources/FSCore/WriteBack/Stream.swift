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
final class UploadStream: Sendable, Hashable {
    let put: any StreamingPut
    /// The metadata the session was started with; if the upload's metadata
    /// differs at finish (`cp -p` set the mtime, a chmod came), one patch
    /// follows.
    let sentMetadata: [String: String]

    init(put: any StreamingPut, sentMetadata: [String: String]) {
        self.put = put
        self.sentMetadata = sentMetadata
    }

    /// One session is itself only.
    static func == (a: UploadStream, b: UploadStream) -> Bool { a === b }
    func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
}

/// An open stream handed to the upload that finishes it: its latest send,
/// which the uploader waits for, and whether an earlier one failed (then
/// the session is abandoned and the whole file is put).
struct TakenStream: Sendable {
    let stream: UploadStream
    let lastSend: Task<Result<Void, StoreError>, Never>?
    let sendFailed: Bool
}

/// The executor's side of the stream: the start and the sends the machine
/// asks for (launched under the lock by `WriteBackStore.handle`).
extension WriteBackStore {
    func send(_ stream: UploadStream, upTo end: Int64, of staged: StagedFile) async -> Result<Void, StoreError> {
        let result: Result<Void, StoreError>
        do {
            try await stream.put.send(upTo: end)
            result = .success(())
        } catch {
            logger.warning("streaming upload failed; the close will upload the whole file", metadata: ["cause": "\(error)"])
            result = .failure(error)
        }
        // Only while it is still the file's stream.
        let ok = (try? result.get()) != nil
        handle({ s in s.writeBack.streamSession === stream ? .streamSent(ok: ok) : nil }, of: staged)
        return result
    }

    /// Starts the stream of a file written in order that holds `written`
    /// bytes: near the store and up to `singleRequestMax`, one request
    /// that follows the file (bounded by that size: past it the machine
    /// starts another); else parts, or else one resumable session.
    func startStream(_ staged: StagedFile, inode: UInt64?, options: PutOptions, written: Int64) async {
        var put: (any StreamingPut)?
        var step: Int64?
        var limit: Int64?
        if let inode, let path = path(of: inode) {
            do {
                if parallelUploads.streamsOneRequest(written: written) {
                    // With every place taken nothing streams: the close
                    // sends the file in one request (`route`).
                    if let place = parallelUploads.reserveOneRequestStream() {
                        do {
                            let request = try await store.startOneRequestStream(objectName(path), from: staged.file.path, options: options)
                            put = PlacedStreamingPut(inner: request, place: place)
                        } catch {
                            place.release()
                            throw error
                        }
                        step = ParallelUploads.oneRequestStreamStep
                        limit = parallelUploads.singleRequestMax
                    }
                } else if await parallelUploads.streamsParts(chunk: self.options.streamChunkSize) {
                    put = try await PartsStream.start(
                        objectName(path), from: staged.file.path, options: options, uploads: parallelUploads,
                        partSize: self.options.streamChunkSize)
                } else {
                    put = try await store.startStreamingPut(objectName(path), from: staged.file.path, options: options)
                }
            } catch {
                logger.debug("streaming upload not started; the close will upload the whole file", metadata: ["object": "\(objectName(path))", "cause": "\(error)"])
            }
        }
        let stream = put.map { UploadStream(put: $0, sentMetadata: options.customMetadata) }
        // Kept, the session is the machine's (the first send goes on it);
        // if not, it is abandoned here.
        let answer = handle(.streamStarted(granularity: put?.granularity, step: step, limit: limit, session: stream), of: staged)
        if answer != .accepted(true), let put { await put.abandon() }
    }

    /// An upload takes the open stream over: waits while its start is in
    /// flight; nil if there is none.
    func takeStream(of staged: StagedFile) async -> TakenStream? {
        while true {
            var starting: WriteBack.StartTask?
            var taken: TakenStream?
            let answer = handle(.takeStream, of: staged) { s, effects in
                switch effects.answer {
                case .take(.take(let failed)):
                    taken = effects.taken.map { TakenStream(stream: $0.session, lastSend: $0.lastSend, sendFailed: failed) }
                case .take(.waitForStart):
                    if case .starting(_, let task) = s.writeBack.stream { starting = task }
                default: break
                }
            }
            switch answer {
            case .take(.waitForStart):
                // Set in the same critical section as `.starting`.
                if let starting { await starting.value } else { await Task.yield() }
            case .take(.take): return taken
            default: return nil
            }
        }
    }
}
