import ArgumentParser
import Foundation
import StorageKit

/// Where the bucket lives and how to authenticate: shared by every command.
struct StorageOptions: ParsableArguments {
    @Option(help: ArgumentHelp(
        "Cloud Storage JSON API endpoint, e.g. http://127.0.0.1:9023 for an emulator.",
        discussion: "Default: STORAGE_EMULATOR_HOST when set, else https://storage.googleapis.com."))
    var endpoint: String?

    @Option(name: .customLong("key-file"), help: "Service-account JSON key file.")
    var keyFile: String?

    @Option(name: .customLong("token-file"), help: "File holding an OAuth2 access token (re-read when it changes).")
    var tokenFile: String?

    @Flag(help: "Send no credentials (public buckets, emulators).")
    var anonymous = false

    func validate() throws {
        if [keyFile != nil, tokenFile != nil, anonymous].filter({ $0 }).count > 1 {
            throw ValidationError("choose one of --key-file, --token-file and --anonymous")
        }
    }

    func configuration() throws -> StorageConfiguration {
        var configuration = StorageConfiguration.fromEnvironment()
        let environment = ProcessInfo.processInfo.environment
        if let endpoint {
            guard let url = StorageConfiguration.emulatorURL(endpoint) else {
                throw ValidationError("--endpoint \(endpoint) is not a URL")
            }
            configuration.endpoint = url
        }
        do {
            if let keyFile {
                configuration.credentials = try ServiceAccountCredentials(keyFile: keyFile)
            } else if let tokenFile {
                configuration.credentials = StaticTokenCredentials(tokenFile: tokenFile)
            } else if !anonymous, endpoint == nil, environment["STORAGE_EMULATOR_HOST"] == nil {
                configuration.credentials = try Credentials.fromEnvironment(environment)
            }
        } catch {
            throw CLIError.bucket("credentials: \(error)", exitCode: 3)
        }
        return configuration
    }
}
