import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushAPNsServer
import SealedPushFCM
package import SealedPushFCMServer
package import SealedPushKeychain
import SealedPushDevice
import SealedPushWire
import SealedPushCrypto
import ServiceLifecycle
import SystemPackage

/// `sealedpush-server fcm`: a local FCM for development and tests (platforms v1 §5).
struct FCMCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fcm",
        abstract: "A local FCM for development: serve it, and make a test service account.",
        subcommands: [Serve.self, GenerateServiceAccount.self]
    )

    /// The port `fcm serve` listens on by default, and so the default token URI of a generated service account.
    static let defaultPort = 8443
    /// `https://127.0.0.1:8443/token`: the token endpoint of `fcm serve` with its defaults.
    static let defaultTokenURI = "https://127.0.0.1:\(defaultPort)/token"

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a local FCM (HTTP v1 over TLS) that hands accepted messages to simulated Android devices.",
            discussion: """
                Listens with HTTPS (HTTP/1.1, TLS 1.2 or later). Its certificate is made at start and signed by a CA \
                it also makes; the CA is written to --ca-out for clients to trust (the gateway's fcm.ca_cert). It \
                serves FCM HTTP v1 as the gateway uses it (platforms v1 §2):

                POST /token exchanges a service account's signed assertion for an access token: the form \
                grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=JWT, the JWT RS256 under the \
                --service-account's public key, with its kid, iss (client_email), scope (firebase.messaging), aud \
                (the file's token_uri), iat within the hour and exp checked. It answers {"access_token", \
                "expires_in": 3600, "token_type": "Bearer"}, else Google's 400 {"error": "invalid_grant", \
                "error_description"}.

                POST /v1/projects/PROJECT/messages:send checks the bearer token (issued here and not expired, else \
                401 UNAUTHENTICATED), the project (the service account's, else 403 PERMISSION_DENIED), the message's \
                shape as SealedPush sends it (only token, data and android; data values strings; no notification \
                block; data at most 4096 bytes, keys and values; no reserved data keys; android.ttl "<n>s" up to 28 \
                days; android.priority HIGH or NORMAL; else 400 INVALID_ARGUMENT naming the field, and a token that \
                is not one 400 "not a valid FCM registration token"), then the token, and answers 200 {"name": \
                "projects/PROJECT/messages/ID"}. Errors are FCM's JSON, {"error": {"code", "message", "status", \
                "details": [{"@type": "type.googleapis.com/google.firebase.fcm.v1.FcmError", "errorCode"}, …]}}.

                --device TOKEN=KEYCHAIN_DIR registers a simulated Android device: every message accepted for TOKEN is \
                handed to the device with that keychain store, which opens data.ENCRYPTED_DATA as `sealedpush device \
                push --platform fcm` does, and its outcome is printed on stdout as one JSON line \
                {"fcm_token_suffix", "name", "outcome", "reason"} (the token's last 8 characters only). Unknown tokens \
                answer 404 UNREGISTERED (or are accepted and dropped with --accept-unknown); --unregistered TOKEN \
                answers 404 UNREGISTERED, --sender-mismatch TOKEN 403 SENDER_ID_MISMATCH.

                Faults for testing clients: --fail-rate (503 UNAVAILABLE, with Retry-After when --retry-after is \
                given), --latency.

                It is a development server and says so in every response (`server: sealedpush-local-fcm`). It listens \
                on loopback unless --allow-remote, closes a connection idle for 60 s, and reads at most 64 KiB of a \
                request body. It needs the service account only to verify: the gateway holds the \
                same file to sign. Its token_uri is every assertion's aud, whatever address the server has: a service \
                account made by `fcm generate-service-account` without --token-uri names https://127.0.0.1:8443/token, \
                this command's default address; with another --listen, point the gateway's fcm.token_url at it.

                Prints `listening on https://HOST:PORT` once bound (port 0 picks a free one); requests are logged on \
                stderr (endpoint, the token's last 8 characters, status, reason; never bodies, assertions or access \
                tokens). Runs until SIGTERM or SIGINT, then shuts down gracefully: stops accepting, answers the \
                requests in flight, hands the devices what was accepted, and exits 0.

                Example:
                  sealedpush-server fcm generate-service-account --project demo-project --out sa.json
                  sealedpush-server fcm serve --service-account sa.json --device $FCM_TOKEN=./android --ca-out fcm-ca.pem
                """)

        @Option(name: .long, help: ArgumentHelp("The address to listen on.", valueName: "HOST:PORT"))
        var listen = HostPort(host: "127.0.0.1", port: FCMCommand.defaultPort)

        @OptionGroup var logging: LoggingOptions

        @Option(name: .long, help: ArgumentHelp("Append each accepted messages:send request, as received, to FILE as a JSON line: {\"path\", \"headers\": [[name, value], …], \"body\"} (mode 0600; it holds bearer tokens).", valueName: "FILE"))
        var capture: String?

        @Option(name: .customLong("ca-out"), help: ArgumentHelp("Where to write the CA certificate clients must trust.", valueName: "FILE"))
        var caOut = "fcm-ca.pem"

        @Option(name: .customLong("service-account"), help: ArgumentHelp(
            "The service account's JSON key file (mode 0600; written by `fcm generate-service-account`): its public key verifies assertions.",
            valueName: "FILE"))
        var serviceAccount: String

        @Flag(name: .customLong("allow-remote"), help: "Listen on a non-loopback --listen address (a development server: keep it off networks you do not control).")
        var allowRemote = false

        @Option(name: .long, help: ArgumentHelp("A simulated Android device: its FCM registration token and keychain store (repeatable).",
                                                valueName: "TOKEN=KEYCHAIN_DIR"))
        var device: [FCMDeviceBinding] = []

        @Option(name: .long, help: ArgumentHelp("A token to answer 404 UNREGISTERED (repeatable).", valueName: "TOKEN"))
        var unregistered: [String] = []

        @Option(name: .customLong("sender-mismatch"), help: ArgumentHelp(
            "A token registered to another Firebase project: answered 403 SENDER_ID_MISMATCH (repeatable).", valueName: "TOKEN"))
        var senderMismatch: [String] = []

        @Flag(name: .customLong("accept-unknown"), help: "Accept and drop messages to unknown tokens instead of answering 404 UNREGISTERED.")
        var acceptUnknown = false

        @Option(name: .customLong("fail-rate"), help: ArgumentHelp("Answer this fraction of the messages it would accept with 503 UNAVAILABLE.",
                                                                   valueName: "0..1"))
        var failRate = 0.0

        @Option(name: .customLong("retry-after"), help: ArgumentHelp("The Retry-After seconds of a --fail-rate 503 (default: none).", valueName: "SECONDS"))
        var retryAfter: Int?

        @Option(name: .long, parsing: .unconditional, help: ArgumentHelp("Delay every answer by this long.", valueName: "DURATION"))
        var latency = DurationArgument(milliseconds: 0)

        @Option(name: .customLong("token-lifetime"), parsing: .unconditional,
                help: ArgumentHelp("How long an access token is valid (expires_in).", valueName: "DURATION"))
        var tokenLifetime = DurationArgument(milliseconds: 3_600_000)

        func validate() throws {
            if !allowRemote && !listen.isLoopback {
                throw ValidationError("--listen \(listen) is not a loopback address; the local FCM is a development server: pass --allow-remote to listen there anyway.")
            }
            guard (0...1).contains(failRate) else { throw ValidationError("--fail-rate must be between 0 and 1; it was \(failRate).") }
            if let retryAfter, !(0...86_400).contains(retryAfter) { throw ValidationError("--retry-after must be 0 to 86400 seconds.") }
            guard (1_000...86_400_000).contains(tokenLifetime.milliseconds), tokenLifetime.milliseconds % 1000 == 0 else {
                throw ValidationError("--token-lifetime must be whole seconds from 1s to 24h, like 3600s or 1h.")
            }
            for (flag, tokens) in [("--unregistered", unregistered), ("--sender-mismatch", senderMismatch)] {
                for token in tokens where !FCMMessage.isValidToken(token) {
                    throw ValidationError("\(flag) must be an FCM registration token: 1–4096 of A–Z a–z 0–9 _ : . - (got \(token.count) characters).")
                }
            }
            var seen = Set<String>()
            for binding in device where !seen.insert(binding.token).inserted {
                throw ValidationError("--device names the token ending \(binding.token.suffix(8)) twice; give each device its own token.")
            }
        }

        func run() async throws {
            logging.apply(default: .info)  // one line per request (endpoint, token suffix, status, reason)
            let account: FCMServiceAccount
            do { account = try FCMServiceAccount(file: serviceAccount) } catch {
                throw CLIError("--service-account: \(error.description)")
            }
            var lines: [String: FCMDeviceLine] = [:]
            for binding in device {
                let store = try openStore(KeychainOptions(directory: binding.directory), create: false)
                lines[binding.token] = FCMDeviceLine(token: binding.token, store: store)
            }
            let configuration = LocalFCMConfiguration(
                serviceAccount: account, devices: Set(lines.keys), unregistered: Set(unregistered), senderMismatch: Set(senderMismatch),
                acceptUnknownTokens: acceptUnknown, failRate: failRate, retryAfterSeconds: retryAfter,
                accessTokenLifetime: tokenLifetime.milliseconds / 1000)
            let authority: LocalCertificateAuthority
            do { authority = try LocalCertificateAuthority.make() } catch {
                throw CLIError("could not make the local FCM's TLS certificate: \(error)")
            }
            do {
                try Data(authority.caPEM.utf8).write(to: URL(fileURLWithPath: caOut))
            } catch {
                throw CLIError("cannot write the CA certificate to \(caOut) (--ca-out); check that its directory exists and is writable")
            }
            let (host, caOut, tokenURI) = (listen.host, self.caOut, account.tokenURI)
            let deviceLines = lines
            var onCapture: (@Sendable (CapturedFCMRequest) -> Void)?
            if let sink = try CaptureSink.forCapture(capture) {
                onCapture = { @Sendable (request: CapturedFCMRequest) in sink.append(request.jsonLine) }
            }
            let server = LocalFCMServer(
                rules: LocalFCMRules(configuration: configuration), authority: authority, host: host, port: listen.port,
                latency: latency.duration, logger: Logger(label: "sealedpush.fcm-serve"),
                onListening: { bound in
                    let base = "https://\(host.contains(":") ? "[\(host)]" : host):\(bound)"
                    StandardIO.writeOutput(Array("listening on \(base) (clients trust \(caOut))\n".utf8))
                    if tokenURI != base + "/token" {
                        printError("note: the service account's token_uri is \(tokenURI): assertions must name it as their aud; "
                                   + "point clients' token URL (the gateway's fcm.token_url) at \(base)/token")
                    }
                },
                onAccepted: { message in deviceLines[message.token]?.enqueue(message) }, capture: onCapture)
            // The devices come first: the group stops the server first, then lets the devices finish what it accepted.
            var services: [any Service] = Array(deviceLines.values)
            services.append(server)
            do {
                try await runUntilSignalled(services, logger: Logger(label: "sealedpush.fcm-serve.services"))
            } catch {
                throw CLIError("the local FCM stopped: \(error); check that \(listen) is free and allowed")
            }
        }
    }

    struct GenerateServiceAccount: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate-service-account",
            abstract: "Make a test service account (an RSA 2048 key in a Google-style JSON key file, mode 0600) for `fcm serve` and the gateway.",
            discussion: """
                Real service accounts come from the Google Cloud console (IAM, Service accounts, Keys); this one is \
                for a local FCM only. Writes --out (created, never overwritten; mode 0600) with type \
                service_account, project_id, private_key_id, private_key (PKCS#8 PEM), client_email \
                sealedpush-dev@PROJECT.iam.gserviceaccount.com and token_uri, and prints the file, project, \
                client_email and token_uri (never the key).

                token_uri is where clients exchange assertions for access tokens, and every assertion's aud. It \
                defaults to https://127.0.0.1:8443/token, the token endpoint of `fcm serve` with its default --listen; \
                for a server elsewhere pass --token-uri https://HOST:PORT/token (or keep the default and set the \
                gateway's fcm.token_url: the aud stays the file's token_uri).

                Example:
                  sealedpush-server fcm generate-service-account --project demo-project --out sa.json
                  sealedpush-server fcm serve --service-account sa.json --device $FCM_TOKEN=./android
                """)

        @Option(name: .long, help: ArgumentHelp("The Firebase project id: 6-30 lowercase letters, digits or '-', starting with a letter.", valueName: "ID"))
        var project: String

        @Option(name: .long, help: ArgumentHelp("The JSON key file to create (it must not exist).", valueName: "FILE"))
        var out: String

        @Option(name: .customLong("token-uri"), help: ArgumentHelp("The token endpoint clients use, and every assertion's aud.", valueName: "URL"))
        var tokenURI = FCMCommand.defaultTokenURI

        func run() throws {
            let generated: (account: FCMServiceAccount, json: SecureBytes)
            do {
                generated = try FCMServiceAccount.generate(project: project, tokenURI: tokenURI)
            } catch {
                throw CLIError("\(error.description) (--project, --token-uri)")
            }
            do {
                let fd = try FileDescriptor.open(FilePath(out), .writeOnly, options: [.create, .exclusiveCreate, .noFollow],
                                                 permissions: [.ownerRead, .ownerWrite])
                defer { try? fd.close() }
                try generated.json.withUnsafeBytes { bytes in _ = try fd.writeAll(bytes) }
            } catch Errno.fileExists {
                throw CLIError("\(out) already exists; remove it or pass another --out")
            } catch {
                throw CLIError("cannot write \(out) (--out): \(error); check that the directory exists and is writable")
            }
            print("wrote \(out): project \(generated.account.projectID), client_email \(generated.account.clientEmail), "
                  + "token_uri \(generated.account.tokenURI)")
        }
    }
}

