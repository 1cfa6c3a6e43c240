import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushAPNsCore
package import SealedPushAPNsServer
import SealedPushAPNs
import SealedPushDevice
package import SealedPushKeychain
import SealedPushReceiver
import SealedPushWire
import ServiceLifecycle
import Crypto
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
                --public-key, its key id and team, issued within the hour, at most one new token per \
                connection in 20 minutes), apns-topic (one of --topic), push type, priority, expiration, \
                collapse id, the payload (empty, over 4096 bytes), then the device token.

                --device TOKEN=KEYCHAIN_DIR registers a device: every push accepted for TOKEN is handed \
                to the device simulator with that keychain store, as the phone would receive it, and its \
                outcome is printed on stdout as one JSON line {"device", "apns_id", "outcome", "reason"}. \
                Unknown tokens answer 400 BadDeviceToken (or are accepted and dropped with \
                --accept-unknown); --unregistered TOKEN answers 410 Unregistered with a timestamp. \
                --capture FILE appends each accepted push to FILE as one JSON line {"device_token", \
                "apns_id", "collapse_id", "topic", "payload"} (the payload as text; created 0600: a mailbox \
                push's payload holds its handle).

                Faults for testing clients: --fail-rate (500/503), --latency, --goaway-after N (GOAWAY \
                after N requests on a connection, naming the highest stream processed; the streams it covers \
                are answered, then the connection closes), --max-streams N, --token-rate N (429 \
                TooManyRequests past N pushes a second to one token).

                It is a development server and says so in every response (`server: sealedpush-local-apns`). \
                It listens on loopback unless --allow-remote, takes at most --max-connections at once, \
                closes a connection whose TLS handshake takes over 10 s or that is idle for 10 minutes, \
                resets a request not complete within 30 s, and keeps at most 1000 pushes waiting per \
                device (older ones are dropped, as APNs keeps only the last push for an offline device). \
                It needs only the public half of the auth key: `apns generate-key` writes it beside the \
                .p8 (for a key from Apple: `openssl pkey -in AuthKey_KEYID.p8 -pubout -out AuthKey_KEYID.pub.pem`).

                Prints `listening on https://HOST:PORT` once bound (port 0 picks a free one); requests \
                are logged on stderr (token prefix, status, reason; never payloads). Runs until SIGTERM or \
                SIGINT, then shuts down gracefully: stops accepting, sends GOAWAY on every connection, lets \
                pushes in flight be answered for up to --shutdown-grace, closes what remains, hands the \
                devices what was accepted, and exits 0.

                Example:
                  sealedpush-server apns generate-key --key-id ABC123DEFG --out .
                  sealedpush-server apns serve --public-key AuthKey_ABC123DEFG.pub.pem --team-id DEF123GHIJ \\
                      --topic com.example.app --device $TOKEN=./phone --ca-out apns-ca.pem
                """)

        @Option(name: .long, help: ArgumentHelp("The address to listen on.", valueName: "HOST:PORT"))
        var listen = HostPort(host: "127.0.0.1", port: 2197)

        @OptionGroup var logging: LoggingOptions

        @Option(name: .customLong("ca-out"), help: ArgumentHelp("Where to write the CA certificate clients must trust.", valueName: "FILE"))
        var caOut = "apns-ca.pem"

        @Option(name: .customLong("public-key"), help: ArgumentHelp("The public half of the APNs auth key, PEM (AuthKey_KEYID.pub.pem, written by `apns generate-key`).", valueName: "FILE"))
        var publicKey: String?

        @Option(name: .customLong("key-id"), help: ArgumentHelp("The key's 10-character id (default: read from the AuthKey_KEYID.pub.pem file name).", valueName: "KEY_ID"))
        var keyID: String?

        @Option(name: .customLong("team-id"), help: ArgumentHelp("The 10-character team id tokens must name.", valueName: "TEAM_ID"))
        var teamID: String

        @Option(name: .customLong("auth-key"), help: .hidden)
        var authKey: String?

        @Flag(name: .customLong("allow-remote"), help: "Listen on a non-loopback --listen address (a development server: keep it off networks you do not control).")
        var allowRemote = false

        @Option(name: .customLong("max-connections"), help: ArgumentHelp("The most client connections open at once.", valueName: "N"))
        var maxConnections = 256

        @Option(name: .long, help: ArgumentHelp("A topic (bundle id) the key may push to (repeatable).", valueName: "TOPIC"))
        var topic: [String] = []

        @Option(name: .long, help: ArgumentHelp("A device: its token and keychain store (repeatable).", valueName: "TOKEN=KEYCHAIN_DIR"))
        var device: [DeviceBinding] = []

        @Option(name: .long, help: ArgumentHelp("A token to answer 410 Unregistered (repeatable).", valueName: "TOKEN"))
        var unregistered: [String] = []

        @Flag(name: .customLong("accept-unknown"), help: "Accept and drop pushes to unknown tokens instead of answering BadDeviceToken.")
        var acceptUnknown = false

        @Option(name: .long, help: ArgumentHelp("Append each accepted push to FILE as a JSON line (created 0600).", valueName: "FILE"))
        var capture: String?

        @Option(name: .customLong("fail-rate"), help: ArgumentHelp("Answer this fraction of valid pushes with 500 or 503.", valueName: "0..1"))
        var failRate = 0.0

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Delay every answer by this long.", valueName: "DURATION"))
        var latency = DurationArgument(milliseconds: 0)

        @Option(name: .customLong("goaway-after"), help: ArgumentHelp("Send GOAWAY after N requests on a connection, answer the streams it covers, then close it.", valueName: "N"))
        var goawayAfter: Int?

        @Option(name: .customLong("max-streams"), help: ArgumentHelp("SETTINGS_MAX_CONCURRENT_STREAMS announced to clients.", valueName: "N"))
        var maxStreams = 1000

        @Option(name: .customLong("token-rate"), help: ArgumentHelp("Answer 429 TooManyRequests past N pushes a second to one token (0: no limit).", valueName: "N"))
        var tokenRate = 0

        @Option(name: .customLong("shutdown-grace"), parsing: .unconditional,
                help: ArgumentHelp("On SIGTERM/SIGINT, how long pushes in flight may take before connections are closed.", valueName: "DURATION"))
        var shutdownGrace = DurationArgument(milliseconds: 10_000)

        /// The key id: `--key-id`, else the `KEYID` of an `AuthKey_KEYID.pub.pem` file name.
        var resolvedKeyID: String? {
            if let keyID { return keyID }
            guard let publicKey else { return nil }
            let name = publicKey.split(separator: "/").last.map(String.init) ?? publicKey
            guard name.hasPrefix("AuthKey_"), name.hasSuffix(".pub.pem") else { return nil }
            return String(name.dropFirst("AuthKey_".count).dropLast(".pub.pem".count))
        }

        func validate() throws {
            if authKey != nil {
                throw ValidationError("apns serve needs only the public half of the auth key: pass --public-key AuthKey_KEYID.pub.pem (written by `apns generate-key`; for a key from Apple: openssl pkey -in AuthKey_KEYID.p8 -pubout -out AuthKey_KEYID.pub.pem).")
            }
            guard publicKey != nil else { throw ValidationError("Missing --public-key AuthKey_KEYID.pub.pem: the public half of the auth key that signs provider tokens.") }
            guard let keyID = resolvedKeyID else { throw ValidationError("--key-id is needed: the public key's file name is not AuthKey_KEYID.pub.pem.") }
            guard APNsSigningKey.isValidID(keyID) else { throw ValidationError("--key-id must be 10 letters and digits, like ABC123DEFG.") }
            guard APNsSigningKey.isValidID(teamID) else { throw ValidationError("--team-id must be 10 letters and digits, like DEF123GHIJ.") }
            if !allowRemote && !listen.isLoopback {
                throw ValidationError("--listen \(listen) is not a loopback address; the local APNs is a development server: pass --allow-remote to listen there anyway.")
            }
            guard (1...100_000).contains(maxConnections) else { throw ValidationError("--max-connections must be 1 to 100000.") }
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
            let key = try readPublicKey()
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
                keys: [.init(keyID: key.keyID, teamID: key.teamID, publicKey: key.publicKey, topics: Set(topic))],
                devices: devices, acceptUnknownTokens: acceptUnknown, maxPushesPerTokenPerSecond: tokenRate,
                failRate: failRate, latency: latency.duration, goawayAfter: goawayAfter, maxConcurrentStreams: maxStreams)
            var limited = configuration
            limited.maxConnections = maxConnections
            let authority = try LocalCertificateAuthority.make()
            do {
                try Data(authority.caPEM.utf8).write(to: URL(fileURLWithPath: caOut))
            } catch {
                throw CLIError("cannot write the CA certificate to \(caOut) (--ca-out); check that its directory exists and is writable")
            }
            let logger = Logger(label: "sealedpush.apns-serve")
            let deviceLines = lines
            let captured = try CaptureSink.forCapture(capture)
            let server = LocalAPNsServer(configuration: limited, authority: authority, shutdownGracePeriod: shutdownGrace.duration,
                                         logger: logger) { push in
                captured?.append(push.captureLine)
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

        /// The verifying key from `--public-key` (a PEM public key; a private key is refused: it is not needed here).
        func readPublicKey() throws -> (keyID: String, teamID: String, publicKey: P256.Signing.PublicKey) {
            guard let publicKey, let keyID = resolvedKeyID else { throw CLIError("Missing --public-key") }
            let text: String
            do { text = try String(contentsOfFile: publicKey, encoding: .utf8) } catch {
                throw CLIError("cannot read \(publicKey) (--public-key); check the path")
            }
            if text.contains("PRIVATE KEY") {
                throw CLIError("\(publicKey) (--public-key) holds a private key; pass its public half: openssl pkey -in \(publicKey) -pubout -out AuthKey_\(keyID).pub.pem")
            }
            do { return (keyID, teamID, try P256.Signing.PublicKey(pemRepresentation: text)) } catch {
                throw CLIError("\(publicKey) (--public-key) is not a P-256 public key in PEM; pass the AuthKey_KEYID.pub.pem `apns generate-key` wrote")
            }
        }
    }

    struct GenerateKey: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate-key",
            abstract: "Make a development APNs auth key (AuthKey_KEYID.p8, mode 0600) for `send`, and its public half for `apns serve`.",
            discussion: """
                Real keys come from Apple's developer site; this one is for a local APNs only. Writes \
                AuthKey_KEYID.p8 (the private key, mode 0600, for `sealedpush send --auth-key`) and \
                AuthKey_KEYID.pub.pem (its public half, for `apns serve --public-key`), and prints the key \
                id and the files written.
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
            let (key, pem) = try { () throws(APNsError) in try APNsSigningKey.generateForDevelopment(keyID: id, teamID: "TEAM000000") }()
            let base = (out.hasSuffix("/") ? out : out + "/") + "AuthKey_\(id)"
            let path = base + ".p8", publicPath = base + ".pub.pem"
            try write(Array(pem.utf8), to: path, permissions: [.ownerRead, .ownerWrite])
            try write(Array(key.privateKey.publicKey.pemRepresentation.utf8) + [0x0a], to: publicPath,
                      permissions: [.ownerRead, .ownerWrite, .groupRead, .otherRead])
            print("key id \(id): wrote \(path) and \(publicPath)")
        }

        func write(_ bytes: [UInt8], to path: String, permissions: FilePermissions) throws {
            do {
                let fd = try FileDescriptor.open(FilePath(path), .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                                 permissions: permissions)
                defer { try? fd.close() }
                try fd.writeAll(bytes)
            } catch Errno.fileExists {
                throw CLIError("\(path) already exists; remove it or pass another --key-id")
            } catch {
                throw CLIError("cannot write \(path) (--out): \(error); check that the directory exists and is writable")
            }
        }
    }
}

