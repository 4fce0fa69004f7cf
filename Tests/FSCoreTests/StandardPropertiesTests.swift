import Testing
@testable import FSCore

/// `apply`, `merge` and `isEmpty` list the five properties by hand (for
/// speed); every stored property of the type must be in each list.
@Suite struct StandardPropertiesTests {
    /// The stored properties, each set alone to a distinct value.
    static func eachAlone() -> [(name: String, properties: ObjectProperties)] {
        let names = Mirror(reflecting: ObjectProperties()).children.compactMap(\.label)
        return names.map { name in
            var properties = ObjectProperties()
            switch name {
            case "contentType": properties.contentType = "v-\(name)"
            case "cacheControl": properties.cacheControl = "v-\(name)"
            case "contentDisposition": properties.contentDisposition = "v-\(name)"
            case "contentEncoding": properties.contentEncoding = "v-\(name)"
            case "contentLanguage": properties.contentLanguage = "v-\(name)"
            default: Issue.record("a property this test does not know: \(name)")
            }
            return (name, properties)
        }
    }

    @Test func everyPropertyIsMergedAppliedAndCounted() {
        let all = Self.eachAlone()
        #expect(all.count == 5)
        for (name, alone) in all {
            #expect(!alone.isEmpty, "isEmpty misses \(name)")
            var merged = ObjectProperties()
            merged.merge(alone)
            #expect(merged == alone, "merge misses \(name)")
            // The same value as a change, and a deletion of it.
            let mirror = Mirror(reflecting: alone).children.first { $0.label == name }
            let value = mirror?.value as? String
            var change = PropertyChanges()
            var deletion = PropertyChanges()
            switch name {
            case "contentType": change.contentType = .some(value); deletion.contentType = .some(nil)
            case "cacheControl": change.cacheControl = .some(value); deletion.cacheControl = .some(nil)
            case "contentDisposition": change.contentDisposition = .some(value); deletion.contentDisposition = .some(nil)
            case "contentEncoding": change.contentEncoding = .some(value); deletion.contentEncoding = .some(nil)
            case "contentLanguage": change.contentLanguage = .some(value); deletion.contentLanguage = .some(nil)
            default: break
            }
            var applied = ObjectProperties()
            applied.apply(change)
            #expect(applied == alone, "apply misses \(name)")
            applied.apply(deletion)
            #expect(applied == ObjectProperties(), "apply does not delete \(name)")
            applied = alone
            applied.apply(PropertyChanges())
            #expect(applied == alone, "an empty change changed \(name)")
        }
        #expect(ObjectProperties().isEmpty)
    }
}
