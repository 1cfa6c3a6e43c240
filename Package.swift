// swift-tools-version:6.2
import PackageDescription

// SealedPush's libraries: what an iOS app (its notification service extension) and a Swift server link.
//
// libsodium: on Linux the distribution's (the `CSodium` system library, pkg-config). On Apple platforms
// there is no system libsodium: an app enables the `AppleSodium` trait, which links swift-sodium's
// `Clibsodium` product (a full libsodium build as an xcframework). The trait is off by default and the
// dependency is used only under it, so a Linux build never resolves or fetches swift-sodium
// (docs/ios.md, "What was verified here").
//
// This manifest is one literal, the same on every machine and in every build. Its package dependencies
// are the two the libraries need (swift-log, swift-system), and swift-sodium only under the
// `AppleSodium` trait: no HTTP server or client, no NIO, TLS,
// certificate or database package, so an app that adds SealedPush resolves none of them. The
// executables and everything networked live in the nested package `Apps/`; benchmarks in
// `Benchmarks/`, libFuzzer harnesses in `Fuzz/` (docs/architecture.md).

/// Settings shared by every Swift target: Swift 6 language mode is the tools-version default;
/// `ExistentialAny` makes every existential spelled `any P`.
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

/// The Linux build of the Apple glue: the stand-in modules take the names of Apple's frameworks, and
/// `SealedPushApple` names the copy of the module compiled against them (docs/ios.md).
let appleStandIns: [SwiftSetting] = [
    .unsafeFlags([
        "-module-alias", "UserNotifications=AppleStandInUserNotifications",
        "-module-alias", "Security=AppleStandInSecurity",
        "-module-alias", "os=AppleStandInOS",
        "-module-alias", "FoundationNetworking=AppleStandInFoundationNetworking",
        "-module-alias", "UIKit=AppleStandInUIKit",
        "-module-alias", "UserNotificationsUI=AppleStandInUserNotificationsUI",
        "-module-alias", "SealedPushApple=SealedPushAppleOnStandIns",
    ], .when(platforms: [.linux])),
]

/// libsodium for the targets that call it: the system library on Linux; on iOS, macOS, Mac Catalyst and
/// visionOS swift-sodium's `Clibsodium` (its xcframework has slices for all four), only when the
/// `AppleSodium` trait is enabled. Without it an Apple build stops at SealedPushCrypto's `#error`, which
/// names the trait.
let sodium: [Target.Dependency] = [
    .target(name: "CSodium", condition: .when(platforms: [.linux])),
    .product(name: "Clibsodium", package: "swift-sodium",
             condition: .when(platforms: [.iOS, .macOS, .macCatalyst, .visionOS], traits: ["AppleSodium"])),
]

/// What each example target of docs/ios.md links (the stand-ins in place of Apple's frameworks on Linux).
let exampleDependencies: [Target.Dependency] = [
    "SealedPushAppleOnStandIns", "SealedPushReceiver", "SealedPushKeyring", "SealedPushKeychain", "SealedPushCrypto",
    "SealedPushWire", .product(name: "Logging", package: "swift-log"),
    .target(name: "AppleStandInUIKit", condition: .when(platforms: [.linux])),
    .target(name: "AppleStandInUserNotificationsUI", condition: .when(platforms: [.linux])),
]

