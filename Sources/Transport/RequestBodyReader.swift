import Foundation

/// Feeds a `RequestBody` to curl's read callback, piece by piece. File
/// regions are read with `pread`, so a body of any size needs only curl's own
/// buffer. Touched only by the transport thread once the transfer started.
final class RequestBodyReader {
    private enum Piece {
        case bytes(Data)
        case file(path: String, offset: Int64, length: Int64)
        case growing(GrowingFile)
    }

    /// What one call of curl's read callback gets.
    enum Outcome: Equatable {
        /// This many bytes (0: the body ended).
        case filled(Int)
        /// Nothing now: a growing file waits for its writer (pause).
        case wait
        /// A file could not be read (`failure` says why; abort).
        case failed
    }

    private let pieces: [Piece]
    private var index = 0
    private var offsetInPiece: Int64 = 0
    private var fd: Int32 = -1
    private(set) var failure: String?

    init(_ body: RequestBody) {
        var flat: [Piece] = []
        func flatten(_ body: RequestBody) {
            switch body {
            case .none: break
            case .bytes(let d): if !d.isEmpty { flat.append(.bytes(d)) }
            case .file(let p, let o, let l): if l > 0 { flat.append(.file(path: p, offset: o, length: l)) }
            case .concatenation(let parts): parts.forEach(flatten)
            case .growing(let file): flat.append(.growing(file))
            }
        }
        flatten(body)
        pieces = flat
    }

    deinit { closeFile() }

    private func closeFile() {
        if fd >= 0 { close(fd); fd = -1 }
    }

    /// Copies up to `capacity` bytes into `buffer`, across pieces, so a
    /// small multipart body goes out in one send instead of one per piece.
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Outcome {
        var filled = 0
        while filled < capacity {
            // Sound: `filled < capacity`, so `buffer + filled` and the
            // `capacity - filled` bytes after it are inside curl's buffer.
            switch readPiece(into: buffer + filled, capacity: capacity - filled) {
            case .failed: return .failed
            case .wait: return filled > 0 ? .filled(filled) : .wait
            case .filled(0): return .filled(filled)
            case .filled(let n): filled += n
            }
        }
        return .filled(filled)
    }

    /// Up to `capacity` bytes of the current piece (moving on to the next
    /// ones while the current is exhausted).
    private func readPiece(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Outcome {
        while index < pieces.count {
            switch pieces[index] {
            case .bytes(let data):
                let remaining = data.count - Int(offsetInPiece)
                if remaining > 0 {
                    let n = min(remaining, capacity)
                    let start = data.startIndex + Int(offsetInPiece)
                    data.copyBytes(to: buffer.assumingMemoryBound(to: UInt8.self), from: start..<(start + n))
                    offsetInPiece += Int64(n)
                    return .filled(n)
                }
            case .file(let path, let offset, let length):
                let remaining = length - offsetInPiece
                if remaining > 0 {
                    return readFile(path, at: offset + offsetInPiece, upTo: offset + length, into: buffer, capacity: capacity)
                }
                closeFile()
            case .growing(let file):
                switch file.readable(at: offsetInPiece) {
                case .wait: return .wait
                case .upTo(let end):
                    let outcome = readFile(file.path, at: offsetInPiece, upTo: end, into: buffer, capacity: capacity)
                    // Sound: `readFile` filled the first `n` bytes of `buffer`.
                    if case .filled(let n) = outcome { file.observe(UnsafeRawBufferPointer(start: buffer, count: n)) }
                    return outcome
                case .end: closeFile()
                }
            }
            index += 1
            offsetInPiece = 0
        }
        return .filled(0)
    }

    /// Up to `capacity` bytes of the file at `path` from `position`, which
    /// holds at least `end` bytes; advances the current piece.
    private func readFile(
        _ path: String, at position: Int64, upTo end: Int64, into buffer: UnsafeMutableRawPointer, capacity: Int
    ) -> Outcome {
        if fd < 0 {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd < 0 {
                failure = "cannot open \(path): \(String(cString: strerror(errno)))"
                return .failed
            }
        }
        let want = Int(min(end - position, Int64(capacity)))
        var got: Int
        repeat { got = pread(fd, buffer, want, off_t(position)) } while got < 0 && errno == EINTR
        if got < 0 {
            failure = "cannot read \(path): \(String(cString: strerror(errno)))"
            return .failed
        }
        if got == 0 {
            failure = "\(path) is shorter than the \(end) bytes announced"
            return .failed
        }
        offsetInPiece += Int64(got)
        return .filled(got)
    }
}
