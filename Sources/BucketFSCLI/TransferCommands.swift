import ArgumentParser
import Foundation
import StorageKit
import Transport

/// Options of every transfer: `cp`, `put` and `get`.
struct TransferOptions: ParsableArguments {
    @Flag(inversion: .prefixedNo, help: "Show a progress bar on standard error (default: only when it is a terminal).")
    var progress: Bool?

    @Option(
        name: Settings.stallTimeout.long,
        help: ArgumentHelp("Seconds without progress before a request is abandoned and resumed or retried.", valueName: Settings.stallTimeout.valueName))
    var stallTimeout: Double = 30

    func validate() throws {
        guard stallTimeout > 0 else { throw ValidationError("--stall-timeout must be positive") }
    }

    /// The storage configuration of `storageOptions` over a transport
    /// with this command's stall timeout.
    func configuration(_ storageOptions: StorageOptions) throws -> StorageConfiguration {
        try storageOptions.configuration(transport: HTTPTransport(configuration: TransportConfiguration(
            stallTimeout: .milliseconds(Int(stallTimeout * 1000)))))
    }
}

/// Options of uploads only: `cp` (which may upload) and `put`.
struct UploadOptions: ParsableArguments {
    @Option(
        name: .customLong("chunk-size"),
        help: ArgumentHelp("Size of each request of a resumable upload, in MiB (files above 8 MiB are uploaded in chunks).", valueName: "MiB"))
    var chunkSizeMiB: Int = 16

    @Flag(inversion: .prefixedNo, help: "Go on with an upload of the same file to the same object that Ctrl-C interrupted, or start over.")
    var resume = true

    func validate() throws {
        guard (1...1024).contains(chunkSizeMiB) else { throw ValidationError("--chunk-size must be 1 to 1024 MiB") }
    }
}

/// `bucketfs cp SRC DST`: a local file to gs://BUCKET/OBJECT or back.
/// A destination that names no object (gs://BUCKET, or ends in `/`) or
/// is an existing local directory gets the source's file name.
///
/// Exit codes as every command's (docs/commands.md), and 130 interrupted
/// by Ctrl-C (an upload can be resumed by running the same command again;
/// a download's partial file is removed).
struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cp", abstract: "Copy a local file to gs://BUCKET/OBJECT or an object to a local file, with progress.",
        discussion: """
            Ctrl-C stops the transfer cleanly and exits 130. An interrupted upload keeps its resumable session: \
            the same command run again goes on from what the server holds (--no-resume starts over). An \
            interrupted download removes its partial file.

            Exit codes: 2 no such bucket, 3 credentials missing or refused, 4 endpoint unreachable, \
            1 other errors, 64 bad command line, 130 interrupted.
            """)

    @Argument(help: "Source: a local file or gs://BUCKET/OBJECT.") var source: String
    @Argument(help: "Destination: gs://BUCKET/OBJECT (or gs://BUCKET/DIR/) or a local file or directory.") var destination: String
    @OptionGroup var transfer: TransferOptions
    @OptionGroup(title: "Uploads") var upload: UploadOptions
    @OptionGroup var storageOptions: StorageOptions

    enum Plan {
        case upload(file: String, to: BucketURL)
        case download(from: BucketURL, to: String)
    }

    /// Which way the copy goes and the object it names, from the
    /// arguments alone.
    func plan() throws(CLIError) -> Plan {
        switch (BucketURL.isBucketSide(source), BucketURL.isBucketSide(destination)) {
        case (false, true):
            let url = try BucketURL(destination)
            guard url.path.isEmpty || destination.hasSuffix("/") else { return .upload(file: source, to: url) }
            let name = (source as NSString).lastPathComponent
            return .upload(file: source, to: try BucketURL("gs://\(url.bucket)/\(url.path.isEmpty ? "" : url.path + "/")\(name)"))
        case (true, false):
            return .download(from: try BucketURL.object(source), to: destination)
        default:
            throw CLIError.usage("one of SOURCE and DESTINATION must be gs://BUCKET/OBJECT and the other a local path")
        }
    }

    func validate() throws {
        do { _ = try plan() } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        switch try plan() {
        case .upload(let file, let url):
            try await Transfer.upload(file: file, to: url, transfer, upload, storageOptions)
        case .download(let url, let destination):
            try await Transfer.download(from: url, to: LocalTarget.file(destination, naming: url), transfer, storageOptions)
        }
    }
}

