import Foundation

/// Reads one string member of a JSON object's top level from the raw
/// bytes, without parsing the rest: a listing page's `nextPageToken`, so the
/// next page can be requested before this one is parsed.
///
/// Only the top level counts: an object's custom metadata may well have a
/// key named `nextPageToken`, and items come before the token in GCS's
/// answers. Strings are skipped with their escapes; a value that itself has
/// escapes is left to the full parse (`.unknown`), as is anything that is
/// not an object.
enum JSONScan {
    enum Member: Equatable {
        case found(String)
        case absent
        /// The scan cannot say (not an object, malformed, or an escaped
        /// value): parse the whole body.
        case unknown
    }

    static func topLevelString(_ key: String, in data: Data) -> Member {
        data.withUnsafeBytes { raw in scan(Array(key.utf8), in: raw.bindMemory(to: UInt8.self)) }
    }

    private static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\"), colon = UInt8(ascii: ":")

    private static func scan(_ key: [UInt8], in bytes: UnsafeBufferPointer<UInt8>) -> Member {
        var i = 0
        let n = bytes.count
        func skipSpace() {
            while i < n, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }
        skipSpace()
        guard i < n, bytes[i] == UInt8(ascii: "{") else { return .unknown }
        var depth = 0
        while i < n {
            let byte = bytes[i]
            switch byte {
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                depth += 1
                i += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                depth -= 1
                i += 1
                if depth == 0 { return .absent }
            case quote:
                // A string: its bytes (to compare a top-level key) and the
                // index past its closing quote.
                let start = i + 1
                var end = start
                var escaped = false
                while end < n, bytes[end] != quote {
                    if bytes[end] == backslash {
                        escaped = true
                        end += 1
                    }
                    end += 1
                }
                guard end < n else { return .unknown }
                i = end + 1
                guard depth == 1 else { continue }
                skipSpace()
                // A top-level key is followed by a colon (a value by , or }).
                guard i < n, bytes[i] == colon else { continue }
                guard !escaped, end - start == key.count, key.withUnsafeBufferPointer({ k in
                    (0..<k.count).allSatisfy { bytes[start + $0] == k[$0] }
                }) else { continue }
                i += 1
                skipSpace()
                guard i < n, bytes[i] == quote else { return .unknown }
                let valueStart = i + 1
                var valueEnd = valueStart
                while valueEnd < n, bytes[valueEnd] != quote {
                    if bytes[valueEnd] == backslash { return .unknown }
                    valueEnd += 1
                }
                guard valueEnd < n else { return .unknown }
                return .found(String(decoding: UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd]), as: UTF8.self))
            default:
                i += 1
            }
        }
        return .unknown
    }
}
