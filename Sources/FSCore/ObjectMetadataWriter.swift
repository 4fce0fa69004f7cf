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
            let pinned = Self.keepingModificationTime(patch, of: current)
            return .success(try await store.patch(object, pinned, ifMetagenerationMatch: current.metageneration))
        } catch {
            return .failure(error)
        }
    }

    /// The copy a rename made, carrying its source's mtime: a copy is a new
    /// object with a new `updated`, so a source whose mtime was its
    /// `updated` (no `goog-reserved-file-mtime`) would show the rename's
    /// time. One PATCH, only then. If it fails the rename still happened;
    /// the caller logs that only the mtime moved.
    func keepModificationTime(of source: ObjectInfo, on copy: ObjectInfo) async -> Result<ObjectInfo, StoreError> {
        let pinned = Self.keepingModificationTime(MetadataPatch(), of: copy, shown: AttributeMapper.modificationTime(source))
        guard pinned != MetadataPatch() else { return .success(copy) }
        do {
            return .success(try await store.patch(copy.name, pinned, ifMetagenerationMatch: copy.metageneration))
        } catch {
            return .failure(error)
        }
    }

    /// `patch`, plus the mtime `shown` (by default `object`'s own) stored as
    /// `goog-reserved-file-mtime` when `object` has no such key and the
    /// patch sets none: a file written through a mount keeps its mtime only
    /// as `updated` (semantics.md#mtime-stored), which every PATCH moves,
    /// and a chmod, chown or setxattr must not change the mtime. Whole
    /// seconds, as `gcloud storage` writes the key.
    static func keepingModificationTime(_ patch: MetadataPatch, of object: ObjectInfo, shown: Timestamp? = nil) -> MetadataPatch {
        let key = AttributeMapper.mtimeKey
        guard object.customMetadata[key] == nil, !patch.customMetadata.keys.contains(key) else { return patch }
        var pinned = patch
        pinned.customMetadata[key] = .some(String((shown ?? AttributeMapper.modificationTime(object)).seconds))
        return pinned
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
