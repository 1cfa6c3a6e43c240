public import Hummingbird
import HummingbirdTLS
import HTTPTypes
public import Logging
import NIOCore
import NIOSSL
public import SealedPushAPNsServer
import SealedPushWebPush
import SealedPushWire
import Synchronization

/// A local Web Push service for development and tests (`sealedpush-server webpush serve`, platforms v1 §5): an
/// RFC 8030 push service over HTTPS (HTTP/1.1, TLS with a certificate its own CA signs) that checks what a push
/// service checks (`LocalWebPushRules`: VAPID, `Content-Encoding`, `TTL`, `Urgency`, `Topic`, the body) and hands
/// each accepted message to `onAccepted`, which `webpush serve` wires to simulated browsers.
///
/// `POST /push/ID` answers `201 Created` with `Location: https://HOST:PORT/message/UUID` and the `TTL` it keeps, or
/// a refusal: a JSON body `{"reason", "message"}` with `400`, `401`, `403`, `404`, `405`, `410`, `413`, or, with
/// `--fail-rate`, `500`/`503`. Every answer waits `latency` first. Requests are logged with the subscription id's
/// first four characters (the id is the capability part of an endpoint), the status and the reason; never bodies,
/// tokens or keys.
///
/// `application(onRunning:)` makes the Hummingbird application, a swift-service-lifecycle service: on graceful
/// shutdown it stops accepting and lets requests in flight finish.
public final class LocalWebPushServer: Sendable {
    /// The checks every request goes through.
    public let rules: LocalWebPushRules
    /// The TLS identity; clients trust `authority.caPEM`.
    public let authority: LocalCertificateAuthority
    let logger: Logger
    let onAccepted: @Sendable (AcceptedWebPush) -> Void
    /// Receives each accepted request as received (`webpush serve --capture FILE`), when set.
    let capture: (@Sendable (CapturedWebPushRequest) -> Void)?
    let boundOrigin = Mutex<String?>(nil)
    let counts = Mutex((accepted: 0, refused: 0))

    /// The header every answer carries: a development server.
    public static let serverName = "sealedpush-local-webpush (development only)"

    /// A service with `rules` and TLS identity `authority`; `onAccepted` receives each accepted message as it is answered,
    /// `capture` (when given) each accepted request as received.
    public init(rules: LocalWebPushRules, authority: LocalCertificateAuthority, logger: Logger = Logger(label: "sealedpush.webpush-serve"),
                onAccepted: @escaping @Sendable (AcceptedWebPush) -> Void = { _ in },
                capture: (@Sendable (CapturedWebPushRequest) -> Void)? = nil) {
        self.rules = rules
        self.authority = authority
        self.logger = logger
        self.capture = capture
        self.onAccepted = onAccepted
    }

    /// This service's origin once bound (`https://127.0.0.1:PORT`): the VAPID `aud` it requires.
    public var origin: String? { boundOrigin.withLock { $0 } }

    /// The endpoint of subscription `id` once bound: `https://HOST:PORT/push/ID`.
    public func endpoint(for id: String) -> String? { origin.map { $0 + "/push/" + id } }

    /// How many messages were accepted and refused so far.
    public var statistics: (accepted: Int, refused: Int) { counts.withLock { $0 } }

    /// The origin for `host` and `port`: lowercase host, IPv6 in brackets, the port unless 443.
    static func origin(host: String, port: Int) -> String {
        let name = host.contains(":") ? "[\(host.lowercased())]" : host.lowercased()
        return port == 443 ? "https://\(name)" : "https://\(name):\(port)"
    }

