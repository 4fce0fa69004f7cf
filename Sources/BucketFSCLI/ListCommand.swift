import ArgumentParser
import Foundation
import StorageKit

/// `bucketfs ls gs://bucket[/prefix]`: one level of a bucket, as the
/// filesystem will show it (prefixes as directories, items as files).
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List one level of a bucket: prefixes end in /, items show their size.")

    @Argument(help: "gs://BUCKET[/PREFIX]")
    var url: String

    @OptionGroup var storageOptions: StorageOptions

    func run() async throws {
        let configuration = try storageOptions.configuration()
        let storage = Storage.storage(url: url, configuration: configuration)
        let reference = try storage.reference(validatingURL: url)
        do {
            let result = try await reference.listAll()
            for prefix in result.prefixes { print("\(prefix.name)/") }
            for (item, metadata) in zip(result.items, result.itemMetadata) {
                print("\(item.name)\t\(metadata.size)")
            }
        } catch let error as StorageError {
            throw ValidationError("\(url): \(error)")
        }
    }
}
