import Foundation
import Synchronization

/// A file still being written, sent as a request body while it grows
/// (`RequestBody.growing`): the body is the file's bytes from offset 0, as
/// far as the owner says they are on disk (`extend(to:)`), and it ends
/// where `finish(at:)` says.
///
/// The length is not known when the request starts, so an HTTP/1.1 request
/// goes with chunked transfer encoding (HTTP/2 frames the body itself).
/// Cloud Storage takes single-request uploads framed so: its Go client
/// sends a writer's bytes of unknown length as one multipart request with
/// chunked encoding when chunking is off (google-api-go-client,
/// gensupport/media.go), and https://cloud.google.com/storage/docs/streaming-uploads
/// describes streaming without a known size.
///
/// When the reader has sent every byte on disk and the end is not known,
/// the transfer pauses (curl's `CURL_READFUNC_PAUSE`) until the owner
/// extends or finishes the body, for at most `maxWait`: a writer that stops
/// for longer ends the request with `TransportError.stalled`, so a request
/// never stays open for a file nobody writes. Such a request is sent once
/// only (never retried): its body cannot be read again from the start by
/// the transport, and only the owner knows what to do instead.
public final class GrowingFile: Sendable {
    public let path: String
    /// How long the body may wait for the owner's next bytes.
    public let maxWait: Duration
    /// Sees every byte of the file as it is sent, in order (on the
    /// transport's thread): a checksum of exactly what went out.
    private let observer: (@Sendable (UnsafeRawBufferPointer) -> Void)?

    private struct State {
        /// Bytes [0, available) are on disk and may be sent.
        var available: Int64 = 0
        /// The body's length, once known.
        var end: Int64?
        /// Since when the reader waits for more (nil: it does not).
        var waitingSince: ContinuousClock.Instant?
        /// Resumes the paused transfer (set by the transport).
        var wake: (@Sendable () -> Void)?

        /// The wake-up to call, if the reader waits (then it no longer does).
        mutating func takeWake() -> (@Sendable () -> Void)? {
            guard waitingSince != nil else { return nil }
            waitingSince = nil
            return wake
        }
    }

    private let state = Mutex(State())

    public init(path: String, maxWait: Duration, observer: (@Sendable (UnsafeRawBufferPointer) -> Void)? = nil) {
        self.path = path
        self.maxWait = maxWait
        self.observer = observer
    }

    /// How far the request may read: the furthest `extend` (or the size
    /// given to `finish`).
    public var available: Int64 { state.withLock { $0.available } }

    /// Bytes [0, end) of the file are on disk (an end below an earlier one
    /// is ignored).
    public func extend(to end: Int64) {
        let wake = state.withLock { s -> (@Sendable () -> Void)? in
            guard s.end == nil, end > s.available else { return nil }
            s.available = end
            return s.takeWake()
        }
        wake?()
    }

    /// The body is bytes [0, size) of the file, all of them on disk.
    public func finish(at size: Int64) {
        let wake = state.withLock { s -> (@Sendable () -> Void)? in
            guard s.end == nil else { return nil }
            s.end = size
            s.available = size
            return s.takeWake()
        }
        wake?()
    }

    // MARK: the transport's side

    /// What the reader may do at `offset`.
    enum Readable: Equatable {
        /// Send bytes up to this offset.
        case upTo(Int64)
        /// Wait for the owner (pause the transfer).
        case wait
        /// The body is complete.
        case end
    }

    func readable(at offset: Int64, now: ContinuousClock.Instant = .now) -> Readable {
        state.withLock { s in
            if offset < s.available { return .upTo(s.available) }
            if let end = s.end, offset >= end { return .end }
            if s.waitingSince == nil { s.waitingSince = now }
            return .wait
        }
    }

    /// Sets how a paused transfer is resumed; a body that is already
    /// waiting is woken at once.
    func onWake(_ wake: @escaping @Sendable () -> Void) {
        state.withLock { $0.wake = wake }
    }

    /// Whether the reader has waited for the owner longer than `maxWait`.
    func waitedTooLong(now: ContinuousClock.Instant = .now) -> Bool {
        state.withLock { s in s.waitingSince.map { now - $0 > maxWait } ?? false }
    }

    func observe(_ bytes: UnsafeRawBufferPointer) { observer?(bytes) }
}
