import Foundation
import Transport

/// What the Firebase Storage REST API (v0) lacks, and what StorageKit does
/// instead. Per operation (docs/storagekit.md, "Firebase users in
/// StorageKit", repeats this for users):
///
/// - **Preconditions** (`ifGenerationMatch`, `ifMetagenerationMatch`):
///   v0 has none. StorageKit reads the object's metadata first and fails
///   with `preconditionFailed` if it does not match; then the write is
///   sent unconditionally. Lost: atomicity. A change by another client
///   between the check and the write is overwritten (last writer wins).
///   A check the rules forbid (no read permission) fails the call rather
///   than skipping the check.
/// - **Reads pinned to a generation** (`read(range:generation:)`): v0 has
///   no `generation=`. A response that names its generation
///   (`x-goog-generation`) is checked; the Firebase emulator sends none,
///   so a replaced object can be read across versions. Whole downloads
///   resumed after a broken connection are checked against the metadata's
///   CRC32C.
/// - **Copy** (`copy(to:)`, the JSON API's rewrite): v0 has no server-side
///   copy. StorageKit downloads the source (verified against the CRC32C of
///   the metadata it read, so the bytes are that generation's) and uploads
///   it with the same content type, standard properties and custom
///   metadata. Lost: atomicity, server-side speed (the bytes travel twice
///   through the client), timeCreated, and the source's download tokens
///   (the copy gets its own).
/// - **Listings** carry only names: `StorageListResult.itemMetadata` is
///   empty; ask `getMetadata()` per item.
extension ObjectAPI {
    /// Checks preconditions the way v0 allows: by reading the metadata
    /// first. A no-op for the JSON API (the server checks them there) and
    /// when none is given.
    func checkPrecondition(
        of object: String, ifGenerationMatch: Int64? = nil, ifMetagenerationMatch: Int64? = nil
    ) async throws(StorageError) {
        guard dialect == .firebase, ifGenerationMatch != nil || ifMetagenerationMatch != nil else { return }
        var generation: Int64 = 0
        var metageneration: Int64?
        do {
            let response = try await send(
                HTTPRequest(method: .get, url: objectURL(object), isIdempotent: true), object: object)
            let current = try StorageMetadata(resource: Self.json(response))
            generation = current.generation
            metageneration = current.metageneration
        } catch .objectNotFound {
            // Absent: generation 0, no metageneration.
        }
        let target = "gs://\(bucket)/\(object)"
        if let expected = ifGenerationMatch, expected != generation {
            throw .preconditionFailed(
                "\(target): generation is \(generation), not \(expected) (checked by reading first: Firebase Storage has no preconditions)")
        }
        if let expected = ifMetagenerationMatch, expected != metageneration {
            throw .preconditionFailed(
                "\(target): metageneration is \(metageneration.map(String.init) ?? "none"), not \(expected) (checked by reading first: Firebase Storage has no preconditions)")
        }
    }
}

extension ObjectAPI {
    /// `items` as query parameters where the server checks preconditions
    /// (the JSON API); none for v0, where `checkPrecondition` stands in.
    func preconditions(_ items: [(String, String?)]) -> [(String, String?)] {
        dialect == .jsonAPI ? items : []
    }

    /// Whether a request guarded by `precondition` may be retried: on the
    /// JSON API only a guarded write is safe to repeat. On v0 nothing is
    /// guarded; a repeated upload or change ends in the same object (the
    /// race with other writers exists either way), so it is retried.
    func mayRetry(guardedBy precondition: Int64?) -> Bool {
        dialect == .firebase || precondition != nil
    }
}
