import Foundation

/// Copy where the server has none (Firebase's v0): download, then upload.
extension StorageReference {
    /// Copies this object to `destination` through this process: its
    /// metadata is read, its bytes downloaded to a temporary file (checked
    /// against that metadata's CRC32C, so they are that generation's, else
    /// `preconditionFailed`) and uploaded with the same content type,
    /// standard properties, MD5 and custom metadata. `ifSourceGenerationMatch`
    /// is checked against the metadata read; `ifGenerationMatch` as every
    /// v0 upload checks it (by reading first). Not atomic: the destination
    /// is a new object (its own timeCreated and download token), and a
    /// failure can leave it absent or complete, never partial.
    func copyThroughClient(
        to destination: StorageReference, ifGenerationMatch: Int64?, ifSourceGenerationMatch: Int64?
    ) async throws -> StorageMetadata {
        let source = try await getMetadata()
        if let expected = ifSourceGenerationMatch, expected != source.generation {
            throw StorageError.preconditionFailed(
                "\(self): generation is \(source.generation), not \(expected) (checked by reading first)")
        }
        // Fail before moving any bytes if the destination already fails.
        try await api.checkPrecondition(of: destination.fullPath, ifGenerationMatch: ifGenerationMatch)
        let temporary = FileManager.default.temporaryDirectory.path + "/storagekit-copy-\(UUID().uuidString)"
        defer { unlink(temporary) }
        do {
            try await download(
                toFile: temporary, generation: source.generation,
                expecting: ObjectHashes(crc32c: source.crc32c, md5: nil))
        } catch StorageError.nonMatchingChecksum {
            throw StorageError.preconditionFailed("\(self) changed while it was being copied")
        }
        // An upload sends the writable properties only (the source's MD5
        // among them, which the server checks against the bytes).
        return try await destination.putFileAsync(
            from: URL(fileURLWithPath: temporary), metadata: source, ifGenerationMatch: ifGenerationMatch)
    }
}
