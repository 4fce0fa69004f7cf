import BucketFSCLI
import ArgumentParser
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2Posix
import Logging
import Synchronization
import Transport
#if canImport(Glibc)
import Glibc
#endif

/// `bucketfs csi` (the `bucketfs-csi` executable): serves CSI v1 over gRPC
/// on a Unix socket, as kubelet (the node plugin, through the
/// node-driver-registrar) and csi-provisioner (the controller) expect.
struct CSICommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bucketfs csi",
        abstract: "Serve the bucketfs CSI driver (Identity, Controller, Node) over gRPC on a Unix socket.",
        discussion: """
            The node service mounts volumes through `bucketfs fuse-fd-mount` (root opens /dev/fuse and mounts; \
            the mount is served as --mount-uid). A volume is a bucket, or a prefix of one: see docs/kubernetes.md.
            """,
        version: bucketfsVersion)

    enum Mode: String, ExpressibleByArgument, CaseIterable {
        case all, controller, node
    }

    @Option(help: "unix:///PATH/csi.sock: the socket to serve on (made anew; its directory must exist).")
    var endpoint: String

    @Option(help: "This node's name, as NodeGetInfo reports it (required with the node service).")
    var nodeID: String?

    @Option(help: "The driver's name (GetPluginInfo); the CSIDriver object and StorageClasses use the same.")
    var driverName: String = IdentityService.defaultDriverName

    @Option(help: "Which services to serve besides Identity: all, controller or node.")
    var mode: Mode = .all

    @Option(help: "The user the mount processes run as (root unless given).")
    var mountUID: UInt32 = 0

    @Option(help: "The group the mount processes run as.")
    var mountGID: UInt32 = 0

    @Option(help: "The plugin's state: publication records, secret files (0600), mount logs. A tmpfs, so secrets never reach a disk.")
    var stateDir: String = "/run/bucketfs-csi"

    @Option(help: "Where each published volume gets its cache directory.")
    var cacheRoot: String = "/var/cache/bucketfs-csi"

    @Option(help: "The bucketfs executable that runs the mounts (the one beside bucketfs-csi unless given).")
    var bucketfs: String?

    @Option(help: "How long, in seconds, a publish waits for its mount to serve.")
    var mountTimeout: Int = 120

    @Option(help: "trace, debug, info, notice, warning, error or critical.")
    var logLevel: String = "info"

    func validate() throws {
        guard socketPath != nil else { throw ValidationError("--endpoint \(endpoint) is not unix:///PATH") }
        guard mode == .controller || !(nodeID ?? "").isEmpty else { throw ValidationError("--node-id is required with the node service") }
        guard Self.isDriverName(driverName) else {
            throw ValidationError("--driver-name \(driverName): at most 63 characters of a-z, 0-9, '-' and '.', starting and ending with a letter or digit")
        }
        guard Logger.Level(rawValue: logLevel) != nil else { throw ValidationError("--log-level \(logLevel) is not a level") }
        guard mountTimeout > 0 else { throw ValidationError("--mount-timeout must be positive") }
    }

    /// The CSI spec's plugin name rule (a domain name, reverse notation allowed).
    static func isDriverName(_ name: String) -> Bool {
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-.")
        return (1...63).contains(name.count) && name.allSatisfy(allowed.contains)
            && name.first.map { $0.isLetter || $0.isNumber } == true && name.last.map { $0.isLetter || $0.isNumber } == true
    }

    var socketPath: String? {
        guard endpoint.hasPrefix("unix://") else { return nil }
        let path = String(endpoint.dropFirst("unix://".count))
        return path.hasPrefix("/") ? path : nil
    }

    func run() async throws {
        let level = Logger.Level(rawValue: logLevel) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let logger = Logger(label: "bucketfs.csi")
        guard let socketPath else { throw ExitCode(64) }
        let state = try StateDirectory(root: stateDir, cacheRoot: cacheRoot)
        var services: [any RegistrableRPCService] = [IdentityService(driverName: driverName)]
        if mode != .node {
            services.append(ControllerService(credentials: RequestCredentials(secretsDirectory: state.root + "/secrets"), logger: logger))
        }
        if mode != .controller, let nodeID {
            let mounts = TargetMounts(
                bucketfs: bucketfs ?? OwnExecutable.sibling("bucketfs"), uid: mountUID, gid: mountGID, mountTimeout: .seconds(mountTimeout))
            services.append(NodeService(nodeID: nodeID, mounts: mounts, state: state, logger: logger))
        }
        // A socket left by an earlier run would make the bind fail.
        if unlink(socketPath) != 0 && errno != ENOENT {
            throw CSIStartError(description: "cannot remove the old socket \(socketPath): \(String(cString: strerror(errno)))")
        }
        let server = GRPCServer(
            transport: .http2NIOPosix(address: .unixDomainSocket(path: socketPath), transportSecurity: .plaintext),
            services: services)
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { try await server.serve() }
            if try await server.listeningAddress != nil {
                // Only the plugin's user may talk to it (kubelet runs as root).
                chmod(socketPath, 0o600)
                logger.notice("serving", metadata: [
                    "endpoint": "\(endpoint)", "driver": "\(driverName)", "version": "\(bucketfsVersion)", "mode": "\(mode.rawValue)",
                ])
            }
            group.addTask {
                await Self.waitForTermination()
                logger.notice("stopping")
                server.beginGracefulShutdown()
            }
        }
    }

    /// Returns at SIGTERM or SIGINT (kubelet stops a container with SIGTERM).
    static func waitForTermination() async {
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let sources = [SIGTERM, SIGINT].map { DispatchSource.makeSignalSource(signal: $0) }
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let once = OnceFlag()
            for source in sources {
                source.setEventHandler { if once.claim() { continuation.resume() } }
                source.resume()
            }
        }
        sources.forEach { $0.cancel() }
    }
}

struct CSIStartError: Error, CustomStringConvertible {
    let description: String
}

/// True for the first caller only (two signals must resume once).
private final class OnceFlag: Sendable {
    private let claimed = Mutex(false)
    func claim() -> Bool { claimed.withLock { was in defer { was = true }; return !was } }
}

/// The entry point of `bucketfs-csi`.
public enum CSIMain {
    public static func run() async -> Never {
        do {
            // --help parses to ArgumentParser's own help command, not ours.
            var command = try CSICommand.parseAsRoot()
            if var server = command as? CSICommand {
                try await server.run()
            } else {
                try command.run()
            }
            CSICommand.exit()
        } catch let error as CSIStartError {
            FileHandle.standardError.write(Data("bucketfs csi: \(error)\n".utf8))
            CSICommand.exit(withError: ExitCode(1))
        } catch {
            // --help, --version and usage errors, in ArgumentParser's words:
            // help and version on stdout, errors on stderr.
            let code = CSICommand.exitCode(for: error)
            let message = CSICommand.fullMessage(for: error)
            if !message.isEmpty {
                (code == .success ? FileHandle.standardOutput : FileHandle.standardError).write(Data((message + "\n").utf8))
            }
            CSICommand.exit(withError: code)
        }
    }
}
