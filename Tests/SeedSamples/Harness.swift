import Dispatch
import Foundation
import StorageKit
import Synchronization

// What the samples need around them: a way to wait for their completion
// handlers, a way to report what they saw, and the files and objects their
// surrounding code assumes. Lines added inside a sample end in `// [harness]`.

/// One JSON line per reported value on stdout:
/// `{"sample":"001-2","key":"size","value":"12"}`. The test reads them and
/// checks the bucket through the JSON API.
func report(_ sample: String, _ key: String, _ value: Any?) {
    let line: [String: String] = ["sample": sample, "key": key, "value": value.map { "\($0)" } ?? "nil"]
    let data = (try? JSONSerialization.data(withJSONObject: line, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    output.withLock { _ in
        FileHandle.standardOutput.write(data + Data("\n".utf8))
    }
}

private let output = Mutex(())

/// A wait for completion handlers. Handlers call `done()`; `wait()` blocks
/// the calling thread, which is the program's main thread: the point is
/// that StorageKit delivers completions without it.
final class Completions: Sendable {
    let sample: String
    private let expected: Int
    private let semaphore = DispatchSemaphore(value: 0)

    init(_ sample: String, expecting expected: Int = 1) {
        self.sample = sample
        self.expected = expected
    }

    func done() { semaphore.signal() }

    /// Counts the end of `task` as one completion and reports it as `outcome`.
    func track(_ task: StorageUploadTask) {
        Task {
            do {
                let metadata = try await task.completion()
                report(sample, "outcome", "success size=\(metadata.size)")
            } catch {
                report(sample, "outcome", "failure \(StorageError(error).code)")
            }
            done()
        }
    }

    func wait(seconds: Int = 120) {
        for _ in 0..<expected where semaphore.wait(timeout: .now() + .seconds(seconds)) == .timedOut {
            report(sample, "timeout", "a completion did not arrive within \(seconds) s")
            exit(3)
        }
    }
}

/// Runs async sample code from the synchronous main thread and blocks until
/// it is done.
func runBlocking(_ sample: String, _ body: @escaping @Sendable () async -> Void) {
    let completions = Completions(sample)
    Task {
        await body()
        completions.done()
    }
    completions.wait()
}

/// The local files the upload samples send ("path/to/image" in the seeds).
enum LocalFiles {
    static let directory: URL = {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("seed-samples-\(getpid())")
        try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }()

    /// A small JPEG-named file: its bytes are `imageBytes`.
    static let image: String = write("image.jpg", imageBytes)
    static let imageBytes = Data((0..<64 * 1024).map { UInt8(truncatingIfNeeded: $0 &* 31) })

    /// 12 MiB: above the 8 MiB multipart threshold, so it goes up as a
    /// resumable upload, which pause, resume and cancel act on.
    static let large: String = write("large.bin", Data(count: 12 << 20))

    private static func write(_ name: String, _ data: Data) -> String {
        let path = directory.appendingPathComponent(name).path
        _ = FileManager.default.createFile(atPath: path, contents: data)
        return path
    }

    static func remove() { try? FileManager.default.removeItem(at: directory) }
}

/// Objects the samples' surrounding code assumes exist, uploaded through
/// StorageKit so that the same setup works against any server dialect.
enum Setup {
    static func objectIfMissing(_ path: String, _ data: Data, sample: String) {
        runBlocking(sample) {
            let ref = Storage.storage().reference().child(path)
            do {
                _ = try await ref.getMetadata()
            } catch StorageError.objectNotFound {
                do {
                    _ = try await ref.putDataAsync(data)
                } catch {
                    report(sample, "setup-error", "\(path): \(error)")
                }
            } catch {
                report(sample, "setup-error", "\(path): \(error)")
            }
        }
    }
}
