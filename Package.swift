// swift-tools-version:6.0
import PackageDescription

// Layers, each its own module; dependencies point down:
//   bucketfs -> BucketFSCLI (the command line) -> FuseBridge -> FSCore -> StorageKit -> Transport
//   CFuse and CCurl are the C interop: only FuseBridge imports CFuse, only
//   Transport imports CCurl. CChecksum is C of our own, CRC-32C with the
//   CPU's instruction (Swift cannot emit it); only StorageKit imports it.
//   CMappedBytes (on CChecksum) reads file mappings with a fault turned into
//   an error (a SIGBUS handler, which Swift cannot write); only FSCore
//   imports it, for the block cache's chunk files.
//   bucketfs-csi -> CSIDriver (the Kubernetes CSI driver over gRPC) -> BucketFSCLI:
//   a program of its own, so gRPC is never built into or loaded by `bucketfs`.
let package = Package(
    name: "bucketfs",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "StorageKit", targets: ["StorageKit"]),
        .executable(name: "bucketfs", targets: ["bucketfs"]),
        .executable(name: "bucketfs-csi", targets: ["bucketfs-csi"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0"),
        // FilePath, which swift-configuration's FileProvider takes.
        .package(url: "https://github.com/apple/swift-system", from: "1.5.0"),
        .package(url: "https://github.com/swhitty/FlyingFox", from: "0.27.1"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.6.0"),
        // The CSI driver's gRPC server (CSIDriver only).
        .package(url: "https://github.com/grpc/grpc-swift-2", from: "2.4.3"),
        .package(url: "https://github.com/grpc/grpc-swift-nio-transport", from: "2.9.2"),
        .package(url: "https://github.com/grpc/grpc-swift-protobuf", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        // Parses the Kubernetes manifests in CSITests.
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .target(
            name: "Transport",
            dependencies: [
                "CCurl",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        .target(name: "CChecksum"),
        .target(name: "CMappedBytes", dependencies: ["CChecksum"]),
        .target(
            name: "StorageKit",
            dependencies: [
                "Transport",
                "CChecksum",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .systemLibrary(
            name: "CFuse",
            pkgConfig: "fuse3",
            providers: [.apt(["libfuse3-dev"])]
        ),
        .target(
            name: "FSCore",
            dependencies: [
                "StorageKit",
                "CMappedBytes",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "DequeModule", package: "swift-collections"),
            ]
        ),
        // Test doubles of the core (the in-memory store, its conformance
        // suite, a manual clock) for the test targets; the product never
        // links it.
        .target(name: "FSCoreTesting", dependencies: ["FSCore", "StorageKit"]),
        // Helpers every test target shares (free ports, seeded generators,
        // the environment scripts/test.sh exports, the documentation's
        // fenced blocks); depends on nothing.
        .target(name: "TestSupport", path: "Tests/TestSupport"),
        // The tests' own client of the test servers (DirectGCS): plain HTTP
        // to what a server holds and to the requests it logged, bypassing
        // StorageKit, for the suites that check results on the server.
        .target(name: "TestServerClient", dependencies: ["Transport", "TestSupport"], path: "Tests/TestServerClient"),
        .target(
            name: "FuseBridge",
            dependencies: [
                "CFuse",
                "FSCore",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ]
        ),
        // The command line: its commands and the settings model, a library so
        // CLITests can test them without a mount; `bucketfs` only calls it.
        .target(
            name: "BucketFSCLI",
            dependencies: [
                "StorageKit",
                "FSCore",
                "FuseBridge",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "FlyingFox", package: "FlyingFox"),
                .product(name: "FlyingSocks", package: "FlyingFox"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "SystemPackage", package: "swift-system"),
            ]
        ),
        .executableTarget(name: "bucketfs", dependencies: ["BucketFSCLI"]),
        // The Kubernetes CSI driver: Identity, Controller and Node over gRPC
        // on a Unix socket. Its message and service code is generated once
        // from Proto/csi.proto (scripts/generate-csi.sh) and committed.
        .target(
            name: "CSIDriver",
            dependencies: [
                "BucketFSCLI",
                "FSCore",
                "StorageKit",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
                .product(name: "SwiftProtobuf", package: "swift-protobuf"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["Proto"]
        ),
        .executableTarget(name: "bucketfs-csi", dependencies: ["CSIDriver"]),
        // <sys/xattr.h> for tests that call the xattr syscalls themselves.
        .systemLibrary(name: "CXattr", path: "Tests/CXattr"),
        .testTarget(name: "TransportTests", dependencies: ["Transport", "TestSupport"]),
        .testTarget(name: "FSCoreTests", dependencies: ["FSCore", "FSCoreTesting", "TestSupport", "StorageKit", "CXattr"]),
        .testTarget(
            name: "FuseBridgeTests",
            dependencies: ["FuseBridge", "FSCore", "CXattr", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "CLITests", dependencies: ["BucketFSCLI", "StorageKit", "TestSupport"]),
        .testTarget(
            name: "MountTests",
            dependencies: [
                "StorageKit", "Transport", "FSCore", "FSCoreTesting", "TestSupport", "TestServerClient", "CXattr", "CSIDriver",
                .product(name: "GRPCCore", package: "grpc-swift-2"),
                .product(name: "GRPCNIOTransportHTTP2Posix", package: "grpc-swift-nio-transport"),
                .product(name: "GRPCProtobuf", package: "grpc-swift-protobuf"),
            ]),
        .testTarget(
            name: "CSITests",
            dependencies: ["CSIDriver", "TestSupport", .product(name: "Yams", package: "Yams")]),
        .testTarget(
            name: "StorageKitTests",
            dependencies: ["StorageKit", "Transport", "TestSupport", "TestServerClient"],
            resources: [.copy("Fixtures")]
        ),
        // The Swift samples of the Firebase Storage documents (shared/seeds),
        // compiled as written against StorageKit; SeedSampleTests runs them.
        .executableTarget(name: "SeedSamples", dependencies: ["StorageKit"], path: "Tests/SeedSamples"),
    ]
)
