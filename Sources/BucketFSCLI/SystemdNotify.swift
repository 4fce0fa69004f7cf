import FlyingSocks
import Foundation
import Logging

/// systemd's readiness protocol (sd_notify) for `Type=notify` units: when
/// systemd starts the mount it sets NOTIFY_SOCKET, and bucketfs sends
/// `READY=1` once the mount answers, `RELOADING=1`…`READY=1` around a cache
/// drop (ExecReload sends SIGHUP), and `STOPPING=1` when it unmounts.
/// Without NOTIFY_SOCKET nothing is sent.
struct SystemdNotify: Sendable {
    let socketPath: String?
    let logger: Logger

    init(environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger) {
        socketPath = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        self.logger = logger
        // Children (fusermount3) must not report as if they were the service.
        unsetenv("NOTIFY_SOCKET")
    }

    func send(_ state: String) {
        guard let socketPath else { return }
        // "@name" is a socket in Linux's abstract namespace.
        let address = socketPath.hasPrefix("@")
            ? sockaddr_un.unix(abstractNamespace: String(socketPath.dropFirst()))
            : sockaddr_un.unix(path: socketPath)
        do {
            let socket = try Socket(domain: AF_UNIX, type: .datagram)
            defer { try? socket.close() }
            _ = try socket.send(Array(state.utf8), to: address)
        } catch {
            logger.warning("cannot notify systemd", metadata: ["socket": "\(socketPath)", "state": "\(state)", "cause": "\(error)"])
        }
    }

    static func mainPID() -> String { "MAINPID=\(getpid())" }
}