/// `--device TOKEN=KEYCHAIN_DIR` of `fcm serve`: an FCM registration token (1–4096 of `[A-Za-z0-9_:.-]`) and a
/// keychain directory.
struct FCMDeviceBinding: ExpressibleByArgument, Sendable, Equatable {
    /// The registration token.
    let token: String
    /// The device's keychain directory.
    let directory: String

    init?(argument: String) {
        guard let eq = argument.firstIndex(of: "=") else { return nil }
        let token = String(argument[..<eq]), directory = String(argument[argument.index(after: eq)...])
        guard FCMMessage.isValidToken(token), !directory.isEmpty else { return nil }
        self.token = token
        self.directory = directory
    }
}

/// One simulated Android device of `fcm serve` (a `SimulatedDeviceLine`): each message opened under its collapse key
/// (a message sent twice replaces itself), else FCM's id; printed with the token's last 8 characters only.
package typealias FCMDeviceLine = SimulatedDeviceLine<AcceptedFCMMessage>

extension SimulatedDeviceLine where Message == AcceptedFCMMessage {
    /// The line of the Android phone with `token` over `store`.
    package convenience init(token: String, store: KeychainStore, capacity: Int = FCMDeviceLine.defaultCapacity) {
        self.init(store: store, capacity: capacity, label: "sealedpush.fcm-serve.device",
                  dropped: { ["token": "…\(token.suffix(8))", "name": "\($0.name)"] }) { message, media, courier, _, mailbox in
            let identifier = message.collapseKey ?? String(message.name.split(separator: "/").last ?? "")
            let delivery = await FCMReceiving.deliver(data: message.data, store: store, requestIdentifier: identifier,
                                                      attachments: media?.pipeline, receipts: courier, mailbox: mailbox)
            let result = delivery.result
            var line: [(String, JSONValue)] = [
                ("fcm_token_suffix", .string(String(token.suffix(8)))), ("name", .string(message.name)),
                ("outcome", .string(result.outcome.rawValue)), ("reason", result.reason.map { .string($0.rawValue) } ?? .null),
            ]
            if let problem = delivery.problem { line.append(("problem", .string(problem))) }
            return line
        }
    }
}
