import Foundation
import Synchronization
import Transport

/// Downloads: the whole object into memory or a file (verified against the
/// object's checksum), and byte ranges pinned to a generation (what the
/// filesystem reads through).
///
/// An attempt that ends mid-body, whatever ended it (a cut connection, a
/// stall), is resumed with a Range request from the first byte not yet
/// delivered, pinned to the generation of the first response, so a retry
/// never mixes two versions of an object nor delivers a byte twice.
///
/// Every download returns the object's bytes as stored: an object stored
/// with `Content-Encoding: gzip` (`gsutil cp -z`) comes back compressed,
/// `size` bytes long and matching its CRC32C, and ranges are offsets in
/// those bytes; gunzip them when `metadata.contentEncoding == "gzip"` to
/// get the content. (The Firebase SDKs return what their platform's HTTP
/// stack makes of the answer, which may decode it; the stored bytes are
/// the only ones sizes, ranges and checksums describe.)
extension StorageReference {
    /// The whole object; fails with `downloadSizeExceeded` if it is larger
    /// than `maxSize` bytes, and with `nonMatchingChecksum` if the bytes do
    /// not match the checksum the server announced.
    public func data(maxSize: Int64) async throws -> Data {
        let buffer = Mutex(Data())
        _ = try await download(range: nil, generation: nil, maxSize: maxSize) { bytes in
            buffer.withLock { $0.append(contentsOf: bytes) }
        }
        return buffer.withLock { $0 }
    }

    /// Downloads the whole object to `fileURL` (created or replaced) and
    /// returns it. A failed download removes the partial file.
    @discardableResult
    public func write(toFile fileURL: URL) async throws -> URL {
        try await download(toFile: fileURL.path, generation: nil, expecting: nil)
        return fileURL
    }

    /// `write(toFile:)`, calling `onProgress` with the bytes written so far
    /// as they arrive (on the transport's thread; keep it short).
    /// Cancelling the calling task stops the download and removes the file.
    @discardableResult
    public func write(toFile fileURL: URL, onProgress: @escaping @Sendable (Int64) -> Void) async throws -> URL {
        try await download(toFile: fileURL.path, generation: nil, expecting: nil, onProgress: onProgress)
        return fileURL
    }

    /// The whole object (of `generation`, verified against `expecting`
    /// when given) into the file at `path`, created or replaced; removed
    /// again if the download fails.
    func download(
        toFile path: String, generation: Int64?, expecting: ObjectHashes?, onProgress: (@Sendable (Int64) -> Void)? = nil
    ) async throws {
        let written = Atomic<Int64>(0)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw StorageError.invalidArgument("cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        do {
            _ = try await download(range: nil, generation: generation, maxSize: nil, expecting: expecting) { bytes in
                var done = 0
                while done < bytes.count {
                    let n = Glibc.write(fd, bytes.baseAddress! + done, bytes.count - done)
                    if n < 0 {
                        if errno == EINTR { continue }
                        throw StorageError.unknown(
                            message: "cannot write \(path): \(String(cString: strerror(errno)))", response: nil)
                    }
                    done += n
                }
                if let onProgress { onProgress(written.add(Int64(done), ordering: .relaxed).newValue) }
            }
        } catch {
            unlink(path)
            throw error
        }
    }

    /// The bytes in `range` of the object, from generation `generation` when
    /// given (a replaced object then fails with `objectNotFound`). The result
    /// is shorter than the range only at the end of the object.
    public func data(range: Range<Int64>, generation: Int64?) async throws -> Data {
        let buffer = Mutex(Data())
        _ = try await read(range: range, generation: generation) { bytes in
            buffer.withLock { $0.append(contentsOf: bytes) }
        }
        return buffer.withLock { $0 }
    }

    /// Streams the bytes in `range` of generation `generation` to `sink`
    /// (on the transport's thread); returns how many arrived.
    @discardableResult
    public func read(
        range: Range<Int64>, generation: Int64?, into sink: @escaping ResponseBodySink
    ) async throws -> Int64 {
        guard !range.isEmpty else { return 0 }
        return try await download(range: range, generation: generation, maxSize: nil, sink: sink)
    }

