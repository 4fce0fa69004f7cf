import Foundation
import StorageKit

/// The store's side of one metadata change, and nothing more: it knows
/// nothing of inodes, caches, errno or retries (`FileSystem.changeMetadata`
/// decides those). An object's change is one PATCH with
/// ifMetagenerationMatch on the metageneration the caller's check saw; an
/// implicit directory's (no placeholder yet) is the upload of its
/// placeholder with ifGenerationMatch=0, carrying the change.
struct ObjectMetadataWriter: Sendable {
    let store: any ObjectStore

    /// Applies `patch` to `object`, whose metadata the caller last saw as
    /// `current` (nil: the object does not exist, an implicit directory's
    /// placeholder). 412 or 404 means someone changed it meanwhile.
    func apply(_ patch: MetadataPatch, to object: String, current: ObjectInfo?) async -> Result<ObjectInfo, StoreError> {
        do {
            guard let current else { return .success(try await createPlaceholder(object, carrying: patch)) }
            return .success(try await store.patch(object, patch, ifMetagenerationMatch: current.metageneration))
        } catch {
            return .failure(error)
        }
    }

    /// Uploads the placeholder `object`, only if it is still absent,
    /// carrying `patch`: custom keys and contentType travel with the
    /// upload; other properties follow in one PATCH. Deletions are moot on
    /// a new object.
    private func createPlaceholder(_ object: String, carrying patch: MetadataPatch) async throws(StoreError) -> ObjectInfo {
        let options = PutOptions(
            contentType: patch.contentType ?? nil, customMetadata: patch.customMetadata.compactMapValues { $0 }, ifGenerationMatch: 0)
        var rest = MetadataPatch()
        for property in StandardProperty.allCases where property != .contentType {
            rest.properties[property] = Self.setValue(patch.properties[property])
        }
        let created = try await store.put(object, from: nil, options: options)
        guard rest != MetadataPatch() else { return created }
        return try await store.patch(object, rest, ifMetagenerationMatch: created.metageneration)
    }

    /// A property change that sets a value, or nil for none or a deletion.
    private static func setValue(_ change: String??) -> String?? {
        if case .some(.some(let value)) = change { return .some(value) }
        return nil
    }
}
