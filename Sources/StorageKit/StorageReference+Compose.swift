import Foundation
import Transport

/// Parallel composite uploads (https://cloud.google.com/storage/docs/parallel-composite-uploads):
/// pieces of one file go up side by side as objects of their own, then
/// `compose` (https://cloud.google.com/storage/docs/json_api/v1/objects/compose)
/// concatenates up to 32 of them into the destination in the store. The
/// JSON API only: Firebase's v0 API has no compose.
extension StorageReference {
    /// Uploads bytes `range` of the file at `path` as this object, in one
    /// multipart request whatever the size: a part that fails is sent
    /// again whole, so a resumable session would only add the round trip
    /// that starts it.
    /// `crc32c` (base64) goes in the object resource, so the server refuses
    /// bytes that do not match it. Content type application/octet-stream
    /// unless `metadata` says otherwise.
    public func putFile(
        atPath path: String, range: Range<Int64>, crc32c: String?, metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil
    ) async throws -> StorageMetadata {
        try self.path.validateForObject()
        let size = try Self.regularFileSize(path)
        guard range.lowerBound >= 0, range.upperBound <= size else {
            throw StorageError.invalidArgument("bytes \(range) are not all in \(path) (\(size) bytes)")
        }
        let effective = metadata?.copy() ?? StorageMetadata()
        if effective.contentType == nil { effective.contentType = ContentType.fallback }
        let uploader = Uploader(
            reference: self, source: .fileRegion(path: path, range: range), size: Int64(range.count), metadata: effective,
            ifGenerationMatch: ifGenerationMatch, crc32c: crc32c, oneRequest: true)
        let task = StorageUploadTask(reference: self, uploader: uploader)
        task.start()
        return try await task.completion()
    }

    /// Makes this object the concatenation of `sources` (1 to 32 objects
    /// of this bucket, in order), with `metadata`'s writable properties and
    /// custom metadata (its content type, else the one this name implies,
    /// as an upload would). `ifGenerationMatch` guards this object as an
    /// upload's does (0: only if absent). The sources stay; a composite
    /// object has a CRC32C and no MD5. `expectedCRC32C` (base64): when a
    /// resent request fails its precondition, the object is taken as the
    /// one the lost first attempt made if it has that checksum and size.
    @discardableResult
    public func compose(
        _ sources: [StorageReference], metadata: StorageMetadata? = nil, ifGenerationMatch: Int64? = nil,
        expectedCRC32C: String? = nil, expectedSize: Int64? = nil
    ) async throws -> StorageMetadata {
        let api = self.api
        guard api.dialect == .jsonAPI else {
            throw StorageError.invalidArgument("compose needs the Cloud Storage JSON API (Firebase's v0 API has none)")
        }
        guard (1...32).contains(sources.count) else {
            throw StorageError.invalidArgument("compose takes 1 to 32 source objects, not \(sources.count)")
        }
        try path.validateForObject()
        for source in sources {
            try source.path.validateForObject()
            guard source.bucket == bucket else {
                throw StorageError.invalidArgument("compose sources must be in gs://\(bucket), not gs://\(source.bucket)")
            }
        }
        let destination = uploadMetadata(metadata, nameForType: name).uploadJSON()
        let body: [String: Any] = [
            "kind": "storage#composeRequest",
            "destination": destination,
            "sourceObjects": sources.map { ["name": $0.fullPath] },
        ]
        let url = "\(api.bucketURL())/o/\(ObjectAPI.encode(fullPath))/compose"
            + ObjectAPI.query([("ifGenerationMatch", ifGenerationMatch.map(String.init))])
        let request = HTTPRequest(
            method: .post, url: url, headers: ["Content-Type": "application/json"],
            body: .bytes(ObjectAPI.jsonBody(body)), isIdempotent: ifGenerationMatch != nil)
        let response = try await api.send(request, object: fullPath, accepting: [412])
        if response.status == 412 {
            // As for uploads (`Uploader.multipart`): a resend failing its
            // precondition may have met the object its lost first attempt made.
            guard response.attempts > 1, let expectedCRC32C, let live = try? await getMetadata(),
                live.crc32c == expectedCRC32C, expectedSize.map({ $0 == live.size }) ?? true
            else {
                throw StorageError.from(response: response, bucket: api.bucket, object: fullPath)
            }
            return live
        }
        return try StorageMetadata(resource: ObjectAPI.json(response))
    }
}

extension Storage {
    /// The bucket's retention period in seconds (its `retentionPolicy`),
    /// nil when it has none: objects in such a bucket cannot be deleted
    /// before that age, so temporary objects would stay (and be billed).
    /// The JSON API only.
    public func retentionPeriod() async throws -> Int64? {
        let api = ObjectAPI(storage: self)
        guard api.dialect == .jsonAPI else {
            throw StorageError.invalidArgument("bucket metadata needs the Cloud Storage JSON API")
        }
        let url = api.bucketURL() + ObjectAPI.query([("fields", "retentionPolicy")])
        let json = try ObjectAPI.json(await api.send(HTTPRequest(method: .get, url: url, isIdempotent: true), object: nil))
        guard let policy = json["retentionPolicy"] as? [String: Any] else { return nil }
        // int64 fields are decimal strings in the JSON API.
        if let text = policy["retentionPeriod"] as? String { return Int64(text) ?? 0 }
        return (policy["retentionPeriod"] as? NSNumber)?.int64Value ?? 0
    }
}
