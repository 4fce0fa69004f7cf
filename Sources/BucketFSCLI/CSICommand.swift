import ArgumentParser

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
            See docs/kubernetes.md, or bucketfs csi --help for its options.
            """)

    @Argument(parsing: .allUnrecognized, help: "The arguments of bucketfs-csi.")
    var arguments: [String] = []

    func run() throws {
        try Self.exec(arguments)
    }

    /// Replaces this process with bucketfs-csi; returns only by throwing.
    /// `BucketFSMain` calls it before parsing, so that `bucketfs csi --help`
    /// is bucketfs-csi's help rather than this stand-in's.
    static func exec(_ arguments: [String]) throws(CLIError) -> Never {
        let executable = OwnExecutable.sibling("bucketfs-csi")
        try OwnExecutable.exec(
            executable, [executable] + arguments,
            hint: " (bucketfs-csi is installed beside bucketfs: swift build --product bucketfs-csi)")
    }
}
