import Foundation
import Testing
@testable import StorageKit

/// StorageMetadata from and to the JSON API's object resource.
@Suite struct MetadataJSONTests {
    /// An object resource as Cloud Storage returns it: int64s as strings,
    /// RFC 3339 times with microseconds.
    static let resourceJSON = #"""
    {
      "kind": "storage#object",
      "id": "my-bucket/images/forest.jpg/1732216223123456",
      "selfLink": "https://www.googleapis.com/storage/v1/b/my-bucket/o/images%2Fforest.jpg",
      "mediaLink": "https://storage.googleapis.com/download/storage/v1/b/my-bucket/o/images%2Fforest.jpg?generation=1732216223123456&alt=media",
      "name": "images/forest.jpg",
      "bucket": "my-bucket",
      "generation": "1732216223123456",
      "metageneration": "3",
      "contentType": "image/jpeg",
      "storageClass": "STANDARD",
      "size": "5368709120",
      "md5Hash": "XrY7u+Ae7tCTyyK7j1rNww==",
      "cacheControl": "public,max-age=300",
      "contentDisposition": "inline; filename=\"forest.jpg\"",
      "contentLanguage": "en",
      "crc32c": "yZRlqg==",
      "etag": "CMDw0d3D0okDEAM=",
      "timeCreated": "2026-11-21T19:10:23.123456Z",
      "updated": "2026-11-21T19:10:24Z",
      "timeStorageClassUpdated": "2026-11-21T19:10:23.123Z",
      "metadata": {"location": "Yosemite, CA, USA", "activity": "Hiking"}
    }
    """#

    static func resource() throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: Data(resourceJSON.utf8)) as? [String: Any])
    }

    @Test func parsesARealResource() throws {
        let m = try StorageMetadata(resource: Self.resource())
        #expect(m.bucket == "my-bucket")
        #expect(m.generation == 1_732_216_223_123_456)
        #expect(m.metageneration == 3)
        #expect(m.fullPath == "images/forest.jpg")
        #expect(m.name == "forest.jpg")
        #expect(m.size == 5_368_709_120)
        #expect(m.contentType == "image/jpeg")
        #expect(m.md5Hash == "XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(m.crc32c == "yZRlqg==")
        #expect(m.cacheControl == "public,max-age=300")
        #expect(m.contentDisposition == "inline; filename=\"forest.jpg\"")
        #expect(m.contentLanguage == "en")
        #expect(m.contentEncoding == nil)
        #expect(m.customMetadata == ["location": "Yosemite, CA, USA", "activity": "Hiking"])
        #expect(m.isFile)
        let created = try #require(m.timeCreated)
        let expected = Date(timeIntervalSince1970: 1_795_288_223.123456)
        #expect(abs(created.timeIntervalSince(expected)) < 1e-5)
        #expect(m.updated == Date(timeIntervalSince1970: 1_795_288_224))
        #expect(m.patchJSON().isEmpty, "nothing read from the server counts as assigned")
    }

    /// The Firebase emulator's v0 metadata has crc32c as a decimal uint32
    /// (firebase-tools src/emulator/storage/metadata.ts); inside it is the
    /// JSON API's base64, the encoding of x-goog-hash and of the checks.
    @Test func decimalCRC32CBecomesBase64() {
        #expect(StorageMetadata(dictionary: ["name": "a", "crc32c": "3381945770"]).crc32c == "yZRlqg==")
        #expect(StorageMetadata(dictionary: ["name": "a", "crc32c": "0"]).crc32c == "AAAAAA==")
        #expect(StorageMetadata(dictionary: ["name": "a", "crc32c": "yZRlqg=="]).crc32c == "yZRlqg==")
        // Not a uint32: kept as sent (it then matches no checksum).
        #expect(StorageMetadata(dictionary: ["name": "a", "crc32c": "4294967296"]).crc32c == "4294967296")
    }

    @Test func parsesFromBytesAndNumbersAsNumbers() throws {
        let json = #"{"name":"a/b","bucket":"b","generation":17,"metageneration":2,"size":0}"#
        let m = try StorageMetadata(json: Data(json.utf8))
        #expect(m.generation == 17)
        #expect(m.metageneration == 2)
        #expect(m.size == 0)
        #expect(m.timeCreated == nil)
        #expect(m.customMetadata == nil)
        #expect(throws: StorageError.self) { try StorageMetadata(json: Data(#"{"bucket":"b"}"#.utf8)) }
        #expect(throws: StorageError.self) { try StorageMetadata(json: Data("[1]".utf8)) }
    }

    @Test func firebaseDictionaryForm() {
        let m = StorageMetadata(dictionary: [
            "customMetadata": ["location": "Yosemite, CA, USA", "activity": "Hiking"],
        ])
        #expect(m.customMetadata?["activity"] == "Hiking")
        #expect(!m.isFile)
    }

    @Test(arguments: [
        ("2026-11-21T19:10:23Z", 1_795_288_223.0),
        ("2026-11-21T19:10:23.5Z", 1_795_288_223.5),
        ("2026-11-21T19:10:23.123456789Z", 1_795_288_223.123456789),
        ("2026-11-21T21:10:23+02:00", 1_795_288_223.0),
        ("1970-01-01T00:00:00Z", 0),
        ("2000-02-29T12:00:00.000Z", 951_825_600),
    ])
    func rfc3339(text: String, seconds: Double) throws {
        let date = try #require(RFC3339.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 1e-5)
    }

    @Test(arguments: ["", "2026-11-21", "2026-11-21T19:10:23", "2026-13-01T00:00:00Z", "2026-11-21T19:10:23.Z", "2026-11-21T19:10:23Zjunk"])
    func badTimestamps(text: String) {
        #expect(RFC3339.parse(text) == nil)
    }

    @Test func formatRoundTrips() throws {
        let date = Date(timeIntervalSince1970: 1_795_288_223.25)
        let text = RFC3339.format(date)
        #expect(text == "2026-11-21T19:10:23.250Z")
        #expect(RFC3339.parse(text) == date)
    }

    // MARK: uploads

    @Test func uploadJSONHasSetWritablePropertiesOnly() throws {
        let m = StorageMetadata()
        m.contentType = "image/jpeg"
        m.cacheControl = "no-cache"
        m.contentLanguage = nil
        m.customMetadata = ["k": "v"]
        let json = m.uploadJSON()
        #expect(Set(json.keys) == ["contentType", "cacheControl", "metadata"])
        #expect(json["contentType"] as? String == "image/jpeg")
        #expect(json["metadata"] as? [String: String] == ["k": "v"])
        #expect(m.uploadJSON(name: "a/b.jpg")["name"] as? String == "a/b.jpg")
    }

    @Test func requestBodiesAreJSONThatParsesBackToWhatWasSent() throws {
        let tricky = "quote \" backslash \\ slash / newline \n tab \t bell \u{07} nul \u{00} é 日本 😀"
        let body: [String: Any] = [
            "name": "dir/\(tricky)", "metadata": [tricky: tricky, "empty": ""], "removed": NSNull(),
            "nested": ["b": NSNull(), "a": ["x": "y"]], "flag": true, "count": 42,
        ]
        let data = ObjectAPI.jsonBody(body)
        let text = String(decoding: data, as: UTF8.self)
        #expect(text.hasPrefix("{\"count\":42,\"flag\":true,\"metadata\":"), "keys sorted: \(text)")
        let parsed = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(parsed["name"] as? String == "dir/\(tricky)")
        #expect(parsed["metadata"] as? [String: String] == [tricky: tricky, "empty": ""])
        #expect(parsed["removed"] is NSNull)
        #expect(((parsed["nested"] as? [String: Any])?["a"] as? [String: String]) == ["x": "y"])
        // Anything it does not write itself goes through JSONSerialization.
        let other = ObjectAPI.jsonBody(["list": ["a", "b"]])
        #expect((try JSONSerialization.jsonObject(with: other) as? [String: Any])?["list"] as? [String] == ["a", "b"])
    }

    @Test func uploadJSONNeverSendsReadOnlyProperties() throws {
        let m = try StorageMetadata(resource: Self.resource())
        let json = m.uploadJSON()
        for key in ["bucket", "generation", "metageneration", "name", "size", "timeCreated", "updated", "crc32c", "kind", "etag"] {
            #expect(json[key] == nil, "\(key) is read-only")
        }
        #expect(json["md5Hash"] as? String == "XrY7u+Ae7tCTyyK7j1rNww==")
        #expect(json["contentType"] as? String == "image/jpeg")
        // And it serialises.
        #expect(try JSONSerialization.data(withJSONObject: json).count > 0)
    }

    // MARK: patches

    @Test func patchSendsOnlyAssignedPropertiesWithNilAsNull() throws {
        let m = StorageMetadata()
        m.cacheControl = "public,max-age=300"
        m.contentType = nil
        let patch = m.patchJSON()
        #expect(Set(patch.keys) == ["cacheControl", "contentType"])
        #expect(patch["cacheControl"] as? String == "public,max-age=300")
        #expect(patch["contentType"] is NSNull)
        let text = try String(decoding: JSONSerialization.data(withJSONObject: patch, options: .sortedKeys), as: UTF8.self)
        #expect(text == #"{"cacheControl":"public,max-age=300","contentType":null}"#)
    }

    @Test func patchOfFetchedMetadataSendsOnlyWhatChanged() throws {
        let m = try StorageMetadata(resource: Self.resource())
        m.contentLanguage = "fr"
        #expect(Set(m.patchJSON().keys) == ["contentLanguage"])
    }

    @Test func customMetadataMergesAndRemovedKeysAreNull() throws {
        let m = StorageMetadata()
        m.removeCustomMetadata(forKey: "drop")
        m.customMetadata = ["added": "3"]
        let patch = m.patchJSON()
        #expect(Set(patch.keys) == ["metadata"])
        let map = try #require(patch["metadata"] as? [String: Any])
        #expect(map["added"] as? String == "3")
        #expect(map["drop"] is NSNull)
        #expect(map.count == 2)

        let onlyRemoval = StorageMetadata()
        onlyRemoval.removeCustomMetadata(forKey: "x")
        let text = try String(decoding: JSONSerialization.data(withJSONObject: onlyRemoval.patchJSON(), options: .sortedKeys), as: UTF8.self)
        #expect(text == #"{"metadata":{"x":null}}"#)
        #expect(onlyRemoval.removedCustomMetadataKeys == ["x"])
    }

    @Test func removingAKeyDropsItLocallyAndASetValueWins() throws {
        let m = try StorageMetadata(resource: Self.resource())
        m.removeCustomMetadata(forKey: "activity")
        #expect(m.customMetadata == ["location": "Yosemite, CA, USA"])
        var map = try #require(m.patchJSON()["metadata"] as? [String: Any])
        #expect(map["activity"] is NSNull)
        #expect(map["location"] == nil, "an untouched map sends only the removal")

        m.customMetadata = ["activity": "Climbing"]
        map = try #require(m.patchJSON()["metadata"] as? [String: Any])
        #expect(map["activity"] as? String == "Climbing")
    }

    @Test func customMetadataNilDeletesAll() {
        let m = StorageMetadata()
        m.removeCustomMetadata(forKey: "x")
        m.customMetadata = nil
        #expect(m.patchJSON()["metadata"] is NSNull)
    }

    @Test func untouchedMetadataPatchesNothing() {
        #expect(StorageMetadata().patchJSON().isEmpty)
        #expect(StorageMetadata().uploadJSON().isEmpty)
    }

    @Test func copyKeepsAssignmentsAndIsIndependent() {
        let m = StorageMetadata()
        m.contentType = nil
        m.removeCustomMetadata(forKey: "k")
        let c = m.copy()
        #expect(c.patchJSON()["contentType"] is NSNull)
        #expect(c.removedCustomMetadataKeys == ["k"])
        c.contentType = "text/plain"
        #expect(m.contentType == nil)
        #expect(c.contentType == "text/plain")
    }

    @Test func dictionaryRepresentationUsesWireEncodings() throws {
        let m = try StorageMetadata(resource: Self.resource())
        let d = m.dictionaryRepresentation()
        #expect(d["generation"] as? String == "1732216223123456")
        #expect(d["size"] as? String == "5368709120")
        #expect(d["name"] as? String == "images/forest.jpg")
        #expect(d["updated"] as? String == "2026-11-21T19:10:24.000Z")
        let again = StorageMetadata(dictionary: d)
        #expect(again.generation == m.generation)
        #expect(again.customMetadata == m.customMetadata)
    }

    @Test func sharedAcrossTasks() async {
        let m = StorageMetadata()
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<100 {
                group.addTask { m.customMetadata = ["k": "\(i)"] }
            }
        }
        #expect(m.customMetadata?["k"] != nil)
    }
}
