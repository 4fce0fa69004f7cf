import ArgumentParser
import Foundation
import StorageKit

/// `bucketfs ls gs://bucket[/prefix]`: one level of a bucket, as the
/// filesystem will show it (prefixes as directories, items as files).
struct ListCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ls", abstract: "List one level of a bucket: prefixes end in /, items show their size.",
        discussion: """
            Exit codes: 2 no such bucket, 3 credentials missing or refused, 4 endpoint unreachable, \
            1 other errors, 64 bad command line.
            """)

    @Argument(help: "gs://BUCKET[/PREFIX]")
    var url: String

    @OptionGroup var storageOptions: StorageOptions

    func validate() throws {
        do { _ = try BucketURL(url) } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let location = try BucketURL(url)
        let configuration = try storageOptions.configuration()
        let storage = Storage(bucket: location.bucket, configuration: configuration)
        do {
            let result = try await storage.reference().child(location.path).listAll()
            for prefix in result.prefixes { print("\(prefix.name)/") }
            for (item, metadata) in zip(result.items, result.itemMetadata) {
                print("\(item.name)\t\(metadata.size)")
            }
        } catch {
            throw StorageFailure.explain(error, "listing \(location)", bucket: location.bucket, endpoint: configuration.endpoint)
        }
    }
}
