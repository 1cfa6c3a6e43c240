// swift-tools-version:6.2
import PackageDescription

// SealedPush's executables and everything networked: the provider client, the simulated device's HTTP
// transports, the local APNs and FCM, the media server and the receipt collector, and the two command-line
// programs (docs/architecture.md):
//
// - `sealedpush`, the light CLI (keys, sender, trust, seal, send, device): no HTTP server is linked.
// - `sealedpush-server`: `apns serve`, `fcm serve`, `webpush serve`, `media serve`, `receipts serve|stats` and the demo, each server
//   a swift-service-lifecycle service that shuts down gracefully on SIGTERM/SIGINT.
//
// The libraries come from the root package, by path; an iOS app that adds the root resolves none of
// the packages below.

/// Settings shared by every Swift target (as the root package's).
let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "SealedPushApps",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "sealedpush", targets: ["sealedpush"]),
        .executable(name: "sealedpush-server", targets: ["sealedpush-server"]),
        /// The APNs provider client: token auth, HTTP/2, retries, a bound on pushes in flight.
        .library(name: "SealedPushAPNs", targets: ["SealedPushAPNs"]),
        /// The local APNs (development and tests).
        .library(name: "SealedPushAPNsServer", targets: ["SealedPushAPNsServer"]),
        /// The local Web Push service (development and tests, platforms v1 §5).
        .library(name: "SealedPushWebPushServer", targets: ["SealedPushWebPushServer"]),
        /// The local FCM (development and tests): token endpoint and messages:send (platforms v1 §5).
        .library(name: "SealedPushFCMServer", targets: ["SealedPushFCMServer"]),
        /// The simulated device's HTTP transports (attachments, receipts).
        .library(name: "SealedPushDeviceHTTP", targets: ["SealedPushDeviceHTTP"]),
        /// The receipt collector and its database.
        .library(name: "SealedPushReceiptCollector", targets: ["SealedPushReceiptCollector"]),
        /// The development media server.
        .library(name: "SealedPushMediaServer", targets: ["SealedPushMediaServer"]),
        /// The one clock the servers are read and tested on: Unix milliseconds and a monotonic reading (`SealedPushClock`).
        .library(name: "SealedPushTime", targets: ["SealedPushTime"]),
        /// The push gateway (gateway v1): registry, durable queue, delivery, receipts, its HTTP API.
        .library(name: "SealedPushGateway", targets: ["SealedPushGateway"]),
        /// The FCM HTTP v1 client: service-account keys, access tokens, the data-only message, its answers (platforms v1 §2).
        .library(name: "SealedPushFCM", targets: ["SealedPushFCM"]),
        /// Web Push (platforms v1 §1.1, §3): RFC 8291 encryption, VAPID, the endpoint rules. No networking.
        .library(name: "SealedPushWebPush", targets: ["SealedPushWebPush"]),
        /// The commands of both executables, as libraries (tests and the benchmarks call them in-process).
        .library(name: "SealedPushCLI", targets: ["SealedPushCLI"]),
    ],
    dependencies: [
        .package(name: "SealedPush", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-system", from: "1.8.1"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
    ],
    targets: [
        // The provider client: APNsClient over its own HTTP/2 transport (NIOHTTP2, NIOSSL), ES256 provider tokens (swift-crypto),
        // retries with backoff and jitter, a cancellable in-flight bound. Depends on the APNs models, not on
        // the sender: it sends any APNsPush.
        .target(
            name: "SealedPushAPNs",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The FCM HTTP v1 client (platforms v1 §2): service-account key files, RS256 assertions and their verifier,
        // OAuth access tokens (one exchange at a time), the message body, answer classification, over AsyncHTTPClient.
        .target(
            name: "SealedPushFCM",
            dependencies: [
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushFCMTests",
            dependencies: [
                "SealedPushFCM",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ],
            swiftSettings: strict
        ),
        // Web Push: RFC 8291/8188 aes128gcm both ways, subscription and user-agent keys, VAPID (key, JWT, token cache,
        // verifier), TTL/Urgency/Topic, the endpoint rules and address classes. swift-crypto and root libraries only.
        .target(
            name: "SealedPushWebPush",
            dependencies: [
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushWebPushTests",
            dependencies: [
                "SealedPushWebPush",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // The simulated device's networking: AttachmentFetcher and the receipt transport over AsyncHTTPClient.
        .target(
            name: "SealedPushDeviceHTTP",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The expected-receipts database (SQLite through GRDB, WAL) that `seal --receipts-db` writes
        // and the collector reads.
        .target(
            name: "SealedPushReceiptsDatabase",
            dependencies: [
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        // The injected clock (`SealedPushClock`: a wall reading in `UnixMilliseconds` and a monotonic reading) that the
        // rate limits, the receipt collector and the gateway (its worker, its PostgreSQL heartbeat) all read. No dependency.
        .target(
            name: "SealedPushTime",
            dependencies: [],
            swiftSettings: strict
        ),
        // Token buckets, global and per source address: the collector's and the gateway's rate limits.
        .target(
            name: "SealedPushRateLimit",
            dependencies: ["SealedPushTime", .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushTimeTests",
            dependencies: ["SealedPushTime", "SealedPushRateLimit"],
            swiftSettings: strict
        ),
        // `sealedpush-server receipts serve`: the receipt collector (Hummingbird).
        .target(
            name: "SealedPushReceiptCollector",
            dependencies: [
                "SealedPushRateLimit",
                "SealedPushTime",
                "SealedPushReceiptsDatabase",
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush-server media serve`: a development HTTP server for encrypted media objects (Hummingbird).
        .target(
            name: "SealedPushMediaServer",
            dependencies: [
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "_NIOFileSystem", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush-server apns serve`: APNs's checks (LocalAPNsRules) behind an HTTP/2 + TLS server, a Service.
        .target(
            name: "SealedPushAPNsServer",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "SealedPushAPNs",
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush-server webpush serve`: an RFC 8030 push service over HTTPS (Hummingbird, TLS with the local CA):
        // VAPID, Content-Encoding, TTL, Urgency, Topic and body checks (LocalWebPushRules), faults, a Service.
        .target(
            name: "SealedPushWebPushServer",
            dependencies: [
                "SealedPushWebPush", "SealedPushAPNsServer",
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush-server fcm serve`: FCM HTTP v1's token endpoint and messages:send with their checks and answers
        // (LocalFCMRules), HTTPS (Hummingbird over TLS, the local APNs's certificate authority), a Service.
        .target(
            name: "SealedPushFCMServer",
            dependencies: [
                "SealedPushFCM", "SealedPushAPNsServer",
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "SealedPushFCMServerTests",
            dependencies: [
                "sealedpush", "sealedpush-server", "SealedPushFCMServer", "SealedPushFCM", "SealedPushCLI", "SealedPushAPNsServer",
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush-server gateway`: the push gateway (gateway v1): the store (SQLite through GRDB, the system
        // libsqlite3; or PostgreSQL through postgres-nio),
        // the HTTP API (Hummingbird), the delivery worker over the provider client, metrics (swift-metrics
        // into swift-prometheus).
        .target(
            name: "SealedPushGateway",
            dependencies: [
                "SealedPushRateLimit",
                "SealedPushTime",
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "SealedPushAPNs",
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Mustache", package: "swift-mustache"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
                "SealedPushWebPush",
                "SealedPushFCM",
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["API/openapi.json"],
            swiftSettings: strict
        ),
        // The light CLI's commands (keys, sender, trust, seal, send, device) and what both executables share
        // (options, argument types, errors in the user's terms, logging). Links no HTTP server.
        .target(
            name: "SealedPushCLI",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "SealedPushAPNs", "SealedPushDeviceHTTP", "SealedPushReceiptsDatabase",
                // Web Push's keys and RFC 8291 (`device subscribe`, `device push --platform webpush`): swift-crypto only.
                "SealedPushWebPush",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // `sealedpush-server`'s commands: the servers as services in a ServiceGroup, and the demo.
        .target(
            name: "SealedPushServerCLI",
            dependencies: [
                "SealedPushCLI", "SealedPushAPNs", "SealedPushAPNsServer", "SealedPushMediaServer", "SealedPushReceiptCollector",
                "SealedPushReceiptsDatabase", "SealedPushDeviceHTTP", "SealedPushGateway", "SealedPushWebPush", "SealedPushWebPushServer",
                // `fcm serve` and `fcm generate-service-account`.
                "SealedPushFCM", "SealedPushFCMServer",
                // `gateway backup`: VACUUM INTO on a connection of its own.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(name: "sealedpush", dependencies: ["SealedPushCLI"], swiftSettings: strict),
        .executableTarget(name: "sealedpush-server", dependencies: ["SealedPushServerCLI", "SealedPushCLI"], swiftSettings: strict),

        // Unit tests of the CLI library: argument types and the error mapping (no processes).
        .testTarget(
            name: "SealedPushCLIUnitTests",
            dependencies: [
                "SealedPushCLI", "SealedPushServerCLI", "SealedPushAPNs", "SealedPushAPNsServer", "SealedPushReceiptsDatabase",
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        // Runs the built `sealedpush` and `sealedpush-server` binaries.
        .testTarget(
            name: "SealedPushCLITests",
            dependencies: [
                "sealedpush", "sealedpush-server",
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
            ],
            swiftSettings: strict
        ),
        // The attachment pipeline over real loopback HTTP: media serve and small hostile Hummingbird servers.
        .testTarget(
            name: "SealedPushMediaTests",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                "sealedpush", "sealedpush-server", "SealedPushMediaServer", "SealedPushDeviceHTTP",
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        // Receipts over real loopback sockets: the collector, the device's transport, the CLI end to end.
        .testTarget(
            name: "SealedPushReceiptTests",
            dependencies: [
                "sealedpush", "sealedpush-server", "SealedPushDeviceHTTP", "SealedPushReceiptCollector", "SealedPushReceiptsDatabase",
                "SealedPushTime",
                .product(name: "SealedPushReceiver", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            exclude: ["receipt_endpoint.py"],
            swiftSettings: strict
        ),
        // The gateway over real loopback sockets: against the local APNs with simulated phones, as a process.
        .testTarget(
            name: "SealedPushGatewayTests",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                "sealedpush-server", "SealedPushGateway", "SealedPushTime", "SealedPushAPNs", "SealedPushAPNsServer", "SealedPushDeviceHTTP",
                "SealedPushWebPushServer",
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "SealedPushDevice", package: "SealedPush"),
                .product(name: "SealedPushKeychain", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            exclude: ["run_schemathesis.py", "synapse_flow.py"],
            swiftSettings: strict
        ),
        // The local Web Push service and the simulated browser: `device subscribe`, `device push --platform webpush`,
        // `webpush generate-vapid` and `webpush serve` as the built binaries over loopback, and a Python peer (http_ece,
        // cryptography) as an independent sender.
        .testTarget(
            name: "SealedPushWebPushServerTests",
            dependencies: [
                "sealedpush", "sealedpush-server", "SealedPushWebPush", "SealedPushWebPushServer",
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strict
        ),
        // The provider against the local APNs over loopback, the CLI's send and apns serve end to end.
        .testTarget(
            name: "SealedPushAPNsTests",
            dependencies: [
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                // A raw HTTP/2 client that orders its frames itself (the local APNs's GOAWAY tests).
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                "sealedpush", "sealedpush-server", "SealedPushAPNs", "SealedPushAPNsServer", "SealedPushDeviceHTTP",
                .product(name: "SealedPushAPNsCore", package: "SealedPush"),
                .product(name: "SealedPushSender", package: "SealedPush"),
                .product(name: "SealedPushWire", package: "SealedPush"),
                .product(name: "SealedPushCrypto", package: "SealedPush"),
                .product(name: "SealedPushTestSupport", package: "SealedPush"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            exclude: ["h2_frames.py"],
            swiftSettings: strict
        ),
    ]
)