    /// The download loop. `generation` pins the object's version (JSON
    /// API: in the URL; Firebase v0, which cannot pin: checked against the
    /// generation a response names, and against the metadata on a
    /// resume). `expecting` gives the checksums a whole download must
    /// match when the caller already knows them.
    func download(
        range: Range<Int64>?, generation: Int64?, maxSize: Int64?, expecting: ObjectHashes? = nil,
        sink: @escaping ResponseBodySink
    ) async throws -> Int64 {
        try path.validateForObject()
        let state = DownloadState(maxSize: maxSize, verifies: range == nil)
        if let expecting { state.expect(expecting) }
        let api = self.api
        let pinsInURL = api.dialect == .jsonAPI
        let start = range?.lowerBound ?? 0
        var pinned = generation
        var resumes = 0
        while true {
            let offset = start + state.received
            var headers = Self.storedBytesHeaders
            if let range {
                headers["Range"] = "bytes=\(offset)-\(range.upperBound - 1)"
            } else if offset > 0 {
                headers["Range"] = "bytes=\(offset)-"
            }
            let url = api.objectURL(fullPath, [("alt", "media"), ("generation", pinsInURL ? pinned.map(String.init) : nil)])
            let before = state.received
            do {
                let response = try await api.send(
                    HTTPRequest(method: .get, url: url, headers: headers, isIdempotent: true),
                    object: fullPath, accepting: [416]
                ) { bytes in
                    do {
                        try state.accept(bytes)
                        try sink(bytes)
                    } catch {
                        state.recordSinkFailure(error)
                        throw error
                    }
                }
                if response.status == 416 { return state.received }  // range starts past the end
                if resumes == 0 { try state.noteFirstResponse(response.headers) }
                if let pinned, let served = state.generation, served != pinned {
                    // Only where the URL cannot pin (v0): another version came.
                    throw StorageError.objectNotFound("\(fullPath) (generation \(pinned) was replaced by \(served))")
                }
                pinned = pinned ?? state.generation
                try state.verify()
                return state.received
            } catch {
                // The size limit or the caller's sink stopped the transfer:
                // that error, not the transport's view of it, is the answer.
                if let failure = state.sinkFailure { throw failure }
                // The attempt ended (a cut, a stall, ...) after some of the body
                // arrived: go on from the first missing byte, within the retry budget.
                guard case StorageError.retryLimitExceeded(let reason) = error, state.received > before else { throw error }
                resumes += 1
                guard resumes < api.transport.configuration.retry.maxAttempts else {
                    throw StorageError.retryLimitExceeded(reason)
                }
                if pinned == nil { pinned = state.generation }
                if pinned == nil || !pinsInURL || (range == nil && !state.knowsExpectedHashes) {
                    // The broken response's headers are gone: take the
                    // generation and checksums from the object's metadata
                    // (where the URL cannot pin, check it is still the one).
                    let metadata = try await getMetadata()
                    if let pinned, metadata.generation != pinned {
                        throw StorageError.objectNotFound("\(fullPath) (generation \(pinned) was replaced by \(metadata.generation))")
                    }
                    pinned = pinned ?? metadata.generation
                    state.expect(ObjectHashes(crc32c: metadata.crc32c, md5: metadata.md5Hash))
                }
                api.storage.logger.debug("resuming download", metadata: [
                    "object": "\(fullPath)", "offset": "\(start + state.received)", "reason": "\(reason)",
                ])
            }
        }
    }
}

extension StorageReference {
    /// Every object read asks for the stored bytes. Without `gzip` in
    /// Accept-Encoding, Cloud Storage decompresses an object stored with
    /// `Content-Encoding: gzip` on the fly and then ignores Range
    /// (https://cloud.google.com/storage/docs/transcoding): the body would
    /// be neither the object's size nor match its checksums, and a ranged
    /// read would get the wrong bytes. With it, the server sends the bytes
    /// as stored (also when they are not gzip at all), which are what the
    /// metadata describes. The header is ours, not curl's
    /// CURLOPT_ACCEPT_ENCODING, so curl hands them over undecoded.
    static let storedBytesHeaders = ["Accept-Encoding": "gzip"]
}

/// What a download has seen so far. The sink runs on the transport's
/// thread while the task awaits, so the fields sit behind a Mutex.
private final class DownloadState: Sendable {
    private struct Fields {
        var received: Int64 = 0
        // CRC32C only: Cloud Storage announces it for every object and it is
        // four times cheaper than MD5; an md5-only server goes unverified.
        var checksum = ChecksumAccumulator(includeMD5: false)
        var expected: ObjectHashes?
        var generation: Int64?
        var announcedLength: Int64?
        var sinkFailure: (any Error)?
    }

    private let fields = Mutex(Fields())
    private let maxSize: Int64?
    private let verifies: Bool

    init(maxSize: Int64?, verifies: Bool) {
        self.maxSize = maxSize
        self.verifies = verifies
    }

    var received: Int64 { fields.withLock { $0.received } }
    var generation: Int64? { fields.withLock { $0.generation } }

    func accept(_ bytes: UnsafeRawBufferPointer) throws {
        try fields.withLock { f in
            f.received += Int64(bytes.count)
            if let maxSize, f.received > maxSize {
                throw StorageError.downloadSizeExceeded(total: f.announcedLength ?? f.received, maxSize: maxSize)
            }
            if verifies { f.checksum.update(bytes) }
        }
    }

    var sinkFailure: (any Error)? { fields.withLock { $0.sinkFailure } }

    func recordSinkFailure(_ error: any Error) {
        fields.withLock { $0.sinkFailure = $0.sinkFailure ?? error }
    }

    var knowsExpectedHashes: Bool { fields.withLock { $0.expected != nil } }

    func expect(_ hashes: ObjectHashes) {
        fields.withLock { if $0.expected == nil { $0.expected = hashes } }
    }

    func noteFirstResponse(_ headers: HTTPHeaders) throws {
        try fields.withLock { f in
            f.generation = headers["x-goog-generation"].flatMap { Int64($0) }
            if f.expected == nil { f.expected = headers["x-goog-hash"].map(ObjectHashes.init(hashHeader:)) }
            f.announcedLength = headers["x-goog-stored-content-length"].flatMap { Int64($0) }
                ?? headers["content-length"].flatMap { Int64($0) }
            if let maxSize, let total = f.announcedLength, total > maxSize {
                throw StorageError.downloadSizeExceeded(total: total, maxSize: maxSize)
            }
        }
    }

    /// Compares the bytes with the checksum the server announced (crc32c
    /// first, md5 otherwise). Nothing to compare is not an error: composite
    /// objects have no md5 and some servers send no hash header.
    func verify() throws {
        try fields.withLock { f in
            guard verifies, let expected = f.expected else { return }
            guard f.checksum.matches(expected) else { throw StorageError.nonMatchingChecksum }
        }
    }
}
