import Foundation

/// Feeds a `RequestBody` to curl's read callback, piece by piece. File
/// regions are read with `pread`, so a body of any size needs only curl's own
/// buffer. Touched only by the transport thread once the transfer started.
final class RequestBodyReader {
    private enum Piece {
        case bytes(Data)
        case file(path: String, offset: Int64, length: Int64)
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
    /// small multipart body goes out in one send instead of one per piece;
    /// returns 0 at the end of the body, or nil when a file could not be
    /// read (the transfer aborts).
    func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int? {
        var filled = 0
        while filled < capacity {
            // Sound: `filled < capacity`, so `buffer + filled` and the
            // `capacity - filled` bytes after it are inside curl's buffer.
            guard let n = readPiece(into: buffer + filled, capacity: capacity - filled) else { return nil }
            if n == 0 { break }
            filled += n
        }
        return filled
    }

    /// Up to `capacity` bytes of the current piece (moving on to the next
    /// ones while the current is exhausted).
    private func readPiece(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int? {
        while index < pieces.count {
            switch pieces[index] {
            case .bytes(let data):
                let remaining = data.count - Int(offsetInPiece)
                if remaining > 0 {
                    let n = min(remaining, capacity)
                    let start = data.startIndex + Int(offsetInPiece)
                    data.copyBytes(to: buffer.assumingMemoryBound(to: UInt8.self), from: start..<(start + n))
                    offsetInPiece += Int64(n)
                    return n
                }
            case .file(let path, let offset, let length):
                let remaining = length - offsetInPiece
                if remaining > 0 {
                    if fd < 0 {
                        fd = open(path, O_RDONLY | O_CLOEXEC)
                        if fd < 0 {
                            failure = "cannot open \(path): \(String(cString: strerror(errno)))"
                            return nil
                        }
                    }
                    let want = Int(min(remaining, Int64(capacity)))
                    var got: Int
                    repeat { got = pread(fd, buffer, want, off_t(offset + offsetInPiece)) } while got < 0 && errno == EINTR
                    if got < 0 {
                        failure = "cannot read \(path): \(String(cString: strerror(errno)))"
                        return nil
                    }
                    if got == 0 {
                        failure = "\(path) is shorter than the \(length) bytes announced"
                        return nil
                    }
                    offsetInPiece += Int64(got)
                    return got
                }
                closeFile()
            }
            index += 1
            offsetInPiece = 0
        }
        return 0
    }
}
