// swift-tools-version:6.2
import PackageDescription

// libFuzzer harnesses over SealedPush's decoders (docs/hardening.md), built only by `make fuzz` and
// `make fuzz-smoke` (Fuzz/fuzz.sh) with `-sanitize=fuzzer,address`. A package of its own, so no
// environment variable adds targets to the libraries' manifest.

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]
let harness = strict + [.unsafeFlags(["-parse-as-library"])]

let package = Package(
    name: "SealedPushFuzz",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SealedPush", path: ".."),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
    ],
    targets: [
        // libFuzzer's driver entry point, called from each harness's `<Target>_main`.
        .target(name: "CFuzzDriver", path: "CFuzzDriver"),
        // Fixed keys derived from constant seeds, invariant checks, seed-corpus writing.
        .target(name: "FuzzSupport",
                dependencies: [.product(name: "SealedPushWire", package: "SealedPush"),
                               .product(name: "SealedPushCrypto", package: "SealedPush")],
                path: "FuzzSupport", swiftSettings: strict),
        // The whole service extension over a hostile APNs payload.
        .executableTarget(name: "FuzzPayload",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush"),
                                         .product(name: "SealedPushReceiver", package: "SealedPush"),
                                         .product(name: "SealedPushDevice", package: "SealedPush"),
                                         .product(name: "SealedPushTestSupport", package: "SealedPush"),
                                         .product(name: "Logging", package: "swift-log")],
                          path: "FuzzPayload", swiftSettings: harness),
        // MessageOpener's ordered checks over a hostile envelope.
        .executableTarget(name: "FuzzOpen",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush")],
                          path: "FuzzOpen", swiftSettings: harness),
        // Device and sender key records.
        .executableTarget(name: "FuzzKeyRecord",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush")],
                          path: "FuzzKeyRecord", swiftSettings: harness),
        // The streaming media object decoder (attachments v1 §2).
        .executableTarget(name: "FuzzMedia",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush")],
                          path: "FuzzMedia", swiftSettings: harness),
        // The keychain's internal item-file decoder, through `@testable import` (debug builds only).
        .executableTarget(name: "FuzzKeychainItem",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushKeychain", package: "SealedPush"),
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush")],
                          path: "FuzzKeychainItem", swiftSettings: harness),
        // What a receipt collector reads from the network: receipts and failure reports (receipts v1 §2, §3).
        .executableTarget(name: "FuzzReceipts",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush")],
                          path: "FuzzReceipts", swiftSettings: harness),
        // The device's receipt outbox item and its recovery, through `@testable import` (debug builds only).
        .executableTarget(name: "FuzzOutbox",
                          dependencies: ["CFuzzDriver", "FuzzSupport",
                                         .product(name: "SealedPushKeychain", package: "SealedPush"),
                                         .product(name: "SealedPushWire", package: "SealedPush"),
                                         .product(name: "SealedPushCrypto", package: "SealedPush")],
                          path: "FuzzOutbox", swiftSettings: harness),
    ]
)
