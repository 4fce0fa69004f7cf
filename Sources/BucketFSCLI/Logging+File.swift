import Foundation
import FSCore
import Logging

/// Log lines to a file (or standard error), one per event, with a
/// timestamp; opened once, appended to, never truncated. Text: `TIME LEVEL
/// LABEL: MESSAGE key=value…`; JSON: one object per line with `time`,
/// `level`, `label`, `message` and the event's metadata as fields (the
/// request id among them while a FUSE request is served).
struct FileLogHandler: LogHandler {
    private let sink: LogSink
    private let format: LogFormat
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    private let label: String

    init(label: String, sink: LogSink, level: Logger.Level, format: LogFormat, metadataProvider: Logger.MetadataProvider?) {
        self.label = label
        self.sink = sink
        self.logLevel = level
        self.format = format
        self.metadataProvider = metadataProvider
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var merged = metadataProvider?.get() ?? [:]
        merged.merge(metadata) { _, new in new }
        merged.merge(event.metadata ?? [:]) { _, new in new }
        // UTC, with its zone ("Z"), so a reader never has to guess.
        let stamp = Date().formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true).timeZone(separator: .omitted))
        switch format {
        case .text:
            let details = merged.isEmpty ? "" : " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
            sink.write("\(stamp) \(event.level) \(label): \(event.message)\(details)\n")
        case .json:
            var object: [String: Any] = [:]
            for (key, value) in merged { object[key] = Self.json(value) }
            object["time"] = stamp
            object["level"] = "\(event.level)"
            object["label"] = label
            object["message"] = "\(event.message)"
            guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]) else { return }
            sink.write(String(decoding: data, as: UTF8.self) + "\n")
        }
    }

    private static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let value): return value.description
        case .array(let values): return values.map(json)
        case .dictionary(let values): return values.mapValues(json)
        }
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
    /// Routes every Logger of the process to `path` (or stderr) at `level`,
    /// adding the id of the FUSE request being served to every line.
    static func bootstrap(level: Logger.Level, path: String?, format: LogFormat = .text) throws {
        let sink = try LogSink(path: path)
        let requestID = Logger.MetadataProvider {
            guard let id = Caller.current?.requestID, id != 0 else { return [:] }
            return ["request": "\(id)"]
        }
        LoggingSystem.bootstrap({ label, provider in
            FileLogHandler(label: label, sink: sink, level: level, format: format, metadataProvider: provider)
        }, metadataProvider: requestID)
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
    writeStandardError(message + "\n")
}

/// `text` to standard error as it is, in one write (the progress line
/// redraws itself with `\r` and no newline).
func writeStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
}
