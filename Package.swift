// swift-tools-version:6.0
import PackageDescription

/// Settings shared by every Swift target: Swift 6 language mode is the tools-version default;
/// `ExistentialAny` makes every existential spelled `any P`.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SealedPush",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "sealedpush", targets: ["sealedpush"]),
        .library(name: "SealedPushCrypto", targets: ["SealedPushCrypto"]),
        .library(name: "SealedPushWire", targets: ["SealedPushWire"]),
        .library(name: "SealedPushSender", targets: ["SealedPushSender"]),
        .library(name: "SealedPushKeychain", targets: ["SealedPushKeychain"]),
        .library(name: "SealedPushReceiver", targets: ["SealedPushReceiver"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
    ],
    targets: [
        // The distribution's libsodium (Debian: libsodium-dev), found through pkg-config.
        .systemLibrary(
            name: "CSodium",
            path: "Sources/CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]
        ),
        // The only module that touches pointers and libsodium.
        .target(name: "SealedPushCrypto", dependencies: ["CSodium"], swiftSettings: strict),
        // Wire format v1: envelope, padding, inner framing, body model, ordered receiver checks.
        .target(name: "SealedPushWire", dependencies: ["SealedPushCrypto"], swiftSettings: strict),
        // Server side: message + device key record -> APNs payload and headers.
        .target(name: "SealedPushSender", dependencies: ["SealedPushWire", "SealedPushCrypto"], swiftSettings: strict),
        // Keychain-shaped file store, device lock states, key lifecycle.
        .target(
            name: "SealedPushKeychain",
            dependencies: [
                "SealedPushCrypto", "SealedPushWire",
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The notification service extension and the device simulator. Keys come through the
        // wire module's DeviceKeyProvider protocol, so an iOS build can put the real Keychain behind it.
        .target(
            name: "SealedPushReceiver",
            dependencies: [
                "SealedPushWire", "SealedPushCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "sealedpush",
            dependencies: [
                "SealedPushCrypto", "SealedPushWire", "SealedPushSender", "SealedPushKeychain", "SealedPushReceiver",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Shared helpers for the test targets (vector loading, in-memory keys, running the CLI).
        .target(name: "SealedPushTestSupport", dependencies: ["SealedPushCrypto", "SealedPushWire"], swiftSettings: strict),
        // A small tool the keychain tests run as separate processes (concurrent writers, SIGKILL mid-write).
        .executableTarget(
            name: "keychain-torture",
            dependencies: ["SealedPushKeychain", "SealedPushCrypto", "SealedPushWire"],
            swiftSettings: strict
        ),
        .testTarget(name: "SealedPushCryptoTests", dependencies: ["SealedPushCrypto"], swiftSettings: strict),
        .testTarget(name: "SealedPushWireTests", dependencies: ["SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport"], swiftSettings: strict),
    
        .testTarget(
            name: "SealedPushSenderTests",
            dependencies: ["SealedPushSender", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushKeychainTests",
            dependencies: ["SealedPushKeychain", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport", "keychain-torture"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushReceiverTests",
            dependencies: ["SealedPushReceiver", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport"],
            swiftSettings: strict
        ),
        // Runs the built `sealedpush` binary.
        .testTarget(
            name: "SealedPushCLITests",
            dependencies: ["sealedpush", "SealedPushWire", "SealedPushCrypto", "SealedPushKeychain", "SealedPushReceiver",
                           "SealedPushTestSupport"],
            swiftSettings: strict
        ),
    ]
)

// libFuzzer targets (Fuzz/), built only by `make fuzz` / `make fuzz-smoke` with SEALEDPUSH_FUZZ=1 and
// `-sanitize=fuzzer,address`; absent from ordinary builds so `swift build` and `swift test` never see them.
if Context.environment["SEALEDPUSH_FUZZ"] != nil {
    let fuzzSettings = strict + [.unsafeFlags(["-parse-as-library"])]
    package.targets += [
        // libFuzzer's driver entry point, called from each harness's `<Target>_main`.
        .target(name: "CFuzzDriver", path: "Fuzz/CFuzzDriver"),
        // Fixed keys derived from constant seeds, invariant checks, seed-corpus writing.
        .target(name: "FuzzSupport", dependencies: ["SealedPushWire", "SealedPushCrypto"], path: "Fuzz/FuzzSupport",
                swiftSettings: strict),
        .executableTarget(name: "FuzzPayload",
                          dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto", "SealedPushReceiver", "SealedPushTestSupport",
                                         .product(name: "Logging", package: "swift-log")],
                          path: "Fuzz/FuzzPayload", swiftSettings: fuzzSettings),
        .executableTarget(name: "FuzzOpen", dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzOpen", swiftSettings: fuzzSettings),
        .executableTarget(name: "FuzzKeyRecord", dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzKeyRecord", swiftSettings: fuzzSettings),
        // Uses the keychain's internal item-file decoder through `@testable import` (debug builds only).
        .executableTarget(name: "FuzzKeychainItem",
                          dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushKeychain", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzKeychainItem", swiftSettings: fuzzSettings),
    ]
}
