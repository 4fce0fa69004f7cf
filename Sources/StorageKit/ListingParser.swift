import Foundation

/// Reads an `objects.list` answer straight into a `ListingDocument`.
///
/// Why not JSONSerialization: a page of 1,000 items took it ~10 ms, and the
/// casts out of its `[String: Any]` as long again, about half of the
/// mount's CPU in a cold `ls -l` of 100,000 objects or a walk of a million.
/// This reader makes only the strings the resource fields need.
///
/// It knows the usual shape only: string fields that are strings (or null),
/// int64 fields that are decimal strings or integers, custom metadata whose
/// values are strings. Anything else (another type where a known field is,
/// a number with a fraction, a custom value that is null or a number,
/// malformed JSON, invalid UTF-8) answers nil, and the caller parses the
/// page with JSONSerialization, whose reading of such cases stays the
/// reference. Unknown members are skipped whatever they hold.
enum ListingParser {
    static func parse(_ data: Data) -> ListingDocument? {
        var reader = Reader(bytes: [UInt8](data))
        return try? reader.document()
    }

    /// Not the usual shape: leave the page to JSONSerialization.
    struct Unusual: Error {}

    struct Reader {
        let bytes: [UInt8]
        var i = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func document() throws(Unusual) -> ListingDocument {
            var document = ListingDocument()
            try members { (reader, key) throws(Unusual) in
                switch key {
                case "prefixes": document.prefixes = try reader.strings()
                case "items": document.items = try reader.items()
                case "nextPageToken": document.nextPageToken = try reader.optionalString()
                default: try reader.skipValue(depth: 0)
                }
            }
            skipSpace()
            guard i == bytes.count else { throw Unusual() }
            return document
        }

        // MARK: the listing's parts

        private mutating func strings() throws(Unusual) -> [String] {
            var strings: [String] = []
            try elements { (reader) throws(Unusual) in strings.append(try reader.string()) }
            return strings
        }

        private mutating func items() throws(Unusual) -> [ObjectResource] {
            var items: [ObjectResource] = []
            items.reserveCapacity(1000)
            try elements { (reader) throws(Unusual) in items.append(try reader.item()) }
            return items
        }

        private mutating func item() throws(Unusual) -> ObjectResource {
            var item = ObjectResource()
            try members { (reader, key) throws(Unusual) in
                switch key {
                case "kind": item.kind = try reader.optionalString()
                case "bucket": item.bucket = try reader.optionalString()
                case "name": item.name = try reader.optionalString()
                case "generation": item.generation = try reader.int64()
                case "metageneration": item.metageneration = try reader.int64()
                case "size": item.size = try reader.int64()
                case "timeCreated": item.timeCreated = try reader.optionalString()
                case "updated": item.updated = try reader.optionalString()
                case "crc32c": item.crc32c = try reader.optionalString()
                case "downloadTokens": item.downloadTokens = try reader.optionalString()
                case "md5Hash": item.md5Hash = try reader.optionalString()
                case "metadata": item.metadata = try reader.customMetadata()
                default:
                    if let property = StandardProperty(rawValue: key) {
                        item.properties[property] = try reader.optionalString()
                    } else {
                        try reader.skipValue(depth: 0)
                    }
                }
            }
            return item
        }

        /// Custom metadata: an object of strings (null: no metadata).
        private mutating func customMetadata() throws(Unusual) -> [String: String]? {
            if try literal("null") { return nil }
            var metadata: [String: String] = [:]
            try members { (reader, key) throws(Unusual) in metadata[key] = try reader.string() }
            return metadata
        }

        /// An int64 field: a decimal string as GCS sends, or an integer as
        /// other servers do; a string that is no number reads as nil, as
        /// `Int64(_:)` of it would.
        private mutating func int64() throws(Unusual) -> Int64? {
            skipSpace()
            guard i < bytes.count else { throw Unusual() }
            switch bytes[i] {
            case UInt8(ascii: "\""): return Int64(try string())
            case UInt8(ascii: "n"):
                guard try literal("null") else { throw Unusual() }
                return nil
            default:
                // Only plain integers; a fraction or exponent goes to
                // JSONSerialization (which would make it an NSNumber).
                guard let value = Int64(String(decoding: try number(), as: UTF8.self)) else { throw Unusual() }
                return value
            }
        }

        // MARK: JSON

        /// `{ "key": value, ... }`: `each` reads the value of every key.
        private mutating func members(_ each: (inout Reader, String) throws(Unusual) -> Void) throws(Unusual) {
            try expect(UInt8(ascii: "{"))
            if try peek() == UInt8(ascii: "}") {
                i += 1
                return
            }
            while true {
                let key = try string()
                try expect(UInt8(ascii: ":"))
                try each(&self, key)
                skipSpace()
                guard i < bytes.count else { throw Unusual() }
                let byte = bytes[i]
                i += 1
                if byte == UInt8(ascii: "}") { return }
                guard byte == UInt8(ascii: ",") else { throw Unusual() }
            }
        }

        /// `[ value, ... ]`: `each` reads every value.
        private mutating func elements(_ each: (inout Reader) throws(Unusual) -> Void) throws(Unusual) {
            try expect(UInt8(ascii: "["))
            if try peek() == UInt8(ascii: "]") {
                i += 1
                return
            }
            while true {
                try each(&self)
                skipSpace()
                guard i < bytes.count else { throw Unusual() }
                let byte = bytes[i]
                i += 1
                if byte == UInt8(ascii: "]") { return }
                guard byte == UInt8(ascii: ",") else { throw Unusual() }
            }
        }

