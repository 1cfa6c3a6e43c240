import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushAPNsServer
import SealedPushDevice
package import SealedPushKeychain
import SealedPushCrypto
import SealedPushReceiver
import SealedPushWebPush
package import SealedPushWebPushServer
import SealedPushWire
import ServiceLifecycle
import SystemPackage

/// `sealedpush-server webpush`: a local Web Push service for development and tests, and VAPID keys.
struct WebPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webpush",
        abstract: "A local Web Push service for development: serve it, and make a VAPID key.",
        subcommands: [Serve.self, GenerateVAPID.self]
    )

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a local RFC 8030 push service (HTTPS) that hands accepted messages to simulated browsers.",
            discussion: """
                Listens with HTTP/1.1 over TLS. Its certificate is made at start and signed by a CA it also makes; \
                the CA is written to --ca-out for clients to trust (the gateway's `"webpush": {"ca_cert": FILE, \
                "allow_private_endpoints": true}`). A subscription's endpoint is https://HOST:PORT/push/ID.

                POST /push/ID is checked as a push service checks it (platforms v1 section 3), in this order: the \
                subscription (410 for --gone ID, 404 for an id no --subscription names, unless --accept-unknown); VAPID (`Authorization: \
                vapid t=JWT, k=KEY`: ES256 verifying under k, aud this service's origin https://HOST:PORT, exp in the \
                future and at most 24 hours ahead, sub mailto: or https:; 401, or 403 when \
                --application-server-key is given and k is another key); Content-Encoding: aes128gcm, TTL (required, \
                an integer), Urgency (very-low, low, normal, high) and Topic (at most 32 base64url characters), each 400; \
                the body, at most 4096 bytes (413) with an RFC 8188 header (400). Accepted messages are answered \
                201 Created with `Location: https://HOST:PORT/message/UUID`; refusals carry {"reason", "message"}.

                --subscription ID=KEYCHAIN_DIR registers a simulated browser: its keychain holds the Web Push keys \
                `sealedpush device subscribe --keychain KEYCHAIN_DIR --endpoint https://HOST:PORT/push/ID` made. Each \
                message accepted for ID is decrypted with those keys (RFC 8291) and the envelope inside opened as an \
                iPhone opens it (`sealedpush device push --platform webpush`), under the request identifier Topic (so \
                a retried delivery replaces its own notification), else the message id; the outcome is printed on \
                stdout as one JSON line {"subscription", "message_id", "request_id", "outcome", "reason"}.

                Faults for testing clients: --fail-rate (500/503), --latency, --gone ID (410).

                It is a development server and says so in every response (`server: sealedpush-local-webpush`). \
                It listens on loopback unless --allow-remote and keeps at most 1000 messages waiting per browser \
                (older ones are dropped). Prints `listening on https://HOST:PORT` once bound (port 0 picks a free \
                one); requests are logged on stderr (the first four characters of the subscription id, status, \
                reason; never bodies, tokens or keys). Runs until SIGTERM or SIGINT, then shuts down gracefully: \
                stops accepting, lets requests in flight finish, hands the browsers what was accepted, and exits 0.

                Example:
                  sealedpush keys generate --keychain ./browser --no-reveal > device.json
                  sealedpush device subscribe --keychain ./browser --endpoint https://127.0.0.1:8444/push/browser-1
                  sealedpush-server webpush serve --subscription browser-1=./browser --ca-out webpush-ca.pem
                """)

        /// Its own default port (8444), so that it runs beside `fcm serve` (8443) and `apns serve` (2197).
        @Option(name: .long, help: ArgumentHelp("The address to listen on (default 127.0.0.1:8444, beside fcm serve's 8443).", valueName: "HOST:PORT"))
        var listen = HostPort(host: "127.0.0.1", port: 8444)

        @OptionGroup var logging: LoggingOptions

        @Option(name: .long, help: ArgumentHelp("Append each accepted request, as received, to FILE as a JSON line: {\"path\", \"headers\": [[name, value], …], \"body_base64url\"} (mode 0600; it holds VAPID tokens).", valueName: "FILE"))
        var capture: String?

        @Option(name: .customLong("ca-out"), help: ArgumentHelp("Where to write the CA certificate clients must trust.", valueName: "FILE"))
        var caOut = "webpush-ca.pem"

        @Option(name: .long, help: ArgumentHelp("A subscription: its id (the endpoint's last path component) and the browser's keychain store (repeatable).",
                                                valueName: "ID=KEYCHAIN_DIR"))
        var subscription: [SubscriptionBinding] = []

        @Option(name: .long, help: ArgumentHelp("A subscription id to answer 410 Gone (repeatable).", valueName: "ID"))
        var gone: [String] = []

        @Option(name: .customLong("application-server-key"), help: ArgumentHelp(
            "The VAPID public key (base64url, as `webpush generate-vapid` prints it) every subscription was made for: other keys are 403.",
            valueName: "KEY"))
        var applicationServerKey: String?

        @Flag(name: .customLong("allow-remote"), help: "Listen on a non-loopback --listen address (a development server: keep it off networks you do not control).")
        var allowRemote = false

        @Flag(name: .customLong("accept-unknown"), help: "Accept and drop messages to subscription ids no --subscription names (after every other check) instead of answering 404: for load tests.")
        var acceptUnknown = false

        @Option(name: .customLong("fail-rate"), help: ArgumentHelp("Answer this fraction of valid messages with 500 or 503.", valueName: "0..1"))
        var failRate = 0.0

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Delay every answer by this long.", valueName: "DURATION"))
        var latency = DurationArgument(milliseconds: 0)

        func validate() throws {
            if !allowRemote && !listen.isLoopback {
                throw ValidationError("--listen \(listen) is not a loopback address; the local Web Push service is a development server: pass --allow-remote to listen there anyway.")
            }
            guard (0...1).contains(failRate) else { throw ValidationError("--fail-rate must be between 0 and 1; it was \(failRate).") }
            var seen: Set<String> = []
            for binding in subscription {
                guard seen.insert(binding.id).inserted else {
                    throw ValidationError("--subscription names the id \(LocalWebPushConfiguration.redacted(binding.id)) twice: give each subscription once.")
                }
            }
            for id in gone {
                guard LocalWebPushConfiguration.isValidSubscriptionID(id) else {
                    throw ValidationError("--gone must be a subscription id: 1 to 128 letters, digits, '-' and '_'.")
                }
                guard !seen.contains(id) else {
                    throw ValidationError("--gone names a subscription that --subscription also registers: give it to only one of them.")
                }
            }
            if let applicationServerKey {
                guard let key = WebPushBase64URL.decodeLenient(applicationServerKey), key.count == 65, key[0] == 0x04 else {
                    throw ValidationError("--application-server-key must be a VAPID public key: base64url of a 65-byte P-256 point, as `webpush generate-vapid` prints it.")
                }
            }
            guard latency.milliseconds <= 600_000 else { throw ValidationError("--latency must be at most 10m.") }
        }

        func run() async throws {
            logging.apply(default: .info)  // one line per request (subscription prefix, status, reason)
            var browsers: [String: BrowserLine] = [:]
            for binding in subscription {
                let store = try openStore(KeychainOptions(directory: binding.directory), create: false)
                let stored: WebPushKeyStore.Subscription?
                do { stored = try WebPushKeyStore(store: store).load() } catch {
                    throw CLIError("the Web Push keys in \(binding.directory) (--subscription) cannot be read: \(error.description)")
                }
                guard let stored else {
                    throw CLIError("the keychain \(binding.directory) (--subscription) has no Web Push keys: run `sealedpush device subscribe "
                                   + "--keychain \(binding.directory) --endpoint https://\(listen.description)/push/ID` first")
                }
                if !stored.endpoint.hasSuffix("/push/" + binding.id) {
                    Logger(label: "sealedpush.webpush-serve").warning(
                        "the subscription's keys were made for another endpoint: senders using it will not reach this browser",
                        metadata: ["subscription": "\(LocalWebPushConfiguration.redacted(binding.id))", "keychain": "\(binding.directory)"])
                }
                browsers[binding.id] = BrowserLine(id: binding.id, store: store)
            }
            var configuration = LocalWebPushConfiguration(
                host: listen.host, port: listen.port, subscriptions: Set(browsers.keys), gone: Set(gone),
                applicationServerKey: applicationServerKey.flatMap(WebPushBase64URL.decodeLenient), failRate: failRate,
                latency: latency.duration)
            configuration.acceptUnknown = acceptUnknown
            let authority: LocalCertificateAuthority
            do { authority = try LocalCertificateAuthority.make(caName: "SealedPush local Web Push CA") } catch {
                throw CLIError("cannot make the local CA and certificate: \(error)")
            }
            do {
                try Data(authority.caPEM.utf8).write(to: URL(fileURLWithPath: caOut))
            } catch {
                throw CLIError("cannot write the CA certificate to \(caOut) (--ca-out); check that its directory exists and is writable")
            }
            let lines = browsers
            let captured = try CaptureSink.forCapture(capture)
            var onCapture: (@Sendable (CapturedWebPushRequest) -> Void)?
            if let captured {
                onCapture = { @Sendable (request: CapturedWebPushRequest) in captured.append(request.jsonLine) }
            }
            let server = LocalWebPushServer(rules: LocalWebPushRules(configuration: configuration), authority: authority,
                                            logger: Logger(label: "sealedpush.webpush-serve"),
                                            onAccepted: { push in lines[push.subscription]?.enqueue(push) }, capture: onCapture)
            let caOut = self.caOut
            let app = try server.application { origin in
                // Unbuffered, so a parent reading the pipe sees the line at once.
                StandardIO.writeOutput(Array("listening on \(origin) (clients trust \(caOut))\n".utf8))
            }
            // The browsers come first: the group stops the server first, then lets the browsers finish what it accepted.
            var services: [any Service] = Array(lines.values)
            services.append(app)
            do {
                try await runUntilSignalled(services, logger: Logger(label: "sealedpush.webpush-serve.services"))
            } catch {
                throw CLIError("the local Web Push service stopped: \(error); check that \(listen) is free and allowed")
            }
        }
    }

    struct GenerateVAPID: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate-vapid",
            abstract: "Make a VAPID key (P-256, PKCS#8 PEM, mode 0600) and print its public key, the browser's applicationServerKey.",
            discussion: """
                Writes the private key to --out (created, never overwritten; mode 0600) for the gateway's \
                `"webpush": {"vapid_key": FILE}`, and prints the public key on stdout, base64url without padding \
                (RFC 8292 section 3.2), as `pushManager.subscribe({applicationServerKey})` takes it and \
                `webpush serve --application-server-key` checks it.

                Example: sealedpush-server webpush generate-vapid --out vapid.p8 > vapid-public.txt
                """)

        @Option(name: .long, help: ArgumentHelp("Where to write the private key (a new file).", valueName: "FILE"))
        var out = "vapid.p8"

        func run() throws {
            let (key, pem) = VAPIDKey.generate()
            do {
                let fd = try FileDescriptor.open(FilePath(out), .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                                 permissions: [.ownerRead, .ownerWrite])
                defer { try? fd.close() }
                try pem.withUnsafeBytes { bytes in _ = try fd.writeAll(bytes) }
            } catch Errno.fileExists {
                throw CLIError("\(out) already exists; remove it or pass another --out (a VAPID key is never overwritten: browsers subscribed with its public key)")
            } catch {
                throw CLIError("cannot write \(out) (--out): \(error); check that the directory exists and is writable")
            }
            print(key.publicKeyBase64URL)
            printError("wrote \(out) (mode 0600); the public key above is the browser's applicationServerKey")
        }
    }
}

