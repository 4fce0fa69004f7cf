import Foundation
import Logging

/// Log lines to a file (or standard error), one per event, with a
/// timestamp; opened once, appended to, never truncated.
struct FileLogHandler: LogHandler {
    private let sink: LogSink
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    private let label: String

    init(label: String, sink: LogSink, level: Logger.Level) {
        self.label = label
        self.sink = sink
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let details = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let stamp = Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
        sink.write("\(stamp) \(event.level) \(label): \(event.message)\(details)\n")
    }
}

/// A file descriptor shared by every handler; writes are single `write`
/// calls on an O_APPEND descriptor, so lines never interleave.
final class LogSink: Sendable {
    private let fd: Int32

    init(path: String?) throws {
        if let path {
            let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o644)
            guard fd >= 0 else { throw CLIError.usage("cannot open log file \(path): \(String(cString: strerror(errno)))") }
            self.fd = fd
        } else {
            self.fd = 2
        }
    }

    func write(_ line: String) {
        var bytes = Array(line.utf8)
        _ = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }
}

enum LogSetup {
    /// Routes every Logger of the process to `path` (or stderr) at `level`.
    static func bootstrap(level: Logger.Level, path: String?) throws {
        let sink = try LogSink(path: path)
        LoggingSystem.bootstrap { label in FileLogHandler(label: label, sink: sink, level: level) }
    }
}

/// Errors the command line reports with a message and an exit code.
enum CLIError: Error, CustomStringConvertible {
    case usage(String)
    case bucket(String, exitCode: Int32)

    var description: String {
        switch self {
        case .usage(let m), .bucket(let m, _): return m
        }
    }

    var exitCode: Int32 {
        switch self {
        case .usage: return 64
        case .bucket(_, let code): return code
        }
    }
}

/// Writes to standard error without going through the (main-actor
/// isolated) `stderr` global.
func eprint(_ message: String) {
    var line = Array((message + "\n").utf8)
    _ = line.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}
