import ArgumentParser
import Foundation
import StorageKit

/// `bucketfs put FILE gs://BUCKET/OBJECT`: one StorageKit upload (multipart
/// or resumable by size), printing the stored size and generation.
struct PutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "put", abstract: "Upload a file with StorageKit's putFile.")

    @Argument(help: "Local file.") var file: String
    @Argument(help: "gs://BUCKET/OBJECT") var url: String
    @OptionGroup var storageOptions: StorageOptions

    func run() async throws {
        let storage = Storage.storage(url: url, configuration: try storageOptions.configuration())
        let reference = try storage.reference(validatingURL: url)
        do {
            let stored = try await reference.putFileAsync(from: URL(fileURLWithPath: file))
            print("\(stored.fullPath)\t\(stored.size) bytes\tgeneration \(stored.generation)")
        } catch let error as StorageError {
            throw ValidationError("\(url): \(error)")
        }
    }
}

/// `bucketfs get gs://BUCKET/OBJECT FILE [--range A-B]`: a whole, verified
/// download, or a ranged one pinned to the object's generation.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "get", abstract: "Download an object (whole or a byte range).")

    @Argument(help: "gs://BUCKET/OBJECT") var url: String
    @Argument(help: "Local file to write.") var file: String
    @Option(help: "Bytes A-B (inclusive), read as one ranged request pinned to the generation.") var range: String?
    @OptionGroup var storageOptions: StorageOptions

    func run() async throws {
        let storage = Storage.storage(url: url, configuration: try storageOptions.configuration())
        let reference = try storage.reference(validatingURL: url)
        do {
            if let range {
                let bounds = range.split(separator: "-").compactMap { Int64($0) }
                guard bounds.count == 2, bounds[0] <= bounds[1] else { throw ValidationError("--range must be A-B") }
                let generation = try await reference.getMetadata().generation
                guard FileManager.default.createFile(atPath: file, contents: nil),
                      let handle = FileHandle(forWritingAtPath: file) else {
                    throw ValidationError("cannot create \(file)")
                }
                defer { try? handle.close() }
                let received = try await reference.read(range: bounds[0]..<(bounds[1] + 1), generation: generation) { bytes in
                    try handle.write(contentsOf: bytes)
                }
                print("\(received) bytes")
            } else {
                try await reference.write(toFile: URL(fileURLWithPath: file))
            }
        } catch let error as StorageError {
            throw ValidationError("\(url): \(error)")
        }
    }
}