/// `ID=KEYCHAIN_DIR` (`webpush serve --subscription`): a subscription id (the endpoint's last path component) and the
/// keychain store of the simulated browser that holds its keys.
struct SubscriptionBinding: ExpressibleByArgument, Sendable, Equatable {
    /// The subscription id.
    let id: String
    /// The browser's keychain directory.
    let directory: String

    init?(argument: String) {
        guard let eq = argument.firstIndex(of: "=") else { return nil }
        let id = String(argument[..<eq]), directory = String(argument[argument.index(after: eq)...])
        guard LocalWebPushConfiguration.isValidSubscriptionID(id), !directory.isEmpty else { return nil }
        self.id = id
        self.directory = directory
    }

    static var defaultValueDescription: String { "ID=KEYCHAIN_DIR, the id 1 to 128 letters, digits, '-' and '_'" }
}

/// One simulated browser of `webpush serve` (a `SimulatedDeviceLine`): each message opened under the request
/// identifier `Topic`, else the message id, with the browser's Web Push keys read at that moment.
package typealias BrowserLine = SimulatedDeviceLine<AcceptedWebPush>

extension SimulatedDeviceLine where Message == AcceptedWebPush {
    /// The line of the browser holding subscription `id` over `store`.
    package convenience init(id: String, store: KeychainStore, capacity: Int = BrowserLine.defaultCapacity) {
        self.init(store: store, capacity: capacity, label: "sealedpush.webpush-serve.browser",
                  dropped: { ["subscription": "\(LocalWebPushConfiguration.redacted(id))", "message": "\($0.messageID)"] }) { push, media, courier, logger, mailbox in
            let result = await Self.openWebPush(push, id: id, store: store, media: media, courier: courier, logger: logger, mailbox: mailbox)
            return [("subscription", .string(id)), ("message_id", .string(push.messageID)),
                    ("request_id", result.requestID.map { .string($0) } ?? .null), ("outcome", .string(result.outcome.rawValue)),
                    ("reason", result.reason.map { .string($0.rawValue) } ?? .null)]
        }
    }

