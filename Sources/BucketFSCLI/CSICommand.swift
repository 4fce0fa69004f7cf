import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `bucketfs csi …`: the Kubernetes CSI driver, which is the executable
/// `bucketfs-csi` installed beside `bucketfs`. It is a program of its own
/// so that gRPC is never built into, nor loaded by, a plain mount; this
/// command runs it in its place with the same arguments.
struct CSICommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "csi",
        abstract: "Serve the Kubernetes CSI driver (Identity, Controller and Node) on a Unix socket.",
        discussion: """
            Runs bucketfs-csi, installed next to bucketfs, with these arguments: \
            bucketfs csi --endpoint unix:///csi/csi.sock --node-id NODE [--driver-name NAME] [--mode all|controller|node]. \
            See docs/kubernetes.md, or bucketfs csi --help-csi for its options.
            """)

    @Argument(parsing: .allUnrecognized, help: "The arguments of bucketfs-csi.")
    var arguments: [String] = []

    func run() throws {
        let executable = Self.driverExecutable()
        let forwarded = arguments.map { $0 == "--help-csi" ? "--help" : $0 }
        // strdup'd copies live until execv returns (only on failure), so
        // the pointers handed over stay valid for the whole call.
        let argv = ([executable] + forwarded).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        execv(executable, argv)
        let cause = String(cString: strerror(errno))
        throw CLIError.bucket(
            "cannot run \(executable): \(cause) (bucketfs-csi is installed beside bucketfs: swift build --product bucketfs-csi, or scripts/install.sh)",
            exitCode: 1)
    }

    /// `bucketfs-csi` in the directory of this executable.
    static func driverExecutable() -> String {
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: own).deletingLastPathComponent().appendingPathComponent("bucketfs-csi").path
    }
}
