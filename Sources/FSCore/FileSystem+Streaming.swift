import Foundation
import Synchronization

/// The upload of a file written in order, started while it is written.
///
/// A file written from offset 0 strictly in order (`cp`, `dd`, a download
/// into the mount), once it holds `MountOptions.streamChunkSize` bytes, starts a
/// resumable upload of unknown length and sends every further
/// `MountOptions.streamChunkSize` bytes as they arrive, from the staged file (so memory
/// stays bounded whatever the size). The close then only sends the tail and
/// finishes the session, instead of uploading everything after the last
/// write. A write anywhere else, or a truncation, ends streaming for that
/// content (the session is abandoned) and the close uploads as usual. If
/// the session fails, the close also falls back to a whole upload: the
/// stream is an optimisation, never the only way the bytes can go.
final class UploadStream: Sendable {
    let put: any StreamingPut
    /// The metadata the session was started with; if the upload's metadata
    /// differs at finish (the mtime moved on, a chmod came), one patch
    /// follows.
    let sentMetadata: [String: String]

    struct State: Sendable {
        /// End of the bytes asked to be sent so far.
        var requested: Int64 = 0
        var sending: Task<Result<Void, StoreError>, Never>?
        var failure: StoreError?
    }

    let state = Mutex(State())

    init(put: any StreamingPut, sentMetadata: [String: String]) {
        self.put = put
        self.sentMetadata = sentMetadata
    }
}

extension FileSystem {
    /// Bytes a stream waits for before it starts, and sends at a time.
    var streamThreshold: Int64 { options.streamChunkSize }

    /// After a write: starts, feeds or ends the stream of `staged`.
    func advanceStream(_ staged: StagedFile, inode: UInt64) {
        enum Step { case none, send(UploadStream, Int64), drop(UploadStream) }
        let step = staged.state.withLock { s -> Step in
            guard let end = s.sequentialEnd, !s.unlinked else {
                if let stream = s.stream {
                    s.stream = nil
                    return .drop(stream)
                }
                return .none
            }
            switch s.stream {
            case nil:
                guard s.streamStart == nil, end >= streamThreshold else { return .none }
                let snapshot = s
                // Set under the lock, so an upload that comes next sees it;
                // the Task's own end (which clears it) needs the lock too.
                s.streamStart = Task { await self.startStream(staged, inode: inode, snapshot) }
                return .none
            case let stream?:
                return stream.state.withLock { t -> Step in
                    let granularity = stream.put.granularity
                    let target = end / streamThreshold * streamThreshold / granularity * granularity
                    guard t.sending == nil, t.failure == nil, target > t.requested else { return .none }
                    t.requested = target
                    t.sending = Task { await self.send(stream, upTo: target) }
                    return .send(stream, target)
                }
            }
        }
        switch step {
        case .none, .send: break
        case .drop(let stream): Task { await stream.put.abandon() }
        }
    }

    private func send(_ stream: UploadStream, upTo end: Int64) async -> Result<Void, StoreError> {
        let result: Result<Void, StoreError>
        do {
            try await stream.put.send(upTo: end)
            result = .success(())
        } catch {
            logger.warning("streaming upload failed; the close will upload the whole file", metadata: ["cause": "\(error)"])
            result = .failure(error)
        }
        stream.state.withLock { t in
            t.sending = nil
            if case .failure(let error) = result { t.failure = error }
        }
        return result
    }

    private func startStream(_ staged: StagedFile, inode: UInt64, _ snapshot: StagedFile.State) async {
        defer { staged.state.withLock { $0.streamStart = nil } }
        guard let path = state.withLock({ $0.inodes[inode]?.path }) else { return }
        let options = Self.uploadOptions(snapshot)
        let metadata = options.customMetadata
        let put: any StreamingPut
        do {
            put = try await store.startStreamingPut(objectName(path), from: staged.file.path, options: options)
        } catch {
            logger.debug("streaming upload not started; the close will upload the whole file", metadata: ["object": "\(objectName(path))", "cause": "\(error)"])
            return
        }
        let stream = UploadStream(put: put, sentMetadata: metadata)
        let kept = staged.state.withLock { s -> Bool in
            // The content may have stopped being sequential meanwhile, or
            // been uploaded by a close.
            guard s.sequentialEnd != nil, s.stream == nil, s.dirty, !s.unlinked else { return false }
            s.stream = stream
            return true
        }
        if kept {
            advanceStream(staged, inode: inode)
        } else {
            await put.abandon()
        }
    }

    /// At upload: the stream started while the file was written, once its
    /// start request (if one is in flight) has ended; nil if there is none.
    /// The uploader finishes or abandons it: the file has no stream after.
    func takeStream(_ staged: StagedFile) async -> UploadStream? {
        if let starting = staged.state.withLock({ $0.streamStart }) { await starting.value }
        return staged.state.withLock { s -> UploadStream? in
            defer { s.stream = nil }
            return s.stream
        }
    }
}
