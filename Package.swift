// swift-tools-version:6.0
import PackageDescription

/// Settings shared by every Swift target: Swift 6 language mode is the tools-version default;
/// `ExistentialAny` makes every existential spelled `any P`.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// `SEALEDPUSH_CORE_ONLY=1` leaves the networking targets (servers, HTTP clients) and their tests out
/// of the build: CI's sanitizer and fuzz builds use it, so the heavy server packages are built once
/// (by `make test`) instead of once per build configuration.
let coreOnly = Context.environment["SEALEDPUSH_CORE_ONLY"] != nil

let package = Package(
    name: "SealedPush",
    // The modules an iOS notification service extension links (SealedPushCrypto, SealedPushWire,
    // SealedPushReceiver) use no API newer than these (checked by PlatformAvailabilityTests).
    platforms: [.iOS(.v18), .macOS(.v15)],
    products: [
        .executable(name: "sealedpush", targets: ["sealedpush"]),
        .library(name: "SealedPushCrypto", targets: ["SealedPushCrypto"]),
        .library(name: "SealedPushWire", targets: ["SealedPushWire"]),
        .library(name: "SealedPushSender", targets: ["SealedPushSender"]),
        .library(name: "SealedPushKeychain", targets: ["SealedPushKeychain"]),
        .library(name: "SealedPushReceiver", targets: ["SealedPushReceiver"]),
        .library(name: "SealedPushDevice", targets: ["SealedPushDevice"]),
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
        // Exactly what an iOS notification service extension target links: the UserNotifications-shaped
        // types, SecretMessageExtension and the protocols it reads keys, policy and replay state through.
        // No simulator, no keychain file store, no swift-system, no networking.
        .target(
            name: "SealedPushReceiver",
            dependencies: [
                "SealedPushWire", "SealedPushCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The simulated iPhone: DeviceSimulator (xcrun simctl push rules, its clock and threads) and the
        // Linux implementations only a simulated device needs (keys, trust, replay cache in the file store).
        .target(
            name: "SealedPushDevice",
            dependencies: [
                "SealedPushReceiver", "SealedPushKeychain", "SealedPushWire", "SealedPushCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "sealedpush",
            dependencies: [
                "SealedPushCrypto", "SealedPushWire", "SealedPushSender", "SealedPushKeychain", "SealedPushReceiver", "SealedPushDevice",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `make bench`: throughput against raw libsodium loops (which call libsodium directly, the one place
        // outside SealedPushCrypto that does: the floor must contain no SealedPush code) and memory.
        .executableTarget(
            name: "sealedpush-bench",
            dependencies: [
                "CSodium", "SealedPushCrypto", "SealedPushWire", "SealedPushSender", "SealedPushKeychain", "SealedPushReceiver",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Shared helpers for the test targets (vector loading, in-memory keys, running the CLI).
        .target(name: "SealedPushTestSupport", dependencies: ["SealedPushCrypto", "SealedPushWire", "SealedPushReceiver",
                                                              .product(name: "Logging", package: "swift-log")], swiftSettings: strict),
        // A small tool the keychain tests run as separate processes (concurrent writers, SIGKILL mid-write).
        .executableTarget(
            name: "keychain-torture",
            dependencies: ["SealedPushKeychain", "SealedPushCrypto", "SealedPushWire"],
            swiftSettings: strict
        ),
        .testTarget(name: "SealedPushCryptoTests", dependencies: ["SealedPushCrypto", "CSodium", "SealedPushTestSupport"], swiftSettings: strict),
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
            dependencies: ["SealedPushReceiver", "SealedPushDevice", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport",
                           "SealedPushKeychain", "SealedPushSender"],
            swiftSettings: strict
        ),
        // Reads the object code of the extension's modules for API newer than the declared platforms.
        .testTarget(
            name: "SealedPushPlatformTests",
            dependencies: ["SealedPushCrypto", "SealedPushWire", "SealedPushReceiver"],
            exclude: ["extract_post_platform_api.py", "post-platform-api.txt"],
            swiftSettings: strict
        ),
        // Runs the built `sealedpush` binary.
        .testTarget(
            name: "SealedPushCLITests",
            dependencies: ["sealedpush", "sealedpush-bench", "SealedPushWire", "SealedPushCrypto", "SealedPushKeychain", "SealedPushReceiver",
                           "SealedPushDevice", "SealedPushTestSupport"],
            swiftSettings: strict
        ),
    ]
)

// Networking targets (servers and HTTP clients) and their tests: left out when SEALEDPUSH_CORE_ONLY is set.
if !coreOnly {
    package.dependencies += [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
    ]
    package.targets += [
        // `sealedpush media serve`: a development HTTP server for encrypted media objects (Hummingbird).
        .target(
            name: "SealedPushMediaServer",
            dependencies: [
                "SealedPushWire",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The simulated device's networking: AttachmentFetcher over AsyncHTTPClient.
        .target(
            name: "SealedPushDeviceHTTP",
            dependencies: [
                "SealedPushReceiver", "SealedPushWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            swiftSettings: strict
        ),
        // The attachment pipeline over real loopback HTTP: media serve and small hostile Hummingbird servers.
        .testTarget(
            name: "SealedPushMediaTests",
            dependencies: [
                "sealedpush", "SealedPushMediaServer", "SealedPushDeviceHTTP", "SealedPushReceiver", "SealedPushSender", "SealedPushWire",
                "SealedPushCrypto", "SealedPushTestSupport",
                .product(name: "Hummingbird", package: "hummingbird"),
            ],
            swiftSettings: strict
        ),
    ]
    package.targets += [
        // `make bench-media`: media encrypt/decrypt throughput against raw libsodium secretstream loops
        // (which call libsodium directly, like sealedpush-bench's floors).
        .executableTarget(
            name: "sealedpush-media-bench",
            dependencies: [
                "CSodium", "SealedPushCrypto", "SealedPushWire", "SealedPushSender", "SealedPushReceiver", "SealedPushDeviceHTTP",
                "SealedPushMediaServer", .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
    ]
    package.targets.first { $0.name == "sealedpush" }!.dependencies += ["SealedPushMediaServer", "SealedPushDeviceHTTP"]
    // Delivery receipts (issue #14): the device's HTTP transport and the server's collector.
    package.dependencies += [
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.13.2"),
    ]
    package.targets += [
        // The simulated device's receipt and failure-report transport: HTTP POST over AsyncHTTPClient.
        .target(
            name: "SealedPushReceiptsHTTP",
            dependencies: [
                "SealedPushReceiver", "SealedPushWire",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush receipts serve|stats`: the receipt collector (Hummingbird) over SQLite (sqlite-nio, WAL),
        // and the expected-receipts database `seal --receipts-db` writes.
        .target(
            name: "SealedPushReceiptCollector",
            dependencies: [
                "SealedPushWire", "SealedPushCrypto",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Receipts over real loopback sockets: the collector, the device's transport, the CLI end to end.
        .testTarget(
            name: "SealedPushReceiptTests",
            dependencies: [
                "sealedpush", "SealedPushReceiptsHTTP", "SealedPushReceiptCollector", "SealedPushReceiver", "SealedPushDevice",
                "SealedPushKeychain", "SealedPushSender", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            exclude: ["receipt_endpoint.py"],
            swiftSettings: strict
        ),
    ]
    package.targets.first { $0.name == "sealedpush" }!.dependencies += ["SealedPushReceiptsHTTP", "SealedPushReceiptCollector"]
}

// Delivery (issue #12): the APNs provider (token auth, HTTP/2 over AsyncHTTPClient), the local APNs
// (`sealedpush apns serve`: HTTP/2 over TLS on swift-nio-http2, certificates from swift-certificates), `send`.
if !coreOnly {
    package.dependencies += [
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
    ]
    package.targets += [
        // APNs models shared by the provider and the local APNs: reasons, the push, ES256 provider tokens.
        .target(
            name: "SealedPushAPNsCore",
            dependencies: ["SealedPushWire", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: strict
        ),
        // The provider client: APNsClient over AsyncHTTPClient (HTTP/2), token cache, retries, in-flight bound.
        .target(
            name: "SealedPushAPNs",
            dependencies: [
                "SealedPushAPNsCore", "SealedPushWire", "SealedPushSender",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The local APNs: APNs's checks (LocalAPNsRules) behind an HTTP/2 + TLS server.
        .target(
            name: "SealedPushAPNsServer",
            dependencies: [
                "SealedPushAPNsCore",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The provider against the local APNs over loopback, the CLI's send and apns serve end to end.
        .testTarget(
            name: "SealedPushAPNsTests",
            dependencies: [
                "sealedpush", "SealedPushAPNs", "SealedPushAPNsCore", "SealedPushAPNsServer", "SealedPushSender",
                "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport",
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["h2_frames.py"],
            swiftSettings: strict
        ),
    ]
    package.targets.first { $0.name == "sealedpush" }!.dependencies += ["SealedPushAPNs", "SealedPushAPNsCore", "SealedPushAPNsServer"]
}

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
                          dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto", "SealedPushReceiver", "SealedPushDevice",
                                         "SealedPushTestSupport",
                                         .product(name: "Logging", package: "swift-log")],
                          path: "Fuzz/FuzzPayload", swiftSettings: fuzzSettings),
        .executableTarget(name: "FuzzOpen", dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzOpen", swiftSettings: fuzzSettings),
        .executableTarget(name: "FuzzKeyRecord", dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzKeyRecord", swiftSettings: fuzzSettings),
        // The streaming media object decoder (attachments v1 §2).
        .executableTarget(name: "FuzzMedia", dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzMedia", swiftSettings: fuzzSettings),
        // Uses the keychain's internal item-file decoder through `@testable import` (debug builds only).
        .executableTarget(name: "FuzzKeychainItem",
                          dependencies: ["CFuzzDriver", "FuzzSupport", "SealedPushKeychain", "SealedPushWire", "SealedPushCrypto"],
                          path: "Fuzz/FuzzKeychainItem", swiftSettings: fuzzSettings),
    ]
}
