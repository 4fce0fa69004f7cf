import Foundation
import Logging
import StorageKit

/// Before mounting: can the bucket be listed? A mount that would answer
/// every request with EIO is worse than a clear refusal now.
///
/// A Firebase user (Security Rules) often may not list the top of a
/// mount: a refusal there means the sign-in worked and the bucket exists,
/// so the mount goes ahead and says what the rules allow.
///
/// It waits at most `patience` (or the transport's own retry budget, if
/// shorter): a mistyped endpoint should not hold `mount` for the minute a
/// request of a running mount may spend retrying.
enum Preflight {
    static let patience: Duration = .seconds(15)

    static func check(storage: Storage, prefix: String, endpoint: URL, logger: Logger) async throws {
        let reference = storage.reference().child(prefix)
        let firebase = storage.configuration.credentials as? FirebaseAuthCredentials
        let listing = Task { try await reference.listPage(maxResults: 1, pageToken: nil) }
        let deadline = Task {
            try await Task.sleep(for: patience)
            listing.cancel()
        }
        defer { deadline.cancel() }
        do {
            _ = try await listing.value
        } catch StorageError.cancelled {
            throw CLIError.bucket("endpoint unreachable: \(endpoint.absoluteString) (no answer within \(Int(patience.seconds)) s)", exitCode: 4)
        } catch StorageError.unauthorized(let message) where firebase != nil {
            logger.notice("the Security Rules do not let this user list gs://\(storage.bucket)/\(prefix); paths they allow can still be reached by name", metadata: ["cause": "\(message)"])
        } catch let error as StorageError {
            throw explain(error, bucket: storage.bucket, endpoint: endpoint)
        } catch {
            throw CLIError.bucket("cannot list gs://\(storage.bucket): \(error)", exitCode: 1)
        }
        if let user = firebase?.currentUser {
            logger.info("signed in to Firebase Auth", metadata: ["uid": "\(user.uid)", "email": "\(user.email ?? "-")"])
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
