import CXattr
import Foundation
import Testing
@testable import FSCore
import StorageKit

@Suite("extended attribute names, values and limits")
struct ExtendedAttributeMappingTests {
    @Test func namesMapToCustomKeysPropertiesAndNothingElse() {
        #expect(ExtendedAttributeName("user.location") == .custom(key: "location"))
        #expect(ExtendedAttributeName("user.contentType") == .custom(key: "contentType"), "a custom key, never the property")
        #expect(ExtendedAttributeName("user.gcs.size") == .custom(key: "gcs.size"))
        #expect(ExtendedAttributeName("user.") == .custom(key: ""))
        #expect(ExtendedAttributeName("user.goog-reserved-posix-mode") == .reservedKey("goog-reserved-posix-mode"))
        #expect(ExtendedAttributeName("user.goog-reserved-anything") == .reservedKey("goog-reserved-anything"))
        #expect(ExtendedAttributeName("gcs.contentType") == .property(.standard(.contentType)))
        #expect(ExtendedAttributeName("gcs.crc32c") == .property(.readOnly(.crc32c)))
        #expect(ExtendedAttributeName("gcs.contenttype") == .unknownProperty("contenttype"))
        #expect(ExtendedAttributeName("gcs.customMetadata") == .unknownProperty("customMetadata"))
        for foreign in ["security.selinux", "system.posix_acl_access", "trusted.x", "USER.x", "gcs", "user", "x"] {
            #expect(ExtendedAttributeName(foreign) == .unsupportedNamespace, "\(foreign)")
            #expect(!ExtendedAttributeName.isServed(foreign), "\(foreign)")
        }
        #expect(ExtendedAttributeName.isServed("user.x") && ExtendedAttributeName.isServed("gcs.size"))
    }

    @Test func writableAndReadOnlyPropertiesAreTheSeedsTable() {
        let writable = ObjectProperty.allCases.filter(\.isWritable).map(\.rawValue)
        #expect(writable == ["contentType", "cacheControl", "contentDisposition", "contentEncoding", "contentLanguage"])
        let readOnly = ObjectProperty.allCases.filter { !$0.isWritable }.map(\.rawValue)
        #expect(readOnly == ["bucket", "fullPath", "name", "size", "generation", "metageneration", "timeCreated", "updated", "md5Hash", "crc32c"])
    }

    @Test func listedNamesAreTheCustomKeysWithoutReservedOnes() {
        var info = Self.info()
        info.customMetadata = ["b": "2", "a": "1", "goog-reserved-file-mtime": "1", "goog-reserved-posix-uid": "0"]
        #expect(ExtendedAttributeRules.listedNames(info) == ["user.a", "user.b"])
        #expect(ExtendedAttributeRules.listedNames(nil) == [])
    }

