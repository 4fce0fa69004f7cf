import Foundation

/// A pointer to an object or a prefix ("directory") in a bucket, as in the
/// Firebase SDK. References are cheap values: making one never touches the
/// network, and the operations (upload, download, metadata, list, delete)
/// live in extensions.
///
///     let spaceRef = storage.reference().child("images/space.jpg")
///     spaceRef.fullPath        // "images/space.jpg"
///     spaceRef.name            // "space.jpg"
///     spaceRef.parent()?.child("earth.jpg").fullPath   // "images/earth.jpg"
///     spaceRef.root().parent() // nil
public struct StorageReference: Sendable, Hashable, CustomStringConvertible {
    /// The service this reference belongs to (bucket, endpoint, credentials).
    public let storage: Storage
    let path: StoragePath

    init(storage: Storage, path: StoragePath) {
        self.storage = storage
        self.path = path
    }

    /// The reference to `path` below this one. `path` may contain `/` to go
    /// down several levels; empty segments collapse (`"a//b/"` is `"a/b"`).
    public func child(_ path: String) -> StorageReference {
        StorageReference(storage: storage, path: self.path.child(path))
    }

    /// The reference one level up; nil for the root.
    public func parent() -> StorageReference? {
        path.parent.map { StorageReference(storage: storage, path: $0) }
    }

    /// The root of the bucket.
    public func root() -> StorageReference {
        StorageReference(storage: storage, path: path.root)
    }

    /// The path inside the bucket, e.g. `"images/space.jpg"`; "" at the root.
    public var fullPath: String { path.fullPath }

    /// The last segment of `fullPath`, e.g. `"space.jpg"`; "" at the root.
    public var name: String { path.name }

    /// The bucket's name.
    public var bucket: String { storage.bucket }

    /// `gs://bucket/path` (`gs://bucket/` at the root); an unusable
    /// reference (see `Storage.reference(forURL:)`) also says why.
    public var description: String {
        guard let reason = path.unusableReason else { return "gs://\(bucket)/\(fullPath)" }
        return "gs://\(bucket)/\(fullPath) (unusable: \(reason))"
    }

    /// Whether requests can be made through this reference. False only for
    /// what `Storage.reference(forURL:)` made of an invalid URL (and what
    /// was derived from it) and for references of a `Storage` that has no
    /// bucket: every operation on those fails with
    /// `StorageError.invalidArgument` naming the reason.
    public var isUsable: Bool { path.unusableReason == nil }

    // Two references are equal when they name the same place, whichever
    // `Storage` instance made them (`Storage` itself compares by identity).
    public static func == (a: StorageReference, b: StorageReference) -> Bool {
        a.path == b.path && a.bucket == b.bucket
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bucket)
        hasher.combine(path)
    }
}
