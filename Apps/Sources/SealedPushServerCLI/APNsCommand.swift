import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushAPNs
import SealedPushDevice
import SealedPushKeychain
import SealedPushReceiver
import SealedPushWire
import ServiceLifecycle
import SystemPackage

/// `sealedpush-server apns`: a local APNs for development and tests.
struct APNsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "apns",
        abstract: "A local APNs for development: serve it, and make a development auth key.",
        subcommands: [Serve.self, GenerateKey.self]
    )

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a local APNs (HTTP/2 over TLS) that hands accepted pushes to simulated devices.",
            discussion: """
                Listens with HTTP/2 over TLS (ALPN h2). Its certificate is made at start and signed by a CA \
                it also makes; the CA is written to --ca-out for clients to trust (`sealedpush send --ca-cert`). \
                It checks what APNs checks and answers with APNs's status codes and reasons: method and \
                path, the token's format, duplicate headers, apns-id, the provider token (ES256 under \
                --auth-key's public key, its team, issued within the hour, at most one new token per \
                connection in 20 minutes), apns-topic (one of --topic), push type, priority, expiration, \
                collapse id, the payload (empty, over 4096 bytes), then the device token.

                --device TOKEN=KEYCHAIN_DIR registers a device: every push accepted for TOKEN is handed \
                to the device simulator with that keychain store, as the phone would receive it, and its \
                outcome is printed on stdout as one JSON line {"device", "apns_id", "outcome", "reason"}. \
                Unknown tokens answer 400 BadDeviceToken (or are accepted and dropped with \
                --accept-unknown); --unregistered TOKEN answers 410 Unregistered with a timestamp.

                Faults for testing clients: --fail-rate (500/503), --latency, --goaway-after N (GOAWAY \
                and close after N requests on a connection), --max-streams N, --token-rate N (429 \
                TooManyRequests past N pushes a second to one token).

                Prints `listening on https://HOST:PORT` once bound (port 0 picks a free one); requests \
                are logged on stderr (token prefix, status, reason; never payloads). Runs until SIGTERM or \
                SIGINT, then shuts down gracefully: stops accepting, sends GOAWAY on every connection, lets \
                pushes in flight be answered for up to --shutdown-grace, closes what remains, hands the \
                devices what was accepted, and exits 0.

                Example:
                  sealedpush-server apns generate-key --key-id ABC123DEFG --out .
                  sealedpush-server apns serve --auth-key AuthKey_ABC123DEFG.p8 --team-id DEF123GHIJ \\
                      --topic com.example.app --device $TOKEN=./phone --ca-out apns-ca.pem
                """)

        @Option(name: .long, help: ArgumentHelp("The address to listen on.", valueName: "HOST:PORT"))
        var listen = HostPort(host: "127.0.0.1", port: 2197)

        @OptionGroup var logging: LoggingOptions

        @Option(name: .customLong("ca-out"), help: ArgumentHelp("Where to write the CA certificate clients must trust.", valueName: "FILE"))
        var caOut = "apns-ca.pem"

        @OptionGroup(title: "Provider key (its public half verifies tokens)") var key: APNsKeyOptions

        @Option(name: .long, help: ArgumentHelp("A topic (bundle id) the key may push to (repeatable).", valueName: "TOPIC"))
        var topic: [String] = []

        @Option(name: .long, help: ArgumentHelp("A device: its token and keychain store (repeatable).", valueName: "TOKEN=KEYCHAIN_DIR"))
        var device: [DeviceBinding] = []

        @Option(name: .long, help: ArgumentHelp("A token to answer 410 Unregistered (repeatable).", valueName: "TOKEN"))
        var unregistered: [String] = []

        @Flag(name: .customLong("accept-unknown"), help: "Accept and drop pushes to unknown tokens instead of answering BadDeviceToken.")
        var acceptUnknown = false

        @Option(name: .customLong("fail-rate"), help: ArgumentHelp("Answer this fraction of valid pushes with 500 or 503.", valueName: "0..1"))
        var failRate = 0.0

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Delay every answer by this long.", valueName: "DURATION"))
        var latency = DurationArgument(milliseconds: 0)

        @Option(name: .customLong("goaway-after"), help: ArgumentHelp("Send GOAWAY and close a connection after N requests.", valueName: "N"))
        var goawayAfter: Int?

        @Option(name: .customLong("max-streams"), help: ArgumentHelp("SETTINGS_MAX_CONCURRENT_STREAMS announced to clients.", valueName: "N"))
        var maxStreams = 1000

        @Option(name: .customLong("token-rate"), help: ArgumentHelp("Answer 429 TooManyRequests past N pushes a second to one token (0: no limit).", valueName: "N"))
        var tokenRate = 0

        @Option(name: .customLong("shutdown-grace"), parsing: .unconditional,
                help: ArgumentHelp("On SIGTERM/SIGINT, how long pushes in flight may take before connections are closed.", valueName: "DURATION"))
        var shutdownGrace = DurationArgument(milliseconds: 10_000)

        func validate() throws {
            guard !topic.isEmpty else { throw ValidationError("Give at least one --topic (the app's bundle id) the key may push to.") }
            guard (0...1).contains(failRate) else { throw ValidationError("--fail-rate must be between 0 and 1; it was \(failRate).") }
            if let goawayAfter, goawayAfter < 1 { throw ValidationError("--goaway-after must be 1 or more.") }
            guard (1...100_000).contains(maxStreams) else { throw ValidationError("--max-streams must be 1 to 100000.") }
            guard tokenRate >= 0 else { throw ValidationError("--token-rate must be 0 (no limit) or more.") }
            for token in unregistered where !APNsPush.isValidDeviceToken(token) {
                throw ValidationError("--unregistered must be a device token of 64 hex digits; got \(token.count) characters.")
            }
        }


        func run() async throws {
            logging.apply(default: .info)  // one line per request (token prefix, status, reason)
            let (host, port) = (listen.host, listen.port)
            let key = try self.key.signingKey()
            var devices: [String: String] = [:]
            var lines: [String: DeviceLine] = [:]
            for binding in device {
                let token = binding.token
                let store = try openStore(KeychainOptions(directory: binding.directory), create: false)
                devices[token] = topic[0]
                lines[token] = DeviceLine(token: token, store: store)
            }
            let configuration = LocalAPNsConfiguration(
                host: host, port: port,
                keys: [.init(keyID: key.keyID, teamID: key.teamID, publicKey: key.privateKey.publicKey, topics: Set(topic))],
                devices: devices, acceptUnknownTokens: acceptUnknown, maxPushesPerTokenPerSecond: tokenRate,
                failRate: failRate, latency: latency.duration, goawayAfter: goawayAfter, maxConcurrentStreams: maxStreams)
            let authority = try LocalCertificateAuthority.make()
            do {
                try Data(authority.caPEM.utf8).write(to: URL(fileURLWithPath: caOut))
            } catch {
                throw CLIError("cannot write the CA certificate to \(caOut) (--ca-out); check that its directory exists and is writable")
            }
            let logger = Logger(label: "sealedpush.apns-serve")
            let deviceLines = lines
            let server = LocalAPNsServer(configuration: configuration, authority: authority, shutdownGracePeriod: shutdownGrace.duration,
                                         logger: logger) { push in
                deviceLines[push.deviceToken]?.enqueue(push)
            }
            for token in unregistered { server.rules.unregister(token) }
            let caOut = self.caOut
            // The devices come first: the group stops the server first, then lets the devices finish what it accepted.
            let serve = AfterStart(service: server) {
                let bound = try await server.start()
                StandardIO.writeOutput(Array("listening on https://\(host.contains(":") ? "[\(host)]" : host):\(bound) (clients trust \(caOut))\n".utf8))
            }
            let groupLogger = Logger(label: "sealedpush.apns-serve.services")
            var services: [any Service] = Array(deviceLines.values)
            services.append(serve)
            do {
                try await runUntilSignalled(services, logger: groupLogger)
            } catch {
                throw CLIError("the local APNs stopped: \(error); check that \(listen) is free and allowed")
            }
        }
    }

    struct GenerateKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate-key",
            abstract: "Make a development APNs auth key (AuthKey_KEYID.p8, mode 0600) for `apns serve` and `send`.",
            discussion: """
                Real keys come from Apple's developer site; this one is for a local APNs only. Prints the \
                key id and the file written.
                """)

        @Option(name: .customLong("key-id"), help: ArgumentHelp("The 10-character key id (default: random).", valueName: "KEY_ID"))
        var keyID: String?

        @Option(name: .long, help: ArgumentHelp("The directory to write AuthKey_KEYID.p8 into.", valueName: "DIR"))
        var out = "."

        func validate() throws {
            if let keyID, !APNsSigningKey.isValidID(keyID) {
                throw ValidationError("--key-id must be 10 letters and digits, like ABC123DEFG.")
            }
        }

        func run() throws {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
            let id = keyID ?? String((0..<10).map { _ in alphabet.randomElement()! })
            let (_, pem) = try { () throws(APNsError) in try APNsSigningKey.generateForDevelopment(keyID: id, teamID: "TEAM000000") }()
            let path = (out.hasSuffix("/") ? out : out + "/") + "AuthKey_\(id).p8"
            do {
                let fd = try FileDescriptor.open(FilePath(path), .writeOnly, options: [.create, .exclusiveCreate],
                                                 permissions: [.ownerRead, .ownerWrite])
                defer { try? fd.close() }
                try fd.writeAll(Array(pem.utf8))
            } catch Errno.fileExists {
                throw CLIError("\(path) already exists; remove it or pass another --key-id")
            } catch {
                throw CLIError("cannot write \(path) (--out): \(error); check that the directory exists and is writable")
            }
            print("key id \(id): wrote \(path)")
        }
    }
}

