import Foundation

/// A resumable upload whose length is not known when it starts: the file
/// at `path` is being written sequentially, and its bytes are sent while
/// that goes on. The owner calls `send(upTo:)` whenever another whole
/// number of 256 KiB granules is on disk, and `finish(size:)` once the
/// file is complete, which sends the rest and creates the object.
///
///     let upload = try await ref.startStreamingUpload(fromFile: staged, metadata: nil, ifGenerationMatch: 0)
///     try await upload.send(upTo: 16 << 20)        // while the file grows
///     let stored = try await upload.finish(size: finalSize)
///
/// Bytes are read from the file when they are sent, never kept in memory;
/// a byte already sent must not change afterwards. A chunk lost to a
/// connection failure, a 5xx or an offset disagreement is resent from the
/// offset the server reports, within the configured retry policy, as
/// `putFile` does. `ifGenerationMatch` is checked when the upload starts
/// and again when it finishes (`StorageError.preconditionFailed`; nothing
/// is overwritten). Calls must not overlap: one `send` or `finish` at a
/// time.
public final class StreamingUpload: Sendable {
    /// What every `send(upTo:)` end must be a multiple of: Cloud Storage
    /// accepts non-final chunks only in whole multiples of 256 KiB.
    public static let granularity: Int64 = ResumableSession.granularity

    public let reference: StorageReference
    /// The file the bytes are read from.
    public let path: String
    private let session: ResumableSession

    fileprivate init(reference: StorageReference, path: String, session: ResumableSession) {
        self.reference = reference
        self.path = path
        self.session = session
    }

    /// Bytes the server has acknowledged.
    public var acknowledged: Int64 { session.acknowledged }

    /// Sends bytes [acknowledged, end) of the file; `end` is a multiple of
    /// `granularity` above `acknowledged`, and the file holds at least
    /// that many bytes.
    public func send(upTo end: Int64) async throws {
        let acknowledged = session.acknowledged
        guard end % Self.granularity == 0, end > acknowledged else {
            throw StorageError.invalidArgument(
                "a streaming upload sends up to a multiple of \(Self.granularity) above the \(acknowledged) bytes acknowledged, not \(end)")
        }
        try checkFileHolds(end)
        try await run { try await session.append(upTo: end) }
    }

    /// Sends bytes [acknowledged, size) of the file as the last chunk
    /// (none, if the server has them all) and returns the object's metadata.
    public func finish(size: Int64) async throws -> StorageMetadata {
        let acknowledged = session.acknowledged
        guard size >= acknowledged else {
            throw StorageError.invalidArgument("a streaming upload of \(acknowledged) acknowledged bytes cannot end at \(size)")
        }
        try checkFileHolds(size)
        return try await run { try await session.finish(total: size) }
    }

    /// Tells the server to drop the session (best effort); the object is
    /// left as it was.
    public func abandon() async {
        await session.abandon()
    }

    /// A short file would abort the request mid-body and be retried as if
    /// the network had failed; say what is wrong at once instead.
    private func checkFileHolds(_ end: Int64) throws {
        let size = try StorageReference.regularFileSize(path)
        guard size >= end else {
            throw StorageError.invalidArgument("\(path) holds \(size) bytes, fewer than the \(end) to send")
        }
    }

    /// Cancellation surfaces as `StorageError.cancelled`, as in every other call.
    private func run<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch {
            throw ObjectAPI.map(error)
        }
    }
}

extension StorageReference {
    /// Starts a resumable upload of the file at `path` to this reference,
    /// whose final length is not known yet (see `StreamingUpload`). The
    /// content type defaults to the one the file's extension implies, else
    /// this reference's name's, as with `putFile`. With `ifGenerationMatch`
    /// (0: only if absent) a failing precondition is reported here already,
    /// as `StorageError.preconditionFailed`, and again at `finish`.
    public func startStreamingUpload(
        fromFile path: String, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil
    ) async throws -> StreamingUpload {
        try self.path.validateForObject()
        _ = try Self.regularFileSize(path)
        let resource = UploadResource(
            metadata: uploadMetadata(metadata, nameForType: typeName(forFile: path)), name: fullPath)
        let session = ResumableSession(reference: self, source: .file(path: path))
        do {
            try await session.start(resource, ifGenerationMatch: ifGenerationMatch, declaredLength: nil)
        } catch {
            throw ObjectAPI.map(error)
        }
        return StreamingUpload(reference: self, path: path, session: session)
    }
}
