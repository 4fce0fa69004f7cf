import Foundation
import StorageKit

/// What a failed request means to the user, in words and in the exit codes
/// every command shares (docs/commands.md): 2 no such bucket, 3 credentials
/// missing, refused or not allowed, 4 endpoint unreachable, 1 anything
/// else. `mount`'s preflight and the copy and list commands all explain
/// their failures here, so one cause has one code and one wording, and no
/// SDK error domain or code reaches the user.
enum StorageFailure {
    /// `error` (any error StorageKit hands out, bridged or not) of a
    /// request on `bucket`; `action` says what was being done ("listing
    /// gs://b", "uploading to gs://b/o"); `credentialsHint` ends the
    /// message of missing or refused credentials (for a local endpoint:
    /// add --anonymous).
    static func explain(_ error: any Error, _ action: String, bucket: String, endpoint: URL, credentialsHint: String? = nil) -> CLIError {
        switch StorageError(error) {
        case .bucketNotFound:
            return .bucket("no such bucket: gs://\(bucket) (at \(endpoint.absoluteString))", exitCode: 2)
        case .unauthenticated(let m):
            let hint = credentialsHint.map { "; \($0)" } ?? ""
            return .bucket("credentials missing or refused for gs://\(bucket): \(m)\(hint)", exitCode: 3)
        case .unauthorized(let m):
            return .bucket("permission denied \(action): \(m)", exitCode: 3)
        case .retryLimitExceeded(let m):
            return .bucket("endpoint unreachable: \(endpoint.absoluteString) (\(m))", exitCode: 4)
        case .objectNotFound(let path):
            return .bucket("no such object: gs://\(bucket)/\(path)", exitCode: 1)
        case let other:
            // StorageError's own words: no domain, no code, secrets redacted.
            return .bucket("\(action) failed: \(other)", exitCode: 1)
        }
    }
}