/// One registered device of `apns serve` (a `SimulatedDeviceLine`): each push opened under the request identifier
/// iOS would give it (`apns-collapse-id`, else `apns-id`), so a push delivered twice replaces its own notification.
package typealias DeviceLine = SimulatedDeviceLine<AcceptedPush>

extension SimulatedDeviceLine where Message == AcceptedPush {
    /// The line of the phone with `token` over `store`.
    package convenience init(token: String, store: KeychainStore, capacity: Int = DeviceLine.defaultCapacity) {
        self.init(store: store, capacity: capacity, label: "sealedpush.apns-serve.device",
                  dropped: { ["token": "\(token.prefix(8))…", "apns-id": "\($0.apnsID)"] }) { push, media, courier, _, mailbox in
            let result = await DeviceRun.deliver(push.payload, store: store, requestIdentifier: push.requestIdentifier, options: .init(),
                                                 attachments: media?.pipeline, receipts: courier, mailbox: mailbox)
            return [("device", .string(token)), ("apns_id", .string(push.apnsID)), ("outcome", .string(result.outcome.rawValue)),
                    ("reason", result.reason.map { .string($0.rawValue) } ?? .null)]
        }
    }
}

extension AcceptedPush {
    /// The JSON line `apns serve --capture` writes for an accepted push: `{"device_token", "apns_id", "collapse_id",
    /// "topic", "payload"}` (the payload as text, `collapse_id` null when absent), then a newline.
    var captureLine: [UInt8] {
        JSON.serialize(.object(JSONObject([
            ("device_token", .string(deviceToken)), ("apns_id", .string(apnsID)), ("collapse_id", collapseID.map { .string($0) } ?? .null),
            ("topic", .string(topic)), ("payload", .string(String(decoding: payload, as: UTF8.self))),
        ]))) + [0x0a]
    }
}