    /// The application, not yet running; `onRunning` receives the origin once the port is bound.
    public func application(onRunning: @escaping @Sendable (String) async -> Void = { _ in }) throws -> some ApplicationProtocol {
        let configuration = rules.configuration
        let tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        let responder = CallbackResponder<BasicRequestContext> { [self] request, _ in
            await self.respond(to: request)
        }
        return Application(
            responder: responder,
            server: try .tls(.http1(configuration: .init(idleTimeout: TimeAmount(configuration.idleTimeout))), tlsConfiguration: tls),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: Self.serverName),
            onServerRunning: { [self] channel in
                let origin = Self.origin(host: configuration.host, port: channel.localAddress?.port ?? configuration.port)
                self.boundOrigin.withLock { $0 = origin }
                await onRunning(origin)
            },
            logger: logger)
    }

    /// The answer to one request, after `latency`.
    func respond(to request: Request) async -> Response {
        let answer = await check(request)
        let latency = rules.configuration.latency
        if latency > .zero { try? await Task.sleep(for: latency) }
        let path = request.uri.path
        let id = path.hasPrefix("/push/") ? LocalWebPushConfiguration.redacted(String(path.dropFirst("/push/".count))) : "-"
        switch answer {
        case let .success(push):
            counts.withLock { $0.accepted += 1 }
            logger.info("accepted", metadata: [
                "subscription": "\(id)", "message": "\(push.messageID)", "bytes": "\(push.body.count)", "ttl": "\(push.ttl)",
                "urgency": "\(push.urgency.rawValue)",
            ])
            capture?(CapturedWebPushRequest(path: path, headers: request.headers.map { ($0.name.rawName, $0.value) }, body: push.body))
            onAccepted(push)
            var headers = HTTPFields()
            headers[.location] = (origin ?? "") + "/message/" + push.messageID
            headers[Self.ttlField] = String(push.ttl)
            headers[.contentLength] = "0"
            return Response(status: .created, headers: headers)
        case let .failure(refusal):
            counts.withLock { $0.refused += 1 }
            logger.info("refused", metadata: ["subscription": "\(id)", "status": "\(refusal.status)", "reason": "\(refusal.reason)"])
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            if refusal.status == 405 { headers[.allow] = "POST" }
            let json = JSON.serialize(.object(JSONObject([("reason", .string(refusal.reason)), ("message", .string(refusal.message))])))
            return Response(status: HTTPResponse.Status(code: refusal.status), headers: headers,
                            body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
        }
    }

    /// `TTL`, in requests and answers.
    static let ttlField = HTTPField.Name("TTL")!

    /// Every check of `request`, reading its body only once its headers passed, and at most one byte past the limit.
    func check(_ request: Request) async -> Result<AcceptedWebPush, LocalWebPushRefusal> {
        let headers = request.headers.map { (name: $0.name.canonicalName, value: $0.value) }
        guard let origin else { return .failure(LocalWebPushRefusal(503, "starting", "the service is starting: try again")) }
        do throws(LocalWebPushRefusal) {
            let checked = try rules.checkHeaders(method: request.method.rawValue, path: request.uri.path, headers: headers, origin: origin)
            let limit = LocalWebPushRules.maximumBodySize
            if let declared = request.headers[.contentLength].flatMap({ Int($0) }), declared > limit {
                try rules.checkBody([], size: declared)
            }
            var body: [UInt8] = []
            do {
                for try await var chunk in request.body {
                    let room = limit + 1 - body.count
                    if let bytes = chunk.readBytes(length: min(room, chunk.readableBytes)) { body += bytes }
                    if body.count > limit { break }
                }
            } catch {
                throw LocalWebPushRefusal(400, "invalid_body", "the request body could not be read: send it whole")
            }
            try rules.checkBody(body, size: body.count)
            if let fault = rules.fault() { throw fault }
            return .success(rules.accept(checked, body: body))
        } catch {
            return .failure(error)
        }
    }
}

/// One accepted request as the service received it, for `webpush serve --capture FILE`: what a push service sees.
public struct CapturedWebPushRequest: Sendable {
    /// The request's path (`/push/ID`).
    public let path: String
    /// Its headers, in order, as received.
    public let headers: [(name: String, value: String)]
    /// Its body, as received (the RFC 8291 body).
    public let body: [UInt8]

    /// The JSON line `--capture` writes: `{"path", "headers": [[name, value], …], "body_base64url"}`.
    public var jsonLine: [UInt8] {
        let object = JSONObject([
            ("path", .string(path)),
            ("headers", .array(headers.map { .array([.string($0.name), .string($0.value)]) })),
            ("body_base64url", .string(WebPushBase64URL.encode(body))),
        ])
        return JSON.serialize(.object(object)) + [0x0A]
    }
}