let package = Package(
    name: "SealedPush",
    // The modules an iOS notification service extension links (SealedPushCrypto, SealedPushWire,
    // SealedPushReceiver, SealedPushKeyring) use no API newer than iOS 18 / macOS 15 (checked by
    // PlatformAvailabilityTests); Mac Catalyst 18 and visionOS 2 are the same year's releases (Synchronization's
    // Mutex, which SealedPushApple uses, came with all four).
    platforms: [.iOS(.v18), .macOS(.v15), .macCatalyst(.v18), .visionOS(.v2)],
    products: [
        .library(name: "SealedPushCrypto", targets: ["SealedPushCrypto"]),
        .library(name: "SealedPushWire", targets: ["SealedPushWire"]),
        .library(name: "SealedPushReceiver", targets: ["SealedPushReceiver"]),
        .library(name: "SealedPushApple", targets: ["SealedPushApple"]),
        .library(name: "SealedPushSender", targets: ["SealedPushSender"]),
        .library(name: "SealedPushKeyring", targets: ["SealedPushKeyring"]),
        .library(name: "SealedPushKeychain", targets: ["SealedPushKeychain"]),
        .library(name: "SealedPushDevice", targets: ["SealedPushDevice"]),
        .library(name: "SealedPushAPNsCore", targets: ["SealedPushAPNsCore"]),
        /// Test helpers shared with the nested packages' suites (vectors from ../shared, a manual clock,
        /// the child-process runner, quiet logging). Not for apps.
        .library(name: "SealedPushTestSupport", targets: ["SealedPushTestSupport"]),
    ],
    traits: [
        .trait(
            name: "AppleSodium",
            description: "Link libsodium on iOS, macOS, Mac Catalyst and visionOS from swift-sodium's Clibsodium product (jedisct1/swift-sodium)."
        ),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        // Only under the AppleSodium trait, only on Apple platforms (see `sodium`). 0.x: minor
        // versions may break, so up to the next minor.
        .package(url: "https://github.com/jedisct1/swift-sodium", .upToNextMinor(from: "0.10.0")),
    ],
    targets: [
        // The distribution's libsodium (Debian: libsodium-dev), found through pkg-config.
        .systemLibrary(
            name: "CSodium",
            path: "Sources/CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]
        ),
        // The only module that touches pointers and libsodium: the system library on Linux, swift-sodium's
        // Clibsodium on Apple platforms when the AppleSodium trait is on (its sources import whichever is present,
        // and stop with an #error naming the trait when neither is).
        .target(name: "SealedPushCrypto", dependencies: sodium, swiftSettings: strict),
        // Wire format v1: envelope, padding, inner framing, body model, ordered receiver checks.
        .target(name: "SealedPushWire", dependencies: ["SealedPushCrypto"], swiftSettings: strict),
        // APNs models shared by the sender, the provider client and the local APNs: every documented
        // reason, the push and its header rules, typed errors. No networking, no signing.
        .target(name: "SealedPushAPNsCore", dependencies: ["SealedPushWire", "SealedPushCrypto"], swiftSettings: strict),
        // Server side: message + device key record -> APNs payload and headers (the header rules of APNsCore).
        .target(name: "SealedPushSender", dependencies: ["SealedPushWire", "SealedPushCrypto", "SealedPushAPNsCore"],
                swiftSettings: strict),
        // The key lifecycle (generate, rotate, stage/activate, retire, destroy, prune, look up) over a storage
        // protocol, its types and KeychainError: shared by the file store and the iOS Keychain store. No file
        // system, no swift-system.
        .target(
            name: "SealedPushKeyring",
            dependencies: ["SealedPushCrypto", "SealedPushWire", .product(name: "Logging", package: "swift-log")],
            swiftSettings: strict
        ),
        // Keychain-shaped file store, device lock states, the file storage of the key lifecycle.
        .target(
            name: "SealedPushKeychain",
            dependencies: [
                "SealedPushKeyring", "SealedPushCrypto", "SealedPushWire",
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
        // The iOS glue an app's notification service extension subclasses: the service extension base
        // class (a private attachments directory per request), content conversion over `request.content`,
        // Keychain device keys and the key lifecycle in the Keychain, the URLSession attachment fetcher,
        // attachment options, swift-log to os.Logger. Every file is inside `#if canImport(UserNotifications)`: empty on Linux.
        .target(
            name: "SealedPushApple",
            dependencies: [
                "SealedPushReceiver", "SealedPushKeyring", "SealedPushWire", "SealedPushCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // Test-only: SealedPushApple's own files (symlinked, Tests/AppleStandIns/SealedPushApple) compiled
        // on Linux against stand-ins that declare the Apple API they use with Apple's signatures. The
        // stand-ins are empty outside Linux and in no product.
        .target(name: "AppleStandInUserNotifications", path: "Tests/AppleStandIns/UserNotifications", swiftSettings: strict),
        .target(name: "AppleStandInSecurity", path: "Tests/AppleStandIns/Security", swiftSettings: strict),
        .target(name: "AppleStandInOS", path: "Tests/AppleStandIns/os", swiftSettings: strict),
        .target(name: "AppleStandInFoundationNetworking", path: "Tests/AppleStandIns/FoundationNetworking", swiftSettings: strict),
        .target(name: "AppleStandInUIKit", path: "Tests/AppleStandIns/UIKit", swiftSettings: strict),
        .target(name: "AppleStandInUserNotificationsUI",
                dependencies: [.target(name: "AppleStandInUserNotifications", condition: .when(platforms: [.linux]))],
                path: "Tests/AppleStandIns/UserNotificationsUI", swiftSettings: strict + appleStandIns),
        .target(
            name: "SealedPushAppleOnStandIns",
            dependencies: [
                "SealedPushReceiver", "SealedPushKeyring", "SealedPushWire", "SealedPushCrypto",
                .product(name: "Logging", package: "swift-log"),
                .target(name: "AppleStandInUserNotifications", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInSecurity", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInOS", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInFoundationNetworking", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInUIKit", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInUserNotificationsUI", condition: .when(platforms: [.linux])),
            ],
            path: "Tests/AppleStandIns/SealedPushApple",
            swiftSettings: strict + appleStandIns
        ),
        // Test-only: the three targets of the app docs/ios.md shows, as an Xcode project has them — the service
        // extension, the content extension and the app — each built with Xcode 26's default MainActor isolation,
        // sharing one file only (SharedSettings.swift, symlinked into the other two).
        .target(
            name: "SealedPushAppleExampleExtension",
            dependencies: exampleDependencies,
            path: "Tests/AppleStandIns/ExampleExtension",
            swiftSettings: strict + appleStandIns + [.defaultIsolation(MainActor.self)]
        ),
        .target(
            name: "SealedPushAppleExampleContentExtension",
            dependencies: exampleDependencies,
            path: "Tests/AppleStandIns/ExampleContentExtension",
            swiftSettings: strict + appleStandIns + [.defaultIsolation(MainActor.self)]
        ),
        .target(
            name: "SealedPushAppleExampleApp",
            dependencies: exampleDependencies,
            path: "Tests/AppleStandIns/ExampleApp",
            swiftSettings: strict + appleStandIns + [.defaultIsolation(MainActor.self)]
        ),
        // Shared helpers for the test targets (vector loading, in-memory keys, the process runner).
        .target(
            name: "SealedPushTestSupport",
            dependencies: [
                "SealedPushCrypto", "SealedPushWire", "SealedPushReceiver",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // A small tool the keychain tests run as separate processes (concurrent writers, SIGKILL mid-write).
        .executableTarget(
            name: "keychain-torture",
            dependencies: ["SealedPushKeychain", "SealedPushCrypto", "SealedPushWire"],
            swiftSettings: strict
        ),
        .testTarget(name: "SealedPushCryptoTests", dependencies: ["SealedPushCrypto", "SealedPushTestSupport"] + sodium,
                    swiftSettings: strict),
        .testTarget(name: "SealedPushWireTests", dependencies: ["SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport"],
                    swiftSettings: strict),
        .testTarget(name: "SealedPushAPNsCoreTests", dependencies: ["SealedPushAPNsCore", "SealedPushSender"], swiftSettings: strict),
        .testTarget(
            name: "SealedPushSenderTests",
            dependencies: ["SealedPushSender", "SealedPushAPNsCore", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushKeychainTests",
            dependencies: ["SealedPushKeychain", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport"],
            swiftSettings: strict
        ),
        // Integration: the keychain across process boundaries (`keychain-torture` children SIGKILLed
        // mid-write, concurrent writers, lowered file-size limits).
        .testTarget(
            name: "SealedPushKeychainProcessTests",
            dependencies: ["SealedPushKeychain", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport", "keychain-torture"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushReceiverTests",
            dependencies: ["SealedPushReceiver", "SealedPushDevice", "SealedPushWire", "SealedPushCrypto", "SealedPushTestSupport",
                           "SealedPushKeychain", "SealedPushSender"],
            swiftSettings: strict
        ),
        // SealedPushApple against the stand-ins: the base class delivers once, content conversion,
        // Keychain statuses, attachment options, the log handler; every file of the module is compiled.
        .testTarget(
            name: "SealedPushAppleTests",
            dependencies: [
                "SealedPushAppleOnStandIns", "SealedPushAppleExampleExtension", "SealedPushAppleExampleContentExtension",
                "SealedPushAppleExampleApp", "SealedPushReceiver", "SealedPushKeyring", "SealedPushWire",
                "SealedPushCrypto", "SealedPushSender", "SealedPushTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .target(name: "AppleStandInUserNotifications", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInSecurity", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInOS", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInFoundationNetworking", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInUIKit", condition: .when(platforms: [.linux])),
                .target(name: "AppleStandInUserNotificationsUI", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strict + appleStandIns
        ),
        // Reads the object code of the extension's modules for API newer than the declared platforms.
        .testTarget(
            name: "SealedPushPlatformTests",
            dependencies: ["SealedPushCrypto", "SealedPushWire", "SealedPushReceiver", "SealedPushKeyring", "SealedPushTestSupport"],
            exclude: ["extract_post_platform_api.py", "post-platform-api.txt"],
            swiftSettings: strict
        ),
    ]
)
