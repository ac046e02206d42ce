// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "portcullis",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "JOSE", targets: ["JOSE"]),
        .executable(name: "portcullis", targets: ["portcullis"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
    ],
    targets: [
        .systemLibrary(
            name: "CLibCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "JOSE",
            dependencies: ["CLibCrypto"]
        ),
        .executableTarget(
            name: "portcullis",
            dependencies: [
                "JOSE",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "JOSETests",
            dependencies: ["JOSE"]
        ),
        .testTarget(
            name: "PortcullisCLITests",
            dependencies: ["JOSE", "portcullis"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
