import Foundation
import Logging
import StorageKit
import Synchronization
import Transport

/// Before mounting: can the bucket be listed? A mount that would answer
/// every request with EIO is worse than a clear refusal now.
///
/// A Firebase user (Security Rules) often may not list the top of a
/// mount: a refusal there means the sign-in worked and the bucket exists,
/// so the mount goes ahead and says what the rules allow.
///
/// It waits at most `patience` in all (or the transport's own retry
/// budget, if shorter): a mistyped endpoint should not hold `mount` for
/// the minute a request of a running mount may spend retrying. A Firebase
/// user signs in first, within the same bound, so that an unreachable Auth
/// endpoint is exit 4 like an unreachable storage endpoint, and refused
/// credentials exit 3.
enum Preflight {
    static let patience: Duration = .seconds(15)

    /// `credentialsHint` ends the message of credentials that are missing
    /// or refused (`StorageOptions.credentialsHint`).
    static func check(storage: Storage, prefix: String, endpoint: URL, credentialsHint: String? = nil, logger: Logger) async throws {
        let deadline = ContinuousClock.now + patience
        let firebase = storage.configuration.credentials as? FirebaseAuthCredentials
        if let firebase {
            let auth = firebase.auth.identityToolkitBase
            switch await outcome(by: deadline, { try await firebase.idToken() }) {
            case nil:
                throw CLIError.bucket("Firebase Auth endpoint unreachable: \(auth) (no answer within \(Int(patience.seconds)) s)", exitCode: 4)
            case .failure(let error as TransportError)?:
                throw CLIError.bucket("Firebase Auth endpoint unreachable: \(auth) (\(error))", exitCode: 4)
            case .failure(let error)?:
                throw explain(StorageError.unauthenticated(String(describing: error)), bucket: storage.bucket, endpoint: endpoint, credentialsHint: credentialsHint)
            case .success?:
                break
            }
        }
        let reference = storage.reference().child(prefix)
        switch await outcome(by: deadline, { try await reference.listPage(maxResults: 1, pageToken: nil) }) {
        case nil, .failure(StorageError.cancelled)?:
            throw CLIError.bucket("endpoint unreachable: \(endpoint.absoluteString) (no answer within \(Int(patience.seconds)) s)", exitCode: 4)
        case .failure(StorageError.unauthorized(let message))? where firebase != nil:
            logger.notice("the Security Rules do not let this user list gs://\(storage.bucket)/\(prefix); paths they allow can still be reached by name", metadata: ["cause": "\(message)"])
        case .failure(let error)?:
            throw explain(error, bucket: storage.bucket, endpoint: endpoint, credentialsHint: credentialsHint)
        case .success?:
            break
        }
        if let user = firebase?.currentUser {
            logger.info("signed in to Firebase Auth", metadata: ["uid": "\(user.uid)", "email": "\(user.email ?? "-")"])
        }
    }

    static func explain(_ error: any Error, bucket: String, endpoint: URL, credentialsHint: String? = nil) -> CLIError {
        StorageFailure.explain(error, "listing gs://\(bucket)", bucket: bucket, endpoint: endpoint, credentialsHint: credentialsHint)
    }

    /// What `work` gives, or nil when `deadline` passes first. The work is
    /// then cancelled but not waited for: a token fetch is shared by every
    /// request and runs on unstructured (so it does not stop when one
    /// caller is cancelled), and the answer must not wait for its retries.
    static func outcome<T: Sendable>(
        by deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error>? {
        let task = Task { try await work() }
        let first = FirstAnswer<Result<T, any Error>?>()
        let answer = await withCheckedContinuation { continuation in
            first.wait(continuation)
            Task { first.give(await task.result) }
            Task {
                try? await Task.sleep(until: deadline)
                first.give(nil)
            }
        }
        if answer == nil { task.cancel() }
        return answer
    }
}

/// Resumes a continuation with the first of several answers.
private final class FirstAnswer<T: Sendable>: Sendable {
    private let continuation = Mutex<CheckedContinuation<T, Never>?>(nil)

    func wait(_ continuation: CheckedContinuation<T, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func give(_ answer: T) {
        continuation.withLock { $0.take() }?.resume(returning: answer)
    }
}
