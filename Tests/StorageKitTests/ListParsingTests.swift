import Foundation
import Testing
@testable import StorageKit

/// StorageListResult from objects.list responses (delimiter "/").
@Suite struct ListParsingTests {
    let storage = Storage(bucket: "b")

    static func item(_ name: String, size: Int = 1, generation: Int = 1) -> [String: Any] {
        [
            "kind": "storage#object", "bucket": "b", "name": name, "size": String(size),
            "generation": String(generation), "metageneration": "1",
            "updated": "2026-11-21T19:10:23.123Z",
        ]
    }

    /// Parses `response` both ways a listing page is read: from the bytes
    /// (`ListingParser`) and through JSONSerialization; both must agree.
    func parse(_ response: [String: Any], at path: String) throws -> StorageListResult {
        let document = ListingDocument(dictionary: response)
        let bytes = try JSONSerialization.data(withJSONObject: response)
        #expect(ListingParser.parse(bytes) == document)
        return try StorageListResult(response: document, listing: storage.reference().child(path))
    }

    func parse(json: String, at path: String) throws -> StorageListResult {
        let response = try #require(JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        return try parse(response, at: path)
    }

    /// What Cloud Storage answers for the seeds' bucket (`correctPrefix/happyItem`,
    /// `wrongPrefix//sadItem`, `lonelyItem/`), with includeTrailingDelimiter.
    @Test func seedsExample() throws {
        let root = try parse([
            "kind": "storage#objects",
            "prefixes": ["correctPrefix/", "lonelyItem/", "wrongPrefix/"],
            "items": [Self.item("lonelyItem/")],
        ], at: "")
        #expect(root.prefixes.map(\.fullPath) == ["correctPrefix", "lonelyItem", "wrongPrefix"])
        #expect(root.prefixes.map(\.name) == ["correctPrefix", "lonelyItem", "wrongPrefix"])
        #expect(root.items.isEmpty)
        #expect(root.itemMetadata.isEmpty)
        #expect(root.placeholderPrefixes == ["lonelyItem/"])
        #expect(root.pageToken == nil)

        let correct = try parse(["items": [Self.item("correctPrefix/happyItem")]], at: "correctPrefix")
        #expect(correct.items.map(\.fullPath) == ["correctPrefix/happyItem"])
        #expect(correct.prefixes.isEmpty)

        // GCS rolls `wrongPrefix//sadItem` into the prefix `wrongPrefix//`,
        // which has an empty segment: no reference.
        let wrong = try parse(["prefixes": ["wrongPrefix//"]], at: "wrongPrefix")
        #expect(wrong.items.isEmpty)
        #expect(wrong.prefixes.isEmpty)

        // `lonelyItem/` is returned as an item of its own listing.
        let lonely = try parse(["items": [Self.item("lonelyItem/")]], at: "lonelyItem")
        #expect(lonely.items.isEmpty)
        #expect(lonely.prefixes.isEmpty)
        #expect(lonely.placeholderPrefixes == ["lonelyItem/"], "the listed directory's own placeholder")
    }

    @Test func seedsExampleWithoutTrailingDelimiter() throws {
        // Without includeTrailingDelimiter GCS sends no items at the root.
        let root = try parse(["prefixes": ["correctPrefix/", "lonelyItem/", "wrongPrefix/"]], at: "")
        #expect(root.prefixes.count == 3)
        #expect(root.items.isEmpty)
        #expect(root.placeholderPrefixes.isEmpty)
    }

    @Test func itemsCarryTheirMetadataInOrder() throws {
        let result = try parse(json: """
        {"kind":"storage#objects","nextPageToken":"CgVhL2IvYw==",
         "prefixes":["docs/a/","docs/b/"],
         "items":[
           {"kind":"storage#object","name":"docs/x.txt","bucket":"b","size":"12","generation":"5","metageneration":"1","contentType":"text/plain","metadata":{"goog-reserved-file-mtime":"1700000000"}},
           {"kind":"storage#object","name":"docs/y.bin","bucket":"b","size":"0","generation":"6","metageneration":"2"}
         ]}
        """, at: "docs")
        #expect(result.prefixes.map(\.fullPath) == ["docs/a", "docs/b"])
        #expect(result.items.map(\.fullPath) == ["docs/x.txt", "docs/y.bin"])
        #expect(result.itemMetadata.map(\.fullPath) == ["docs/x.txt", "docs/y.bin"])
        #expect(result.itemMetadata.map(\.size) == [12, 0])
        #expect(result.itemMetadata[0].customMetadata?["goog-reserved-file-mtime"] == "1700000000")
        #expect(result.itemMetadata[1].metageneration == 2)
        #expect(result.pageToken == "CgVhL2IvYw==")
        #expect(result.items[0].storage === storage)
    }

