import Foundation
import Testing
@testable import StorageKit

/// `JSONScan` reads a listing's `nextPageToken` from the raw answer, so the
/// next page is requested before this one is parsed. Only the top level
/// counts: a custom metadata key of that name must never be taken for it.
@Suite struct JSONScanTests {
    func scan(_ text: String) -> JSONScan.Member {
        JSONScan.topLevelString("nextPageToken", in: Data(text.utf8))
    }

    @Test func theTopLevelTokenIsFoundWhereverItStands() {
        #expect(scan(#"{"nextPageToken":"abc"}"#) == .found("abc"))
        #expect(scan(#" { "kind" : "storage#objects" , "nextPageToken" : "Q2c=" , "items": [] } "#) == .found("Q2c="))
        // GCS sends it after the items (fields order of the resource).
        #expect(scan(#"{"prefixes":["a/","b/"],"items":[{"name":"x","size":"1"}],"nextPageToken":"t-1"}"#) == .found("t-1"))
    }

    @Test func nestedKeysAndValuesOfThatNameAreNotTheToken() {
        // An item's custom metadata key, a metadata value, a name.
        let nested = #"{"items":[{"name":"nextPageToken","metadata":{"nextPageToken":"bogus"}}],"prefixes":["nextPageToken/"]}"#
        #expect(scan(nested) == .absent)
        #expect(scan(#"{"items":[{"metadata":{"nextPageToken":"bogus"}}],"nextPageToken":"real"}"#) == .found("real"))
        // A top-level string value equal to the key is a value, not a key.
        #expect(scan(#"{"kind":"nextPageToken","nextPageToken":"real"}"#) == .found("real"))
        // Escaped quotes and brackets inside strings do not end them.
        #expect(scan(#"{"items":[{"name":"a\"}],{\"nextPageToken\":\"x"}],"nextPageToken":"real"}"#) == .found("real"))
    }

    @Test func whatTheScanCannotReadIsLeftToTheParse() {
        #expect(scan(#"{"items":[]}"#) == .absent)
        #expect(scan("{}") == .absent)
        #expect(scan(#"{"nextPageToken":"a\/b"}"#) == .unknown, "an escaped value")
        #expect(scan(#"{"nextPageToken":null}"#) == .unknown)
        #expect(scan(#"["nextPageToken","x"]"#) == .unknown, "not an object")
        #expect(scan(#"{"items":[{"name":"cut"#) == .unknown, "cut short")
        #expect(scan("") == .unknown)
    }
}