/// `bucketfs put FILE gs://BUCKET/OBJECT`: one StorageKit upload (multipart
/// or resumable by size), printing the stored size and generation.
struct PutCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put", abstract: "Upload a file with StorageKit's putFile (progress, Ctrl-C, resume and exit codes as cp).")

    @Argument(help: "Local file.") var file: String
    @Argument(help: "gs://BUCKET/OBJECT") var url: String
    @OptionGroup var transfer: TransferOptions
    @OptionGroup(title: "Uploads") var upload: UploadOptions
    @OptionGroup var storageOptions: StorageOptions

    func validate() throws {
        do { _ = try BucketURL.object(url, uploading: true) } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        try await Transfer.upload(file: file, to: try BucketURL.object(url, uploading: true), transfer, upload, storageOptions)
    }
}

/// `bucketfs get gs://BUCKET/OBJECT FILE [--range A-B]`: a whole, verified
/// download, or a ranged one pinned to the object's generation.
struct GetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get", abstract: "Download an object (whole or a byte range; progress, Ctrl-C and exit codes as cp).")

    @Argument(help: "gs://BUCKET/OBJECT") var url: String
    @Argument(help: "Local file to write (or a directory: the object's name in it).") var file: String
    @Option(help: ArgumentHelp("Bytes A-B (inclusive), read as one ranged request pinned to the generation.", valueName: "A-B"))
    var range: String?
    @OptionGroup var transfer: TransferOptions
    @OptionGroup var storageOptions: StorageOptions

    /// The range asked for, as a half-open range of offsets.
    func bytes() throws(CLIError) -> Range<Int64>? {
        guard let range else { return nil }
        let bounds = range.split(separator: "-", omittingEmptySubsequences: false).map { Int64($0) }
        guard bounds.count == 2, let first = bounds[0], let last = bounds[1], first >= 0, first <= last else {
            throw CLIError.usage("--range must be A-B, two offsets with A <= B (got \(range))")
        }
        return first..<(last + 1)
    }

    func validate() throws {
        do {
            _ = try BucketURL.object(url)
            _ = try bytes()
        } catch {
            throw ValidationError(error.description)
        }
    }

    func run() async throws {
        let object = try BucketURL.object(url)
        let file = LocalTarget.file(self.file, naming: object)
        guard let bytes = try bytes() else { return try await Transfer.download(from: object, to: file, transfer, storageOptions) }
        try await Transfer.download(from: object, range: bytes, to: file, transfer, storageOptions)
    }
}

extension BucketURL {
    /// A URL that names one object: not the bucket's root, not a folder.
    static func object(_ text: String, uploading: Bool = false) throws(CLIError) -> BucketURL {
        let url = try BucketURL(text)
        guard url.path.isEmpty || text.hasSuffix("/") else { return url }
        let named = "\(text) names \(url.path.isEmpty ? "the bucket's root" : "a folder"), not an object"
        guard uploading else { throw CLIError.usage("\(named): give gs://BUCKET/OBJECT") }
        let folder = text.hasSuffix("/") ? text : text + "/"
        throw CLIError.usage(
            "\(named): a file is uploaded to gs://BUCKET/OBJECT (`bucketfs cp FILE \(folder)` keeps the file's name)")
    }
}

/// Where a download goes on this machine.
enum LocalTarget {
    /// `path` itself, or the object's name in it when `path` is an
    /// existing directory or ends in `/` (one slash between them).
    static func file(_ path: String, naming object: BucketURL) -> String {
        var isDirectory: ObjCBool = false
        let directory = path.hasSuffix("/") || (FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && isDirectory.boolValue)
        guard directory else { return path }
        var trimmed = path
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed.removeLast() }
        let name = (object.path as NSString).lastPathComponent
        return trimmed == "/" ? "/" + name : trimmed + "/" + name
    }
}
