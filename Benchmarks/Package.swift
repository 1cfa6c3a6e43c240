// swift-tools-version:6.2
import PackageDescription

// `make bench`: SealedPush's throughput and memory against raw libsodium loops, PyNaCl and aioapns
// (docs/benchmarks.md). A package of its own, as swift-nio keeps `Benchmarks/`: `swift build` and
// `swift test` of the libraries never build it.

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SealedPushBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SealedPush", path: ".."),
        .package(name: "SealedPushApps", path: "../Apps"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
    ],
    targets: [
        // The distribution's libsodium, called directly by the raw loops each figure is compared against
        // (the one place outside SealedPushCrypto that calls libsodium: the floor must contain no SealedPush code).
        .systemLibrary(name: "CSodiumFloor", path: "Sources/CSodiumFloor", pkgConfig: "libsodium",
                       providers: [.apt(["libsodium-dev"])]),
        // Sealing, opening, the receiver and the keychain against raw libsodium; device push memory.
        .executableTarget(
            name: "sealedpush-bench",
            dependencies: [
                "CSodiumFloor",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Media encrypt/decrypt throughput against raw secretstream loops, over loopback HTTP.
        .executableTarget(
            name: "sealedpush-media-bench",
            dependencies: [
                "CSodiumFloor",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushDeviceHTTP", package: "SealedPushApps"),
                .product(name: "SealedPushMediaServer", package: "SealedPushApps"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `make bench` runs this first: the benchmark's JSON has the documented shape (never timings).
        .testTarget(
            name: "BenchmarkTests",
            dependencies: [
                "sealedpush-bench",
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
            ],
            swiftSettings: strict
        ),
    ]
)