    @Test func propertyValuesAsText() throws {
        var info = Self.info()
        info.bucket = "bkt"
        info.md5Hash = "XUFAKrxLKna5cZ2REBfFkg=="
        info.crc32c = "mnG7TA=="
        info.timeCreated = Date(timeIntervalSince1970: 1_700_000_000.25)
        info.cacheControl = "no-cache"
        info.customMetadata["goog-reserved-posix-mode"] = "600"
        func read(_ name: String) throws -> String {
            String(decoding: try ExtendedAttributeRules.value(ExtendedAttributeName(name), of: info), as: UTF8.self)
        }
        #expect(try read("gcs.bucket") == "bkt")
        #expect(try read("gcs.fullPath") == "docs/a b.txt")
        #expect(try read("gcs.name") == "a b.txt")
        #expect(try read("gcs.size") == "1234")
        #expect(try read("gcs.generation") == "1700000000000001")
        #expect(try read("gcs.metageneration") == "3")
        #expect(try read("gcs.timeCreated") == "2023-11-14T22:13:20.250Z")
        #expect(try read("gcs.updated") == "2023-11-14T22:13:21.000Z")
        #expect(try read("gcs.md5Hash") == "XUFAKrxLKna5cZ2REBfFkg==")
        #expect(try read("gcs.crc32c") == "mnG7TA==")
        #expect(try read("gcs.contentType") == "text/plain")
        #expect(try read("gcs.cacheControl") == "no-cache")
        #expect(try read("user.location") == "Yosemite, CA, USA")

        var placeholder = Self.info()
        placeholder.name = "docs/sub/"
        #expect(String(decoding: try ExtendedAttributeRules.value(.property(.readOnly(.name)), of: placeholder), as: UTF8.self) == "sub")

        #expect(Self.errno { _ = try read("gcs.contentLanguage") } == ENODATA)
        #expect(Self.errno { _ = try read("user.missing") } == ENODATA)
        #expect(Self.errno { _ = try ExtendedAttributeRules.value(.custom(key: "location"), of: nil) } == ENODATA)
        #expect(Self.errno { _ = try read("user.goog-reserved-posix-mode") } == ENODATA)
        #expect(Self.errno { _ = try read("gcs.nope") } == ENODATA)
        #expect(Self.errno { _ = try read("security.selinux") } == EOPNOTSUPP)
    }

    @Test func patchesForSetAndRemove() throws {
        var set = MetadataPatch()
        set.customMetadata["k"] = .some("v")
        #expect(try ExtendedAttributeRules.patch(.custom(key: "k"), Data("v".utf8)) == set)
        var remove = MetadataPatch()
        remove.customMetadata["k"] = .some(nil)
        #expect(try ExtendedAttributeRules.patch(.custom(key: "k"), nil) == remove)
        var type = MetadataPatch()
        type.contentType = .some("text/html")
        #expect(try ExtendedAttributeRules.patch(.property(.standard(.contentType)), Data("text/html".utf8)) == type)
        var noLanguage = MetadataPatch()
        noLanguage.contentLanguage = .some(nil)
        #expect(try ExtendedAttributeRules.patch(.property(.standard(.contentLanguage)), nil) == noLanguage)
        var empty = MetadataPatch()
        empty.customMetadata["e"] = .some("")
        #expect(try ExtendedAttributeRules.patch(.custom(key: "e"), Data()) == empty)
        let unicode = "Grüße, 東京 🚀"
        #expect(try ExtendedAttributeRules.patch(.custom(key: "ü"), Data(unicode.utf8)).customMetadata["ü"] == .some(unicode))
    }

    @Test func refusedChangesByErrno() {
        func errno(_ name: String, _ value: Data?) -> Int32 {
            Self.errno { _ = try ExtendedAttributeRules.patch(ExtendedAttributeName(name), value) }
        }
        let v = Data("v".utf8)
        for readOnly in ["gcs.size", "gcs.generation", "gcs.md5Hash", "gcs.bucket", "gcs.updated"] {
            #expect(errno(readOnly, v) == EPERM, "\(readOnly)")
            #expect(errno(readOnly, nil) == EPERM, "\(readOnly)")
        }
        #expect(errno("user.goog-reserved-posix-mode", Data("777".utf8)) == EPERM)
        #expect(errno("user.goog-reserved-file-mtime", nil) == EPERM)
        #expect(errno("gcs.nope", v) == EOPNOTSUPP)
        #expect(errno("security.selinux", v) == EOPNOTSUPP)
        #expect(errno("system.posix_acl_access", nil) == EOPNOTSUPP)
        #expect(errno("user.", v) == EINVAL)
        #expect(errno("user.k", Data([0x66, 0xFF, 0x66])) == EINVAL, "not UTF-8")
        #expect(errno("user.k", Data([0xC3])) == EINVAL, "truncated UTF-8")
        #expect(errno("user.k", Data([0x61, 0x00])) == EINVAL, "NUL")
        #expect(errno("gcs.contentType", Data([0xFE])) == EINVAL)
        #expect(errno("user.k", Data(repeating: 0x61, count: 4096)) == 0)
        #expect(errno("user.k", Data(repeating: 0x61, count: 4097)) == E2BIG)
        #expect(errno("user." + String(repeating: "k", count: 1024), v) == 0)
        #expect(errno("user." + String(repeating: "k", count: 1025), v) == E2BIG)
    }