/// One registered device of `apns serve`, a service: pushes are delivered to its simulator one at a time, in
/// order; on graceful shutdown (after the server stopped) it delivers what was already accepted and returns.
final class DeviceLine: Service, Sendable {
    let token: String
    let store: KeychainStore
    let stream: AsyncStream<AcceptedPush>
    let continuation: AsyncStream<AcceptedPush>.Continuation

    init(token: String, store: KeychainStore) {
        self.token = token
        self.store = store
        (stream, continuation) = AsyncStream.makeStream(of: AcceptedPush.self)
    }

    func enqueue(_ push: AcceptedPush) { continuation.yield(push) }

    func run() async throws {
        let continuation = self.continuation
        await withGracefulShutdownHandler {
            await self.deliverAll()
        } onGracefulShutdown: {
            continuation.finish()
        }
    }

    private func deliverAll() async {
        let media = try? DeviceRun.MediaFetching(directory: nil)
        // One receipt transport (an HTTP client) for the phone's whole life, not one per push.
        await ReceiptsTransportCLI.with { transport in
            let courier = SimulatedDevice(store: store).receiptCourier(transport: transport)
            for await push in stream {
                let result = await DeviceRun.deliver(push.payload, store: store, options: .init(), attachments: media?.pipeline,
                                                     receipts: courier)
                let line: [(String, JSONValue)] = [
                    ("device", .string(token)), ("apns_id", .string(push.apnsID)), ("outcome", .string(result.outcome.rawValue)),
                    ("reason", result.reason.map { .string($0.rawValue) } ?? .null),
                ]
                StandardIO.writeOutput(JSON.serialize(.object(JSONObject(line))) + [0x0a])
            }
        }
    }
}