    @Test func invalidNamesAreSkipped() throws {
        let result = try parse([
            "prefixes": ["d/ok/", "d//", "elsewhere/", "d/"],
            "items": [
                Self.item("d/"),            // the listed directory's placeholder
                Self.item("d/ok/"),         // a listed prefix's placeholder
                Self.item("d/file"),
                Self.item("d/trailing/"),   // ends in "/", not a listed prefix
                Self.item("d//double"),     // empty segment
                Self.item("other/file"),    // outside the listing
                Self.item("d/nested/file"), // not a direct child
            ],
        ], at: "d")
        #expect(result.prefixes.map(\.fullPath) == ["d/ok"])
        #expect(result.items.map(\.fullPath) == ["d/file"])
        #expect(result.itemMetadata.count == 1)
        #expect(result.placeholderPrefixes == ["d/", "d/ok/"])
    }

    /// A directory's POSIX mode and owner live in its placeholder's custom
    /// metadata, which the listing returns with it (includeTrailingDelimiter).
    @Test func placeholdersKeepTheirMetadata() throws {
        var placeholder = Self.item("d/x/", size: 0, generation: 7)
        placeholder["metadata"] = ["goog-reserved-posix-mode": "40700", "goog-reserved-posix-uid": "1001"]
        let response: [String: Any] = ["prefixes": ["d/x/", "d/y/"], "items": [placeholder, Self.item("d/f")]]
        let result = try parse(response, at: "d")
        #expect(Set(result.placeholderMetadata.keys) == ["d/x/"])
        let x = try #require(result.placeholderMetadata["d/x/"])
        #expect(x.customMetadata == ["goog-reserved-posix-mode": "40700", "goog-reserved-posix-uid": "1001"] && x.generation == 7)
        #expect(StorageListResult(merging: [result]).placeholderMetadata["d/x/"]?.customMetadata == x.customMetadata)
        // A v0 listing's items are names only: no metadata to keep.
        let v0 = try StorageListResult(response: ListingDocument(dictionary: response), listing: storage.reference().child("d"), itemsCarryMetadata: false)
        #expect(v0.placeholderPrefixes == ["d/x/"] && v0.placeholderMetadata.isEmpty)
    }

    @Test func rootNamesWithLeadingSlashesAreSkipped() throws {
        let result = try parse(["prefixes": ["/", "a/"], "items": [Self.item("/x"), Self.item("y")]], at: "")
        #expect(result.prefixes.map(\.fullPath) == ["a"])
        #expect(result.items.map(\.fullPath) == ["y"])
    }

    @Test func emptyResponseAndEmptyToken() throws {
        let result = try parse(["kind": "storage#objects", "nextPageToken": ""], at: "x")
        #expect(result.prefixes.isEmpty)
        #expect(result.items.isEmpty)
        #expect(result.pageToken == nil)
    }

    @Test func pagesMerge() throws {
        let first = try parse([
            "prefixes": ["p/a/"], "items": [Self.item("p/1"), Self.item("p/a/")], "nextPageToken": "t1",
        ], at: "p")
        let second = try parse([
            "prefixes": ["p/a/", "p/b/"], "items": [Self.item("p/2")], "nextPageToken": "t2",
        ], at: "p")
        let last = try parse(["items": [Self.item("p/3", size: 3)]], at: "p")
        #expect(first.pageToken == "t1")
        #expect(second.pageToken == "t2")
        #expect(last.pageToken == nil)
        let all = StorageListResult(merging: [first, second, last])
        #expect(all.prefixes.map(\.fullPath) == ["p/a", "p/b"])
        #expect(all.items.map(\.fullPath) == ["p/1", "p/2", "p/3"])
        #expect(all.itemMetadata.map(\.fullPath) == ["p/1", "p/2", "p/3"])
        #expect(all.itemMetadata.last?.size == 3)
        #expect(all.placeholderPrefixes == ["p/a/"])
        #expect(all.pageToken == nil)
    }

    @Test func namesWithSpecialCharactersSurvive() throws {
        let result = try parse([
            "prefixes": ["ü/#[]/"], "items": [Self.item("ü/a b?.txt"), Self.item("ü/..")],
        ], at: "ü")
        #expect(result.prefixes.map(\.fullPath) == ["ü/#[]"])
        #expect(result.items.map(\.name) == ["a b?.txt", ".."])
    }

    @Test func fixtureFileParses() throws {
        let url = try #require(Bundle.module.url(forResource: "list-page", withExtension: "json", subdirectory: "Fixtures"))
        let response = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let result = try parse(response, at: "photos")
        #expect(result.prefixes.map(\.fullPath) == ["photos/2025", "photos/2026"])
        #expect(result.items.map(\.name) == ["cover.jpg", "notes.txt"])
        #expect(result.itemMetadata.map(\.contentType) == ["image/jpeg", "text/plain"])
        #expect(result.placeholderPrefixes == ["photos/", "photos/2026/"])
        #expect(result.pageToken == "Cg5waG90b3Mvbm90ZXMudHh0")
    }
}