    @Test func flagsFollowSetxattr() {
        #expect(ExtendedAttributeRules.createFlag == Int32(XATTR_CREATE))
        #expect(ExtendedAttributeRules.replaceFlag == Int32(XATTR_REPLACE))
        let create = ExtendedAttributeRules.createFlag, replace = ExtendedAttributeRules.replaceFlag
        #expect(Self.errno { try ExtendedAttributeRules.checkFlags(0, exists: true) } == 0)
        #expect(Self.errno { try ExtendedAttributeRules.checkFlags(0, exists: false) } == 0)
        #expect(Self.errno { try ExtendedAttributeRules.checkFlags(create, exists: true) } == EEXIST)
        #expect(Self.errno { try ExtendedAttributeRules.checkFlags(create, exists: false) } == 0)
        #expect(Self.errno { try ExtendedAttributeRules.checkFlags(replace, exists: false) } == ENODATA)
        #expect(Self.errno { try ExtendedAttributeRules.checkFlags(replace, exists: true) } == 0)
    }

    @Test func totalLimitCountsKeysAndValuesAndLetsAnOversizedMapShrink() {
        func patch(_ key: String, _ value: String?) -> MetadataPatch {
            var p = MetadataPatch()
            p.customMetadata[key] = .some(value)
            return p
        }
        // 2 keys of 1 byte + 2 × 4000 bytes = 8002; 190 more bytes reach 8192 exactly.
        let full = ["a": String(repeating: "x", count: 4000), "b": String(repeating: "y", count: 4000)]
        #expect(ExtendedAttributeRules.customMetadataBytes(full) == 8002)
        #expect(Self.errno { try ExtendedAttributeRules.checkTotal(patch("c", String(repeating: "z", count: 189)), on: full) } == 0)
        #expect(Self.errno { try ExtendedAttributeRules.checkTotal(patch("c", String(repeating: "z", count: 190)), on: full) } == E2BIG)
        #expect(Self.errno { try ExtendedAttributeRules.checkTotal(patch("a", String(repeating: "x", count: 4191)), on: full) } == E2BIG)
        // Already over the limit (written by another tool): shrinking or removing passes.
        let over = ["a": String(repeating: "x", count: 5000), "b": String(repeating: "y", count: 4000)]
        #expect(Self.errno { try ExtendedAttributeRules.checkTotal(patch("a", nil), on: over) } == 0)
        #expect(Self.errno { try ExtendedAttributeRules.checkTotal(patch("a", "short"), on: over) } == 0)
        #expect(Self.errno { try ExtendedAttributeRules.checkTotal(patch("c", "more"), on: over) } == E2BIG)
        // Multi-byte characters count as bytes.
        #expect(ExtendedAttributeRules.customMetadataBytes(["é": "東"]) == 5)
    }

    // MARK: - Helpers

    static func info() -> ObjectInfo {
        var info = ObjectInfo(
            name: "docs/a b.txt", size: 1234, generation: 1_700_000_000_000_001, metageneration: 3,
            updated: Date(timeIntervalSince1970: 1_700_000_001), contentType: "text/plain",
            customMetadata: ["location": "Yosemite, CA, USA"])
        info.timeCreated = nil
        return info
    }

    /// The errno `body` fails with, 0 if it succeeds.
    static func errno(_ body: () throws -> Void) -> Int32 {
        do {
            try body()
            return 0
        } catch let error as FSError {
            return error.errno
        } catch {
            return -1
        }
    }
}
