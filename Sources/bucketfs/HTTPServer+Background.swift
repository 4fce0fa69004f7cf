import FlyingFox
import Foundation
import Logging
import Synchronization

extension HTTPServer {
    /// Runs the server in a task of its own and returns once it listens,
    /// or throws why it could not (address in use, not allowed): FlyingFox's
    /// `run()` only returns when the server ends.
    func startInBackground(name: String, logger: Logger) async throws {
        let failure = Mutex<(any Error)?>(nil)
        Task {
            do {
                try await run()
            } catch {
                failure.withLock { $0 = error }
                logger.error("\(name) stopped", metadata: ["cause": "\(error)"])
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while listeningAddress == nil {
            if let error = failure.withLock({ $0 }) { throw error }
            guard ContinuousClock.now < deadline else { throw CLIError.bucket("\(name) did not start listening within 10 s", exitCode: 1) }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
