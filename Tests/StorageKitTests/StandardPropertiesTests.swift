import Foundation
import Testing
@testable import StorageKit

/// `StandardProperty` and `StandardProperties` list the five properties
/// more than once (the cases, the stored properties, the subscript, and by
/// hand `apply`, `merge` and `isEmpty`, for speed); every list must name
/// every property, and each mapping that loops over them must carry it.
@Suite struct StandardPropertiesTests {
    /// Each property set alone, through the subscript, to a distinct value.
    static func eachAlone() -> [(property: StandardProperty, properties: ObjectProperties)] {
        StandardProperty.allCases.map { property in
            var properties = ObjectProperties()
            properties[property] = "v-\(property.rawValue)"
            return (property, properties)
        }
    }

    /// The stored properties by label, with their values.
    static func stored(_ properties: ObjectProperties) -> [String: String?] {
        Dictionary(uniqueKeysWithValues: Mirror(reflecting: properties).children.map { ($0.label ?? "?", $0.value as? String) })
    }

    @Test func theCasesAreTheStoredPropertiesAndTheSubscriptReachesEach() {
        let labels = Mirror(reflecting: ObjectProperties()).children.compactMap(\.label)
        #expect(StandardProperty.allCases.map(\.rawValue) == labels)
        for (property, alone) in Self.eachAlone() {
            let set = Self.stored(alone).filter { $0.value != nil }
            #expect(set == [property.rawValue: "v-\(property.rawValue)"], "the subscript of \(property) writes another property")
            #expect(alone[property] == "v-\(property.rawValue)")
        }
    }

    @Test func everyPropertyIsMergedAppliedAndCounted() {
        for (property, alone) in Self.eachAlone() {
            #expect(!alone.isEmpty, "isEmpty misses \(property)")
            var merged = ObjectProperties()
            merged.merge(alone)
            #expect(merged == alone, "merge misses \(property)")
            // The same value as a change, and a deletion of it.
            var change = PropertyChanges()
            change[property] = .some(alone[property])
            var deletion = PropertyChanges()
            deletion[property] = .some(nil)
            var applied = ObjectProperties()
            applied.apply(change)
            #expect(applied == alone, "apply misses \(property)")
            applied.apply(deletion)
            #expect(applied == ObjectProperties(), "apply does not delete \(property)")
            applied = alone
            applied.apply(PropertyChanges())
            #expect(applied == alone, "an empty change changed \(property)")
        }
        #expect(ObjectProperties().isEmpty)
    }

    /// The JSON mappings (a resource dictionary, a listing page read by
    /// `ListingParser`, upload, patch and dictionary JSON) carry every
    /// property under its name, and the Firebase-named properties of
    /// `StorageMetadata` read the same values.
    @Test func everyMappingCarriesEveryProperty() throws {
        let values = Dictionary(uniqueKeysWithValues: StandardProperty.allCases.map { ($0.rawValue, "v-\($0.rawValue)") })
        var resource: [String: Any] = values
        resource["name"] = "a/b.txt"
        let read = try StorageMetadata(resource: resource)
        let page = try JSONSerialization.data(withJSONObject: ["items": [resource]])
        let item = try #require(ListingParser.parse(page)?.items.first)
        let listed = try StorageMetadata(resource: item)
        for metadata in [read, listed] {
            for property in StandardProperty.allCases {
                #expect(metadata[property] == "v-\(property.rawValue)", "\(property) lost")
            }
            #expect(
                [metadata.contentType, metadata.cacheControl, metadata.contentDisposition, metadata.contentEncoding, metadata.contentLanguage]
                    == StandardProperty.allCases.map { "v-\($0.rawValue)" })
            #expect(metadata.standardProperties == ObjectProperties(
                contentType: "v-contentType", cacheControl: "v-cacheControl", contentDisposition: "v-contentDisposition",
                contentEncoding: "v-contentEncoding", contentLanguage: "v-contentLanguage"))
            #expect(metadata.uploadJSON() as? [String: String] == values)
            #expect(metadata.dictionaryRepresentation().filter { values[$0.key] != nil } as? [String: String] == values)
        }
        for property in StandardProperty.allCases {
            #expect(StorageMetadata.resourceFields.split(separator: ",").contains(Substring(property.rawValue)))
            let set = StorageMetadata()
            set[property] = "x"
            #expect(set.patchJSON() as? [String: String] == [property.rawValue: "x"])
            let deleted = StorageMetadata()
            deleted[property] = nil
            #expect(deleted.patchJSON().keys.sorted() == [property.rawValue] && deleted.patchJSON()[property.rawValue] is NSNull)
        }
    }
}
