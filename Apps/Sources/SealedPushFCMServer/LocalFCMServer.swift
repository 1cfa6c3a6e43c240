import Hummingbird
import HummingbirdCore
import HTTPTypes
import HummingbirdTLS
public import Logging
import NIOCore
import NIOSSL
public import SealedPushAPNsServer
public import ServiceLifecycle
import SealedPushWire

/// Why the local FCM could not be set up.
public struct LocalFCMServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong and what to do.
    public let description: String

    init(_ description: String) { self.description = description }
}

/// A local FCM for development and tests: `LocalFCMRules` behind HTTPS (HTTP/1.1 over TLS 1.2+, Hummingbird) on
/// `host:port`, with a certificate from `authority` (clients trust `authority.caPEM`). Accepted messages go to
/// `onAccepted` once answered, which `sealedpush-server fcm serve` wires to simulated Android devices.
///
/// A swift-service-lifecycle `Service`: `run()` binds and serves until graceful shutdown, then stops accepting,
/// lets requests in flight be answered, and returns. One request line is logged per request: the path's kind,
/// the registration token's last 8 characters, the status and the reason — never a body, an assertion or a token.
public final class LocalFCMServer: Service, Sendable {
    /// The rules every request goes through (also: unregister tokens, read counts).
    public let rules: LocalFCMRules
    /// The TLS identity; clients trust `authority.caPEM`.
    public let authority: LocalCertificateAuthority
    /// Where it listens (port 0: a free one, reported to `onListening`).
    public let host: String
    /// The port asked for.
    public let port: Int
    /// How long every answer is held back (`--latency`).
    public let latency: Duration
    let onAccepted: @Sendable (AcceptedFCMMessage) -> Void
    /// Receives each accepted request as received (`fcm serve --capture FILE`), when set.
    let capture: (@Sendable (CapturedFCMRequest) -> Void)?
    let onListening: @Sendable (Int) async -> Void
    let logger: Logger

    /// A server for `rules` on `host:port` with `authority`'s certificate. `onListening` gets the bound port once it
    /// listens; `onAccepted` every accepted message, in the order answered.
    public init(rules: LocalFCMRules, authority: LocalCertificateAuthority, host: String = "127.0.0.1", port: Int = 8443,
                latency: Duration = .zero, logger: Logger = Logger(label: "sealedpush.fcm-serve"),
                onListening: @escaping @Sendable (Int) async -> Void = { _ in },
                onAccepted: @escaping @Sendable (AcceptedFCMMessage) -> Void = { _ in },
                capture: (@Sendable (CapturedFCMRequest) -> Void)? = nil) {
        self.capture = capture
        self.rules = rules
        self.authority = authority
        self.host = host
        self.port = port
        self.latency = latency
        self.logger = logger
        self.onListening = onListening
        self.onAccepted = onAccepted
    }