    /// One message: the browser's keys read now (a `device subscribe` while serving takes effect), then decrypted and
    /// opened under the request identifier `Topic`, else the message id.
    static func openWebPush(_ push: AcceptedWebPush, id: String, store: KeychainStore, media: DeviceRun.MediaFetching?, courier: ReceiptCourier,
                            logger: Logger, mailbox: (any MailboxFetcher)? = nil) async -> DeliveryResult {
        let requestID = push.topic ?? push.messageID
        let keys: WebPushUserAgentKeys
        do {
            guard let stored = try WebPushKeyStore(store: store).load() else {
                throw KeychainError.itemNotFound("\(WebPushKeyStore.service)/\(WebPushKeyStore.account)")
            }
            keys = stored.keys
        } catch {
            logger.error("the browser's Web Push keys cannot be read; the message is dropped",
                         metadata: ["subscription": "\(LocalWebPushConfiguration.redacted(id))", "error": "\(error)"])
            var result = DeliveryResult(outcome: .rejected, reason: .invalidPayload, notification: nil)
            result.requestID = requestID
            return result
        }
        let delivery = await WebPushReceiving.deliver(body: push.body, store: store, keys: keys, requestIdentifier: requestID,
                                                      attachments: media?.pipeline, receipts: courier, mailbox: mailbox)
        if let problem = delivery.problem {
            logger.notice("a message could not be opened by the browser", metadata: [
                "subscription": "\(LocalWebPushConfiguration.redacted(id))", "message": "\(push.messageID)", "problem": "\(problem)",
            ])
        }
        return delivery.result
    }
}

/// The file `--capture` appends JSON lines to: created 0600 (it holds VAPID tokens), opened for appending, one
/// write per line.
final class CaptureSink: Sendable {
    let descriptor: FileDescriptor

    /// The sink `--capture` names, or nil without one; a clear error naming `--capture` when it cannot be opened.
    static func forCapture(_ path: String?) throws -> CaptureSink? {
        guard let path else { return nil }
        guard let sink = CaptureSink(path: path) else {
            throw CLIError("cannot open \(path) for --capture; check that its directory exists and is writable")
        }
        return sink
    }

    /// The file at `path`, created (0600) or opened for appending; nil when it cannot be.
    init?(path: String) {
        guard let descriptor = try? FileDescriptor.open(FilePath(path), .writeOnly, options: [.append, .create],
                                                        permissions: [.ownerReadWrite]) else { return nil }
        self.descriptor = descriptor
    }

    /// Appends `line` (a JSON line with its newline); `O_APPEND` keeps concurrent lines whole.
    func append(_ line: [UInt8]) {
        _ = try? descriptor.writeAll(line)
    }

    deinit { try? descriptor.close() }
}