        private mutating func optionalString() throws(Unusual) -> String? {
            if try literal("null") { return nil }
            return try string()
        }

        /// A string, its escapes resolved; raw control characters and
        /// invalid UTF-8 are not JSON and go to JSONSerialization.
        mutating func string() throws(Unusual) -> String {
            try expect(UInt8(ascii: "\""))
            let start = i
            var high: UInt8 = 0
            while i < bytes.count {
                let byte = bytes[i]
                if byte == UInt8(ascii: "\"") {
                    defer { i += 1 }
                    // ASCII (nearly every name and value) needs no validation.
                    return high < 0x80 ? String(decoding: bytes[start..<i], as: UTF8.self) : try Self.text(bytes[start..<i])
                }
                if byte == UInt8(ascii: "\\") { return try escapedString(from: start) }
                guard byte >= 0x20 else { throw Unusual() }
                high |= byte
                i += 1
            }
            throw Unusual()
        }

        private mutating func escapedString(from start: Int) throws(Unusual) -> String {
            var utf8 = Array(bytes[start..<i])
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                switch byte {
                case UInt8(ascii: "\""): return try Self.text(utf8[...])
                case UInt8(ascii: "\\"):
                    guard i < bytes.count else { throw Unusual() }
                    let escape = bytes[i]
                    i += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): utf8.append(escape)
                    case UInt8(ascii: "b"): utf8.append(0x08)
                    case UInt8(ascii: "f"): utf8.append(0x0C)
                    case UInt8(ascii: "n"): utf8.append(0x0A)
                    case UInt8(ascii: "r"): utf8.append(0x0D)
                    case UInt8(ascii: "t"): utf8.append(0x09)
                    case UInt8(ascii: "u"): utf8.append(contentsOf: try unicodeEscape())
                    default: throw Unusual()
                    }
                default:
                    guard byte >= 0x20 else { throw Unusual() }
                    utf8.append(byte)
                }
            }
            throw Unusual()
        }

        /// The UTF-8 of `\uXXXX` (after the `u`), a surrogate pair taking
        /// the `\uXXXX` that must follow; a lone surrogate is unusual.
        private mutating func unicodeEscape() throws(Unusual) -> [UInt8] {
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                guard i + 1 < bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                    throw Unusual()
                }
                i += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw Unusual() }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw Unusual() }
            return Array(String(Character(unicode)).utf8)
        }

        private mutating func hex4() throws(Unusual) -> UInt32 {
            guard i + 4 <= bytes.count,
                let value = UInt32(String(decoding: bytes[i..<(i + 4)], as: UTF8.self), radix: 16)
            else { throw Unusual() }
            i += 4
            return value
        }

        /// Skips any value (an unknown member's), nested at most 64 deep.
        private mutating func skipValue(depth: Int) throws(Unusual) {
            guard depth < 64 else { throw Unusual() }
            switch try peek() {
            case UInt8(ascii: "\""): _ = try string()
            case UInt8(ascii: "{"): try members { (reader, _) throws(Unusual) in try reader.skipValue(depth: depth + 1) }
            case UInt8(ascii: "["): try elements { (reader) throws(Unusual) in try reader.skipValue(depth: depth + 1) }
            case UInt8(ascii: "t"): guard try literal("true") else { throw Unusual() }
            case UInt8(ascii: "f"): guard try literal("false") else { throw Unusual() }
            case UInt8(ascii: "n"): guard try literal("null") else { throw Unusual() }
            default: _ = try number()
            }
        }

        /// Consumes `word` if it comes next.
        private mutating func literal(_ word: StaticString) throws(Unusual) -> Bool {
            skipSpace()
            let count = word.utf8CodeUnitCount
            guard i + count <= bytes.count else { return false }
            let matches = word.withUTF8Buffer { w in (0..<count).allSatisfy { bytes[i + $0] == w[$0] } }
            if matches { i += count }
            return matches
        }

        private mutating func expect(_ byte: UInt8) throws(Unusual) {
            guard try peek() == byte else { throw Unusual() }
            i += 1
        }

        /// The next byte after whitespace, not consumed.
        private mutating func peek() throws(Unusual) -> UInt8 {
            skipSpace()
            guard i < bytes.count else { throw Unusual() }
            return bytes[i]
        }

        private mutating func skipSpace() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x09, 0x0A, 0x0D: i += 1
                default: return
                }
            }
        }

        /// The bytes of a number (digits, sign, point, exponent), consumed;
        /// none there is unusual.
        private mutating func number() throws(Unusual) -> ArraySlice<UInt8> {
            let start = i
            scan: while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "+"), UInt8(ascii: "."),
                    UInt8(ascii: "e"), UInt8(ascii: "E"):
                    i += 1
                default: break scan
                }
            }
            guard i > start else { throw Unusual() }
            return bytes[start..<i]
        }

        /// UTF-8 bytes as a String; invalid UTF-8 is unusual.
        private static func text(_ utf8: ArraySlice<UInt8>) throws(Unusual) -> String {
            guard let text = String(validating: utf8, as: UTF8.self) else { throw Unusual() }
            return text
        }
    }
}