    /// Serves until graceful shutdown (SIGTERM/SIGINT in a `ServiceGroup`), then returns once requests in flight
    /// were answered. Throws when the address cannot be bound or the certificate cannot be used.
    public func run() async throws {
        var tls: TLSConfiguration
        do {
            tls = TLSConfiguration.makeServerConfiguration(
                certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map { .certificate($0) },
                privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        } catch {
            throw LocalFCMServerError("the local FCM's TLS certificate could not be loaded: \(error)")
        }
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["http/1.1"]
        let rules = self.rules, logger = self.logger, onAccepted = self.onAccepted, latency = self.latency, capture = self.capture
        let responder = CallbackResponder<BasicRequestContext> { request, _ in
            var headers: [String: String] = [:]
            for field in request.headers {
                let name = field.name.canonicalName
                headers[name] = headers[name].map { $0 + ", " + field.value } ?? field.value
            }
            var body: [UInt8] = []
            var tooLarge = false
            do {
                let buffer = try await request.body.collect(upTo: LocalFCMRules.maximumBodyBytes)
                body = Array(buffer.readableBytesView)
            } catch is NIOTooManyBytesError {
                tooLarge = true
            }
            let answer = rules.answer(LocalFCMRequest(method: request.method.rawValue, path: request.uri.path, headers: headers,
                                                      body: body, bodyTooLarge: tooLarge))
            if latency > .zero { try? await Task.sleep(for: latency) }
            LocalFCMServer.log(answer, path: request.uri.path, logger: logger)
            var fields = HTTPFields()
            fields[.contentType] = "application/json; charset=UTF-8"
            fields[.server] = "sealedpush-local-fcm (development only; not Google's FCM)"
            for (name, value) in answer.headers {
                if let fieldName = HTTPField.Name(name) { fields[fieldName] = value }
            }
            if let accepted = answer.accepted {
                capture?(CapturedFCMRequest(path: request.uri.path, headers: request.headers.map { ($0.name.rawName, $0.value) }, body: body))
                onAccepted(accepted)
            }
            return Response(status: .init(code: answer.status), headers: fields,
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: answer.body)))
        }
        var quiet = Logger(label: "sealedpush.fcm-serve.http")
        quiet.logLevel = .warning
        let port = self.port, onListening = self.onListening
        let application = Application(
            responder: responder,
            server: try .tls(.http1(configuration: LocalFCMServer.http1), tlsConfiguration: tls),
            configuration: ApplicationConfiguration(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? port) },
            logger: quiet)
        try await application.run()
    }

    /// HTTP/1.1 limits: a connection idle for `idleTimeout` is closed (a client that connects and stalls holds nothing
    /// for long), and headers are bounded (an FCM request's are a few hundred bytes).
    static let http1 = HTTP1Channel.Configuration(
        idleTimeout: TimeAmount(idleTimeout),
        httpDecoderConfiguration: .init(maxHeaderFieldSize: 16 * 1024, maxHeaderListSize: 32 * 1024, maxHeaderFieldCount: 100))

    /// How long a connection may stay idle before it is closed.
    public static let idleTimeout: Duration = .seconds(60)

    /// One line per request: what it was, the token's last 8 characters when it was a message, status, reason.
    static func log(_ answer: LocalFCMAnswer, path: String, logger: Logger) {
        var metadata: Logger.Metadata = ["status": "\(answer.status)"]
        if path == "/token" {
            metadata["endpoint"] = "token"
        } else {
            metadata["endpoint"] = "messages:send"
        }
        if let accepted = answer.accepted {
            metadata["token"] = "…\(accepted.tokenSuffix)"
            metadata["name"] = "\(accepted.name)"
            metadata["bytes"] = "\(accepted.data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count })"
            logger.info("accepted", metadata: metadata)
        } else if answer.status == 200 {
            logger.info("access token issued", metadata: metadata)
        } else {
            if let suffix = answer.tokenSuffix { metadata["token"] = "…\(suffix)" }
            metadata["reason"] = "\(answer.summary)"
            logger.info("refused", metadata: metadata)
        }
    }
}

/// One accepted `messages:send` request as the local FCM received it, for `fcm serve --capture FILE`.
public struct CapturedFCMRequest: Sendable {
    /// The request's path (`/v1/projects/…/messages:send`).
    public let path: String
    /// Its headers, in order, as received.
    public let headers: [(name: String, value: String)]
    /// Its body, as received (FCM's JSON).
    public let body: [UInt8]

    /// The JSON line `--capture` writes: `{"path", "headers": [[name, value], …], "body"}` (the body as text).
    public var jsonLine: [UInt8] {
        let object = JSONObject([
            ("path", .string(path)),
            ("headers", .array(headers.map { .array([.string($0.name), .string($0.value)]) })),
            ("body", .string(String(decoding: body, as: UTF8.self))),
        ])
        return JSON.serialize(.object(object)) + [0x0A]
    }
}
