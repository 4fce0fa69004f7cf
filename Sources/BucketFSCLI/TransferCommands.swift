import ArgumentParser
import Foundation
import StorageKit
import Transport

/// Options of `cp`, `put` and `get`.
struct TransferOptions: ParsableArguments {
    @Flag(inversion: .prefixedNo, help: "Show a progress bar on standard error (default: only when it is a terminal).")
    var progress: Bool?

    @Option(name: .customLong("chunk-size"), help: "Size of each request of a resumable upload, in MiB (files above 8 MiB are uploaded in chunks).")
    var chunkSizeMiB: Int = 16

    @Flag(inversion: .prefixedNo, help: "Go on with an upload of the same file to the same object that Ctrl-C interrupted (default), or start over.")
    var resume = true

    @Option(name: Settings.stallTimeout.long, help: "Seconds without progress before a request is abandoned and resumed or retried.")
    var stallTimeout: Double = 30

    func validate() throws {
        guard (1...1024).contains(chunkSizeMiB) else { throw ValidationError("--chunk-size must be 1 to 1024 MiB") }
        guard stallTimeout > 0 else { throw ValidationError("--stall-timeout must be positive") }
    }

    /// The storage configuration of `storageOptions` over a transport
    /// with this command's stall timeout.
    func configuration(_ storageOptions: StorageOptions) throws -> StorageConfiguration {
        try storageOptions.configuration(transport: HTTPTransport(configuration: TransportConfiguration(
            stallTimeout: .milliseconds(Int(stallTimeout * 1000)))))
    }
}

/// `bucketfs cp SRC DST`: a local file to gs://BUCKET/OBJECT or back.
/// A destination ending in `/` (or an existing local directory) gets the
/// source's file name.
///
/// Exit codes: 0 done; 1 the transfer failed; 64 bad command line;
/// 130 interrupted by Ctrl-C (an upload can be resumed by running the same
/// command again; a download's partial file is removed).
struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cp", abstract: "Copy a local file to gs://BUCKET/OBJECT or an object to a local file, with progress.",
        discussion: """
            Ctrl-C stops the transfer cleanly and exits 130. An interrupted upload keeps its resumable session: \
            the same command run again goes on from what the server holds (--no-resume starts over). An \
            interrupted download removes its partial file.
            """)

    @Argument(help: "Source: a local file or gs://BUCKET/OBJECT.") var source: String
    @Argument(help: "Destination: gs://BUCKET/OBJECT (or gs://BUCKET/DIR/) or a local file or directory.") var destination: String
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var storageOptions: StorageOptions

    func run() async throws {
        switch (source.hasPrefix("gs://"), destination.hasPrefix("gs://")) {
        case (false, true):
            let url = destination.hasSuffix("/") ? destination + (source as NSString).lastPathComponent : destination
            try await Transfer.upload(file: source, to: url, transfer, storageOptions)
        case (true, false):
            var file = destination
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory), isDirectory.boolValue {
                file += "/" + (source as NSString).lastPathComponent
            }
            try await Transfer.download(from: source, to: file, transfer, storageOptions)
        default:
            throw ValidationError("one of SOURCE and DESTINATION must be gs://BUCKET/OBJECT and the other a local path")
        }
    }
}

/// `bucketfs put FILE gs://BUCKET/OBJECT`: one StorageKit upload (multipart
/// or resumable by size), printing the stored size and generation.
struct PutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put", abstract: "Upload a file with StorageKit's putFile (progress, Ctrl-C and resume as cp).")

    @Argument(help: "Local file.") var file: String
    @Argument(help: "gs://BUCKET/OBJECT") var url: String
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var storageOptions: StorageOptions

    func run() async throws {
        try await Transfer.upload(file: file, to: url, transfer, storageOptions)
    }
}

/// `bucketfs get gs://BUCKET/OBJECT FILE [--range A-B]`: a whole, verified
/// download, or a ranged one pinned to the object's generation.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Download an object (whole or a byte range; progress and Ctrl-C as cp).")

    @Argument(help: "gs://BUCKET/OBJECT") var url: String
    @Argument(help: "Local file to write.") var file: String
    @Option(help: "Bytes A-B (inclusive), read as one ranged request pinned to the generation.") var range: String?
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var storageOptions: StorageOptions

    func run() async throws {
        guard let range else { return try await Transfer.download(from: url, to: file, transfer, storageOptions) }
        let storage = Storage.storage(url: url, configuration: try transfer.configuration(storageOptions))
        let reference = try storage.reference(validatingURL: url)
        do {
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
        } catch let error as StorageError {
            throw ValidationError("\(url): \(error)")
        }
    }
}
