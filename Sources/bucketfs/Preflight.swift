import Foundation
import StorageKit

/// Before mounting: can the bucket be listed? A mount that would answer
/// every request with EIO is worse than a clear refusal now.
enum Preflight {
    static func check(storage: Storage, prefix: String, endpoint: URL) async throws {
        let reference = storage.reference().child(prefix)
        do {
            _ = try await reference.listPage(maxResults: 1, pageToken: nil)
        } catch let error as StorageError {
            throw explain(error, bucket: storage.bucket, endpoint: endpoint)
        } catch {
            throw CLIError.bucket("cannot list gs://\(storage.bucket): \(error)", exitCode: 1)
        }
    }

    static func explain(_ error: StorageError, bucket: String, endpoint: URL) -> CLIError {
        switch error {
        case .bucketNotFound:
            return .bucket("no such bucket: gs://\(bucket) (at \(endpoint.absoluteString))", exitCode: 2)
        case .unauthenticated(let m):
            return .bucket("credentials missing or refused for gs://\(bucket): \(m)", exitCode: 3)
        case .unauthorized(let m):
            return .bucket("permission denied listing gs://\(bucket): \(m)", exitCode: 3)
        case .retryLimitExceeded(let m):
            return .bucket("endpoint unreachable: \(endpoint.absoluteString) (\(m))", exitCode: 4)
        default:
            return .bucket("cannot list gs://\(bucket): \(error)", exitCode: 1)
        }
    }
}
