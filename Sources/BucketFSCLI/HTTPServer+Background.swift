import FlyingFox
import Foundation
import Logging
import Synchronization

/// An HTTP server (FlyingFox) run in a task of its own: `start` returns
/// once it listens, or throws why it could not (address in use, not
/// allowed); FlyingFox's `run()` only returns when the server ends. An end
/// after `stop` is the clean shutdown (`run()` then throws the closed
/// socket's error) and is logged at debug level; any other end is an error.
final class BackgroundHTTPServer: Sendable {
    let server: HTTPServer
    private let name: String
    private let stopping = Atomic<Bool>(false)

    init(_ server: HTTPServer, name: String) {
        self.server = server
        self.name = name
    }

    func start(logger: Logger) async throws {
        let failure = Mutex<(any Error)?>(nil)
        Task {
            var cause = "the server ended by itself"
            do {
                try await server.run()
            } catch {
                failure.withLock { $0 = error }
                cause = "\(error)"
            }
            if stopping.load(ordering: .acquiring) {
                logger.debug("\(name) stopped")
            } else {
                logger.error("\(name) stopped", metadata: ["cause": "\(cause)"])
            }
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while await server.listeningAddress == nil {
            if let error = failure.withLock({ $0 }) { throw error }
            guard ContinuousClock.now < deadline else { throw CLIError.bucket("\(name) did not start listening within 10 s", exitCode: 1) }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    func stop() async {
        stopping.store(true, ordering: .releasing)
        await server.stop()
    }
}
