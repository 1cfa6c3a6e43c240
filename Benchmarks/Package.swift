// swift-tools-version:6.2
import PackageDescription

// `make bench`: SealedPush's throughput and memory against raw libsodium loops, PyNaCl and aioapns
// (docs/benchmarks.md). A package of its own, as swift-nio keeps `Benchmarks/`: `swift build` and
// `swift test` of the libraries never build it.

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

// The allocation functions `sealedpush-memory-bench` counts: the linker sends every call to each of them, from any
// object of the executable, to the counting wrapper in CHeapCount (`__wrap_NAME`, which calls `__real_NAME`). In the
// static release build that is every allocation of the process (Linux: ld64 has no --wrap; elsewhere nothing is counted).
let countedAllocators = ["malloc", "free", "calloc", "realloc", "reallocarray", "posix_memalign", "aligned_alloc", "memalign",
                         "valloc", "pvalloc", "sodium_malloc", "sodium_allocarray", "sodium_free"]

let package = Package(
    name: "SealedPushBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SealedPush", path: ".."),
        .package(name: "SealedPushApps", path: "../Apps"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
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
        // The counting malloc wrappers and the anonymous-memory sampler of the memory benchmark.
        .target(name: "CHeapCount", path: "Sources/CHeapCount"),
        // The heap the extensions use per message (text, reveal, a 10 MB image in 4 attachments), each in a fresh process.
        .executableTarget(
            name: "sealedpush-memory-bench",
            dependencies: [
                "CHeapCount",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict,
            linkerSettings: [.unsafeFlags(countedAllocators.flatMap { ["-Xlinker", "--wrap=\($0)"] }, .when(platforms: [.linux]))]
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
