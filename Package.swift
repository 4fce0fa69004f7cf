// swift-tools-version:6.0
import PackageDescription

// Layers, each its own module; dependencies point down:
//   bucketfs (CLI) -> StorageKit -> Transport -> CCurl (C interop, the only unsafe layer)
let package = Package(
    name: "bucketfs",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "StorageKit", targets: ["StorageKit"]),
        .executable(name: "bucketfs", targets: ["bucketfs"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
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
            ]
        ),
        .target(
            name: "StorageKit",
            dependencies: [
                "Transport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ]
        ),
        .executableTarget(
            name: "bucketfs",
            dependencies: [
                "StorageKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(name: "TransportTests", dependencies: ["Transport"]),
        .testTarget(
            name: "StorageKitTests",
            dependencies: ["StorageKit", "Transport"],
            resources: [.copy("Fixtures")]
        ),
    ]
)
