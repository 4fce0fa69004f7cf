import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A local file for positioned reads and writes from any thread (pread and
/// pwrite carry their own offset, so concurrent callers never race on a
/// shared file position). Owns its descriptor; `close()` once.
struct LocalFile: Sendable {
    let path: String
    let descriptor: Int32

    /// Creates `path` (it must not exist, unless not `exclusive`: then it
    /// is emptied), readable and writable by us only.
    static func create(_ path: String, exclusive: Bool = true) throws(FSError) -> LocalFile {
        let fd = open(path, O_RDWR | O_CREAT | (exclusive ? O_EXCL : O_TRUNC) | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FSError(localFailure: errno, "cannot create staged file \(path): \(String(cString: strerror(errno)))") }
        return LocalFile(path: path, descriptor: fd)
    }

    /// Up to `count` bytes at `offset`; fewer only at the end of the file.
    func read(at offset: Int64, count: Int) throws(FSError) -> Data {
        guard count > 0 else { return Data() }
        var data = Data(count: count)
        var done = 0
        var failure: Int32 = 0
        // Sound: `buffer` is the Data's own storage, valid inside the
        // closure, and pread writes at most `count - done` bytes past
        // `baseAddress + done`, which stays inside it.
        data.withUnsafeMutableBytes { buffer in
            while done < count {
                let n = pread(descriptor, buffer.baseAddress! + done, count - done, off_t(offset) + off_t(done))
                if n < 0 && wasInterrupted(errno) { continue }
                if n < 0 { failure = errno; return }
                if n == 0 { return }
                done += n
            }
        }
        if failure != 0 { throw FSError(.ioError, "read of staged file \(path): \(String(cString: strerror(failure)))") }
        if done < count { data.removeSubrange(done...) }
        return data
    }

    func write(_ data: Data, at offset: Int64) throws(FSError) {
        var done = 0
        var failure: Int32 = 0
        // Sound: pwrite reads at most `count - done` bytes from inside the
        // Data's storage, which is valid for the closure's duration.
        data.withUnsafeBytes { buffer in
            while done < buffer.count {
                let n = pwrite(descriptor, buffer.baseAddress! + done, buffer.count - done, off_t(offset) + off_t(done))
                if n < 0 && wasInterrupted(errno) { continue }
                if n <= 0 { failure = n < 0 ? errno : Refusal.ioError.errno; return }
                done += n
            }
        }
        // A full disk is the user's to see (ENOSPC), not a generic I/O error.
        if failure != 0 { throw FSError(localFailure: failure, "write of staged file \(path): \(String(cString: strerror(failure)))") }
    }

    func truncate(to size: Int64) throws(FSError) {
        guard ftruncate(descriptor, off_t(size)) == 0 else {
            throw FSError(localFailure: errno, "truncate of staged file \(path): \(String(cString: strerror(errno)))")
        }
    }

    func close() {
        _ = Glibc.close(descriptor)
    }

    /// Replaces the file at `path` with `data`: written beside it and
    /// renamed over it, so a reader sees the old or the new whole file.
    /// Not fsynced: this is for small bookkeeping files, where a sync per
    /// write would cost more than the upload it accompanies.
    static func replace(_ path: String, with data: Data) throws(FSError) {
        let temporary = path + ".tmp"
        let file = try create(temporary, exclusive: false)
        defer { file.close() }
        do {
            try file.write(data, at: 0)
        } catch {
            Glibc.unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            let failure = errno
            Glibc.unlink(temporary)
            throw FSError(.ioError, "cannot write \(path): \(String(cString: strerror(failure)))")
        }
    }
}
