import Foundation
import Testing
import TestSupport
@testable import StorageKit

/// `ListingParser` reads listing pages from their bytes; JSONSerialization
/// (`ListingDocument(dictionary:)`) is the reference. A page of the usual
/// shape must read the same both ways; any other page must be left to
/// JSONSerialization (nil), never read differently.
@Suite struct ListingParserTests {
    static func reference(_ json: String) throws -> ListingDocument {
        let object = try #require(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        return ListingDocument(dictionary: object)
    }

    /// Pages the parser must read exactly as JSONSerialization does.
    @Test(arguments: [
        // What GCS sends with fields unrestricted: unknown members of
        // every JSON type, nested ones included, are skipped.
        #"""
        {"kind": "storage#objects", "prefixes": ["d/a/", "d/b/"], "items": [
          {"kind": "storage#object", "id": "b/d/f/1", "selfLink": "http://x/o/d%2Ff", "bucket": "b", "name": "d/f",
           "generation": "1795687741277072", "metageneration": "3", "contentType": "text/plain", "size": "14",
           "md5Hash": "5Hr7nv5yunYw2DVGd65T0w==", "crc32c": "hvlYcw==", "timeCreated": "2026-01-01T00:00:00.000Z",
           "updated": "2026-01-02T00:00:00.5Z", "storageClass": "STANDARD", "eventBasedHold": false,
           "temporaryHold": true, "retention": null, "componentCount": 2, "ratio": -1.5e3,
           "acl": [{"entity": "allUsers", "role": "READER", "projectTeam": {"team": "owners"}}],
           "owner": {"entity": "user-x"}, "cacheControl": "no-cache", "contentDisposition": "inline",
           "contentEncoding": "gzip", "contentLanguage": "en", "downloadTokens": "t1,t2",
           "metadata": {"mode": "0644", "nextPageToken": "not the page's", "": "empty key"}}
        ], "nextPageToken": "CgRkL2Yy"}
        """#,
        // Escapes of every kind in names, values and keys; a surrogate pair.
        #"""
        {"items": [{"name": "d/q\"uote\\back\/slash\b\f\n\r\t", "bucket": "b"},
                   {"name": "d/\u00e9t\u00C9 \ud83d\ude00 \u4e2d", "metadata": {"k\u00e9y": "v\"al\u0041"}}],
         "nextPageToken": "a\/b=="}
        """#,
        // Integers as numbers (other servers), nulls where strings go.
        #"{"items": [{"name": "n", "size": 12, "generation": -7, "metageneration": 0, "contentType": null, "metadata": null}]}"#,
        // Decimal strings that are no number read as nil, as Int64(_:) does.
        #"{"items": [{"name": "n", "size": "12x", "generation": ""}]}"#,
        // Empty pages, whitespace everywhere.
        "{}",
        " \n{ \"kind\" : \"storage#objects\" , \"items\" : [ ] , \"prefixes\" : [ ] }\t\r\n",
        // An item without a name (the listing skips it later) and a kind
        // that is not an object's.
        #"{"items": [{"bucket": "b"}, {"name": "x/", "kind": "storage#folder"}]}"#,
    ])
    func usualPagesReadAsJSONSerializationReadsThem(json: String) throws {
        let parsed = try #require(ListingParser.parse(Data(json.utf8)))
        #expect(parsed == (try Self.reference(json)))
    }

    /// Pages whose reading the parser leaves to JSONSerialization.
    @Test(arguments: [
        #"{"items": [{"name": "n", "size": 1.5}]}"#,  // a fraction
        #"{"items": [{"name": "n", "size": 1e3}]}"#,  // an exponent
        #"{"items": [{"name": "n", "size": true}]}"#,  // another type
        #"{"items": [{"name": 5}]}"#,
        #"{"items": [{"name": "n", "metadata": {"k": 5}}]}"#,  // JSONSerialization keeps "5"
        #"{"items": [{"name": "n", "metadata": {"k": null}}]}"#,  // and drops this one
        #"{"items": [{"name": "n", "metadata": ["k"]}]}"#,
        #"{"prefixes": "d/a/"}"#,
        #"{"items": {"name": "n"}}"#,
        #"{"nextPageToken": 5}"#,
        #"{"items": [{"name": "\ud800"}]}"#,  // a lone surrogate
        #"{"items": [{"name": "\x"}]}"#,  // no such escape
        "{\"items\": [{\"name\": \"a\tb\"}]}",  // a raw control character
        #"[{"name": "n"}]"#,  // not an object
        #"{"items": [{"name": "n"}]"#,  // cut short
        #"{"items": []} {}"#,  // more after the object
        #"{"items": [{"name": "n",}]}"#,  // a trailing comma
        #"{"a": tru}"#,
    ])
    func otherPagesAreLeftToJSONSerialization(json: String) {
        #expect(ListingParser.parse(Data(json.utf8)) == nil)
    }

    @Test func invalidUTF8IsLeftToJSONSerialization() {
        var bytes = Array(#"{"items": [{"name": "a"#.utf8)
        bytes += [0xC3, 0x28]  // a lead byte without its continuation
        bytes += Array(#""}]}"#.utf8)
        #expect(ListingParser.parse(Data(bytes)) == nil)
    }

    /// Random names and values of every plane, written by JSONSerialization
    /// (which escapes as it likes), read the same both ways.
    @Test func randomPagesWrittenByJSONSerialization() throws {
        var random = SplitMix64(seed: 0x6c69_7374)
        let alphabet: [Character] = ["a", "Z", "0", "/", " ", "\"", "\\", "\u{7F}", "é", "中", "😀", "\u{1}", "\n", "%", "+"]
        func text(_ length: Int) -> String {
            String((0..<Int.random(in: 0...length, using: &random)).map { _ in alphabet.randomElement(using: &random)! })
        }
        for _ in 0..<200 {
            var items: [[String: Any]] = []
            for _ in 0..<Int.random(in: 0...5, using: &random) {
                var item: [String: Any] = ["name": "d/" + text(12), "size": String(Int.random(in: 0...1 << 40, using: &random))]
                if Bool.random(using: &random) { item["contentType"] = text(8) }
                if Bool.random(using: &random) { item["generation"] = Int.random(in: 1...Int(Int32.max), using: &random) }
                if Bool.random(using: &random) {
                    item["metadata"] = Dictionary((0..<3).map { _ in (text(6), text(6)) }, uniquingKeysWith: { a, _ in a })
                }
                items.append(item)
            }
            let page: [String: Any] = ["items": items, "prefixes": (0..<2).map { _ in "d/" + text(6) + "/" }, "nextPageToken": text(10)]
            let bytes = try JSONSerialization.data(withJSONObject: page)
            let parsed = try #require(ListingParser.parse(bytes), "\(String(decoding: bytes, as: UTF8.self))")
            #expect(parsed == ListingDocument(dictionary: page))
        }
    }
}
