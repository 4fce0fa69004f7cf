import Foundation
import TestServerClient
import TestSupport

/// The emulator's request log file, which scripts/emulator.sh has it write:
/// one `METHOD\tPATH\tQUERY` line per request, then a tab and the Range
/// header if it had one.
struct RequestLog {
    let path: String
    let start: UInt64

    /// Marks the current end of the log; `entries()` returns what follows.
    static func mark() throws -> RequestLog {
        let path = try MountEnv.requestLogPath()
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: path),
            let size = attributes[.size] as? NSNumber
        else {
            throw HarnessError("no emulator request log at \(path) (set BUCKETFS_TEST_EMULATOR_LOG, or run with scripts/test.sh)")
        }
        return RequestLog(path: path, start: size.uint64Value)
    }

    func entries() throws -> [LoggedRequest] {
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: path))
        defer { try? handle.close() }
        try handle.seek(toOffset: start)
        let data = try handle.readToEnd() ?? Data()
        return String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line in
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count >= 2 else { return nil }
            return LoggedRequest(
                method: String(fields[0]), path: String(fields[1]), query: fields.count > 2 ? String(fields[2]) : "",
                byteRange: fields.count > 3 && !fields[3].isEmpty ? String(fields[3]) : nil)
        }
    }
}
