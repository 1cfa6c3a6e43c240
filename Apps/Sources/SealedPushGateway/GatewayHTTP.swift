public import Hummingbird
import HTTPTypes
public import Logging
import NIOCore
import SealedPushWire
import SealedPushCrypto
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// The request context of the gateway's servers: Hummingbird's storage, the peer's address (for the device
/// endpoints' per-source limit) and the request id every response and log line carries.
public struct GatewayRequestContext: RequestContext, RemoteAddressRequestContext {
    /// Hummingbird's per-request storage.
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer.
    public let remoteAddress: SocketAddress?
    /// This request's `Request-Id`.
    public var requestID = ""

    /// A context for a request arriving on `source`'s channel.
    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }
}

/// Gives every response a `Request-Id`, writes one log line per request (method, route template, status,
/// duration; never a path value, header or body), counts it in the HTTP metrics, and turns any error into
/// problem details: a `Problem` as it is, anything else (the database) as `503 unavailable`.
struct RequestMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let metrics: GatewayMetrics
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let id = Self.newID()
        context.requestID = id
        let start = ContinuousClock.now
        var response: Response
        do {
            response = try await next(request, context)
        } catch let problem as Problem {
            response = try problem.response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
            if response.status.code >= 400, response.headers[.contentType] != "application/problem+json" {
                let problem = response.status == .notFound
                    ? Problem.notFound("no such route; see GET /openapi.json for the API")
                    : response.status == .methodNotAllowed
                    ? Problem(response.status, "method_not_allowed", "Method not allowed", "this route does not take this method; see GET /openapi.json for the API")
                    : Problem(response.status, "request_refused", response.status.reasonPhrase,
                              "the request cannot be handled as sent; see GET /openapi.json for the API")
                var rewritten = try problem.response(from: request, context: context)
                for field in response.headers where field.name != .contentType && field.name != .contentLength { rewritten.headers.append(field) }
                response = rewritten
            }
        } catch {
            logger.error("request failed", metadata: ["request_id": "\(id)", "error": "\(String(describing: type(of: error)))"])
            response = try Problem.unavailable("the database did not answer; retry later").response(from: request, context: context)
        }
        response.headers[.requestID] = id
        let duration = start.duration(to: .now)
        let route = context.endpointPath ?? "unmatched"
        metrics.http(route: route, status: Int(response.status.code), duration: duration)
        logger.info("\(request.method) \(route) \(response.status.code)",
                    metadata: ["request_id": "\(id)", "ms": "\(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)"])
        return response
    }

    static func newID() -> String {
        // One read of the system's random source (UInt8.random made a getrandom call per byte; these come from a buffer).
        Hex.encode(CryptoLibrary.randomIdentifierBytes(count: 12))
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (a header value's optional whitespace, RFC 9110 §5.6.3);
    /// Foundation's `trimmingCharacters` bridges through `NSString`, twice per request otherwise.
    func trimmingASCIISpaces() -> Substring {
        var s = self
        while let c = s.first, c == " " || c == "\t" { s = s.dropFirst() }
        while let c = s.last, c == " " || c == "\t" { s = s.dropLast() }
        return s
    }
}

extension HTTPField.Name {
    static let requestID = Self("Request-Id")!
    static let idempotencyKey = Self("Idempotency-Key")!
    static let idempotentReplayed = Self("Idempotent-Replayed")!
    static let rateLimitLimit = Self("RateLimit-Limit")!
    static let rateLimitRemaining = Self("RateLimit-Remaining")!
    static let rateLimitReset = Self("RateLimit-Reset")!
    static let forwardedFor = Self("X-Forwarded-For")!
}

/// The gateway's HTTP API (gateway v1 §4–§6) and its admin routes (§7) as Hummingbird routers.
public enum GatewayHTTP {
    /// The largest `/v1/apps` request body.
    static let maxBodyBytes = 64 * 1024
    /// The largest receipt or report body (receipts v1 §4).
    static let maxDeviceBodyBytes = 4096

    /// The router of `listen`: the API, the device endpoints and `/openapi.json`.
    public static func apiRouter(_ gateway: Gateway, logger: Logger) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestMiddleware(metrics: gateway.metrics, logger: logger))
        router.get("openapi.json") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        addDeviceEndpoints(router, gateway)
        let api = API(gateway: gateway)

        router.put("v1/apps/:app/devices/:device_id") { request, context in
            try await api.call(request, context, [.devices]) { app in
                guard let deviceID = context.parameters.get("device_id"), IDSyntax.isValid(deviceID) else {
                    throw Problem.invalidField("", "device_id in the path must be 1-128 bytes of [A-Za-z0-9._:@-], starting with a letter or digit")
                }
                let body = try await api.jsonBody(request)
                let (device, created) = try await gateway.registerDevice(app: app, deviceID: deviceID, body: body)
                return json(.object(device), status: created ? .created : .ok)
            }
        }
        router.get("v1/apps/:app/devices/:device_id") { request, context in
            try await api.call(request, context, [.devices, .read]) { app in
                let deviceID = try pathID(context, "device_id", what: "device")
                guard let device = try await gateway.store.device(app: app.config.id, deviceID: deviceID) else {
                    throw Problem.notFound("no device with this id in this app; register it with PUT …/devices/{device_id}")
                }
                return json(.object(Gateway.json(device)))
            }
        }
        router.delete("v1/apps/:app/devices/:device_id") { request, context in
            try await api.call(request, context, [.devices]) { app in
                let deviceID = try pathID(context, "device_id", what: "device")
                guard let cancelled = try await gateway.store.deleteDevice(app: app.config.id, deviceID: deviceID, now: gateway.now) else {
                    throw Problem.notFound("no device with this id in this app")
                }
                gateway.metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
                return Response(status: .noContent)
            }
        }
        router.get("v1/apps/:app/users/:user_id/devices") { request, context in
            try await api.call(request, context, [.devices, .read]) { app in
                let userID = try pathID(context, "user_id", what: "user")
                let devices = try await gateway.store.userDevices(app: app.config.id, userID: userID)
                return json(.object(JSONObject([("devices", .array(devices.map { .object(Gateway.json($0)) }))])))
            }
        }
        router.delete("v1/apps/:app/users/:user_id/devices") { request, context in
            try await api.call(request, context, [.devices]) { app in
                let userID = try pathID(context, "user_id", what: "user")
                let (_, cancelled) = try await gateway.store.deleteUserDevices(app: app.config.id, userID: userID, now: gateway.now)
                gateway.metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
                return Response(status: .noContent)
            }
        }
        router.get("v1/apps/:app/devices") { request, context in
            try await api.call(request, context, [.devices, .read]) { app in
                try await listDevices(gateway, app, request.uri.queryParameters)
            }
        }
        router.post("v1/apps/:app/messages") { request, context in
            try await api.call(request, context, [.send]) { app in
                try await api.postMessage(request, app: app)
            }
        }
        router.get("v1/apps/:app/messages/:message_id") { request, context in
            try await api.call(request, context, [.send, .read]) { app in
                guard let id = context.parameters.get("message_id") else { throw Problem.notFound("no such message") }
                return json(.object(try await gateway.messageJSON(app: app, messageID: id)))
            }
        }
        router.get("v1/apps/:app/events") { request, context in
            try await api.call(request, context, [.read]) { app in
                try await listEvents(gateway, app, request.uri.queryParameters)
            }
        }
        router.delete("v1/apps/:app/messages/:message_id") { request, context in
            try await api.call(request, context, [.send]) { app in
                guard let id = context.parameters.get("message_id"),
                      let cancelled = try await gateway.store.cancelMessage(app: app.config.id, messageID: id, now: gateway.now)
                else { throw Problem.notFound("no message with this id in this app") }
                gateway.metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
                return Response(status: .noContent)
            }
        }
        return router
    }

    /// The router of `device_listen`: only the device endpoints.
    public static func deviceRouter(_ gateway: Gateway, logger: Logger) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestMiddleware(metrics: gateway.metrics, logger: logger))
        addDeviceEndpoints(router, gateway)
        return router
    }

    /// The router of `admin_listen`: the dashboard at `/`, `/healthz`, `/readyz`, `/metrics`.
    public static func adminRouter(_ gateway: Gateway, logger: Logger) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestMiddleware(metrics: gateway.metrics, logger: logger))
        router.get("/") { _, _ -> Response in
            let snapshot = try await gateway.store.dashboard(now: gateway.now)
            let paused = gateway.apps.compactMapValues { $0.pausedReason.withLockedValue { $0 } }
            let page = try Dashboard.render(snapshot, apps: gateway.configuration.apps, paused: paused)
            return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                            body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
        }
        router.get("healthz") { _, _ in json(.object(JSONObject([("status", "ok")]))) }
        router.get("readyz") { _, _ in
            let (ready, body) = await gateway.readiness()
            return json(.object(body), status: ready ? .ok : .serviceUnavailable)
        }
        router.get("metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: ResponseBody(byteBuffer: ByteBuffer(bytes: gateway.metrics.render())))
        }
        return router
    }

    static func addDeviceEndpoints(_ router: Router<GatewayRequestContext>, _ gateway: Gateway) {
        for path in ["v1/receipts", "v1/reports"] {
            router.post(RouterPath(stringLiteral: path)) { request, context in
                let source = sourceAddress(request, context, trusted: gateway.configuration.trustedProxies)
                guard gateway.sourceLimiter.admit(source) else { throw Problem.rateLimited(retryAfter: 1) }
                if let length = request.headers[.contentLength].flatMap(Int.init), length > maxDeviceBodyBytes {
                    throw Problem.tooLarge("a receipt or report is at most \(maxDeviceBodyBytes) bytes (receipts v1 §4)")
                }
                let bytes: [UInt8]
                do { bytes = Array(try await request.body.collect(upTo: maxDeviceBodyBytes).readableBytesView) } catch is NIOTooManyBytesError {
                    throw Problem.tooLarge("a receipt or report is at most \(maxDeviceBodyBytes) bytes (receipts v1 §4)")
                }
                let status = await gateway.deviceEndpoint(body: bytes, path: path)
                switch status {
                case 202, 204: return Response(status: .init(code: status))
                case 403: throw Problem.forbidden("the receipt's token does not match the delivery it names")
                case 404: throw Problem.notFound("no delivery has this message id")
                case 503: throw Problem.unavailable("the database did not answer; keep the receipt and retry later")
                default: throw Problem(.badRequest, "invalid_json", "Invalid receipt",
                                       path == "v1/receipts" ? "the body is not a receipt as receipts v1 §2 describes"
                                                             : "the body is not a failure report as receipts v1 §3 describes")
                }
            }
        }
    }

    /// The request's source: the peer, or — when the peer is a trusted proxy — the last `X-Forwarded-For`
    /// address not itself a trusted proxy.
    static func sourceAddress(_ request: Request, _ context: GatewayRequestContext, trusted: Set<String>) -> String {
        let peer = context.remoteAddress?.ipAddress ?? "unknown"
        guard trusted.contains(peer), !request.headers[values: .forwardedFor].isEmpty else { return peer }
        let hops = request.headers[values: .forwardedFor].joined(separator: ",").split(separator: ",")
            .map { String($0.trimmingASCIISpaces()) }.filter { !$0.isEmpty }
        for hop in hops.reversed() where !trusted.contains(hop) { return hop }
        return peer
    }

    static func pathID(_ context: GatewayRequestContext, _ name: String, what: String) throws(Problem) -> String {
        guard let id = context.parameters.get(name), IDSyntax.isValid(id) else {
            throw Problem.notFound("no \(what) with this id in this app (ids are 1-128 bytes of [A-Za-z0-9._:@-])")
        }
        return id
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: JSON.serialize(value))))
    }

    static func listDevices(_ gateway: Gateway, _ app: AppRuntime, _ query: Parameters) async throws -> Response {
        let known: Set<Substring> = ["state", "since", "limit", "cursor"]
        for (name, _) in query where !known.contains(name) {
            throw Problem(.badRequest, "unknown_member", "Unknown member", "this query parameter is not part of the API; use state, since, limit or cursor")
        }
        var state: DeviceState?
        if let s = query.get("state") {
            guard let parsed = DeviceState(rawValue: s) else {
                throw Problem.invalidField("", "the query parameter state must be active or unregistered")
            }
            state = parsed
        }
        var since: Int64?
        if let s = query.get("since") {
            guard let t = GatewayTime.parse(s) else {
                throw Problem.invalidField("", "the query parameter since must be an RFC 3339 UTC time such as 2026-11-23T20:57:27.123Z")
            }
            since = t
        }
        var limit = 100
        if let s = query.get("limit") {
            guard let n = Int(s), (1...1000).contains(n) else { throw Problem.invalidField("", "the query parameter limit must be an integer from 1 to 1000") }
            limit = n
        }
        var after: (Int64, String)?
        if let c = query.get("cursor") {
            guard let position = Cursor.decode(c) else {
                throw Problem.invalidField("", "the query parameter cursor is not one this gateway gave; start again without it")
            }
            after = position
        }
        let devices = try await gateway.store.listDevices(app: app.config.id, state: state, since: since, after: after, limit: limit)
        let next: JSONValue = devices.count == limit ? devices.last.map { .string(Cursor.encode($0.updatedAt, $0.deviceID)) } ?? .null : .null
        return json(.object(JSONObject([("devices", .array(devices.map { .object(Gateway.json($0)) })), ("next_cursor", next)])))
    }

    /// `GET …/events?after=&limit=` (gateway v1 §8): the app's events of the last 7 days in the order they were
    /// written, each exactly as POSTed to the webhook.
    static func listEvents(_ gateway: Gateway, _ app: AppRuntime, _ query: Parameters) async throws -> Response {
        let known: Set<Substring> = ["after", "limit"]
        for (name, _) in query where !known.contains(name) {
            throw Problem(.badRequest, "unknown_member", "Unknown member", "this query parameter is not part of the API; use after or limit")
        }
        var limit = 100
        if let s = query.get("limit") {
            guard let n = Int(s), (1...1000).contains(n) else { throw Problem.invalidField("", "the query parameter limit must be an integer from 1 to 1000") }
            limit = n
        }
        let after = query.get("after")
        if let after, !isEventID(after) {
            throw Problem.invalidField("", "the query parameter after must be an event id (evt_ and 32 hex digits) from an earlier listing or webhook")
        }
        let now = gateway.now
        guard let events = try await gateway.store.events(app: app.config.id, after: after, since: now - Gateway.eventsKeptFor, limit: limit) else {
            throw Problem.invalidField("", "after names no event of this app kept now (events are kept 7 days); list again without after")
        }
        var body = Array(#"{"events":["#.utf8)
        for (n, event) in events.enumerated() {
            if n > 0 { body.append(UInt8(ascii: ",")) }
            body += event.body
        }
        body += Array("]}".utf8)
        return Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: body)))
    }

    /// `evt_` and 32 lowercase hex digits.
    static func isEventID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        return b.count == 36 && s.hasPrefix("evt_") && b.dropFirst(4).allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// The list cursor: base64url of `<updated_at ms>:<device_id>`.
    enum Cursor {
        static func encode(_ updatedAt: Int64, _ deviceID: String) -> String {
            Base64.encodeURLSafeNoPadding(Array("\(updatedAt):\(deviceID)".utf8))
        }

        static func decode(_ text: String) -> (Int64, String)? {
            guard let bytes = try? Base64.decodeURLSafeNoPadding(text), let s = String(validating: bytes, as: UTF8.self),
                  let colon = s.firstIndex(of: ":"), let t = Int64(s[..<colon]) else { return nil }
            let id = String(s[s.index(after: colon)...])
            return IDSyntax.isValid(id) ? (t, id) : nil
        }
    }

    /// The `/v1/apps` routes' common steps: authentication, the per-app rate limit and its headers.
    struct API: Sendable {
        let gateway: Gateway

        func call(_ request: Request, _ context: GatewayRequestContext, _ scopes: Set<Scope>,
                  _ handler: (AppRuntime) async throws -> Response) async throws -> Response {
            let bearer = Self.bearer(request)
            let app = try gateway.authorize(bearer: bearer, appID: context.parameters.get("app") ?? "", anyOf: scopes)
            let limit = app.config.rateLimit
            guard let remaining = app.rate.take() else {
                var problem = Problem.rateLimited(retryAfter: 1)
                problem.headers += Self.rateHeaders(limit: limit, remaining: 0)
                throw problem
            }
            var response: Response
            do { response = try await handler(app) } catch var problem as Problem {
                problem.headers += Self.rateHeaders(limit: limit, remaining: remaining)
                throw problem
            }
            for (name, value) in Self.rateHeaders(limit: limit, remaining: remaining) { response.headers[name] = value }
            return response
        }

        static func rateHeaders(limit: Int, remaining: Int) -> [(HTTPField.Name, String)] {
            [(.rateLimitLimit, String(limit)), (.rateLimitRemaining, String(remaining)), (.rateLimitReset, "1")]
        }

        static func bearer(_ request: Request) -> String? {
            guard let value = request.headers[.authorization] else { return nil }
            let parts = value.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
            return String(parts[1].trimmingASCIISpaces())
        }

        /// The body, checked for type and size, as raw bytes.
        func body(_ request: Request) async throws -> [UInt8] {
            let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingASCIISpaces().lowercased()
            guard type == "application/json" else { throw Problem.unsupportedMediaType() }
            if let length = request.headers[.contentLength].flatMap(Int.init), length > maxBodyBytes {
                throw Problem.tooLarge("the request body is over 64 KiB; send a smaller body")
            }
            do { return Array(try await request.body.collect(upTo: maxBodyBytes).readableBytesView) } catch is NIOTooManyBytesError {
                throw Problem.tooLarge("the request body is over 64 KiB; send a smaller body")
            }
        }

        static func object(_ bytes: [UInt8]) throws(Problem) -> JSONObject {
            guard let value = try? JSON.parse(bytes), case let .object(o) = value else { throw Problem.invalidJSON() }
            return o
        }

        func jsonBody(_ request: Request) async throws -> JSONObject { try Self.object(try await body(request)) }

        /// `POST …/messages` with the idempotency rules of §5.
        func postMessage(_ request: Request, app: AppRuntime) async throws -> Response {
            guard let key = request.headers[.idempotencyKey] else {
                let bytes = try await gateway.sendMessage(app: app, body: try await jsonBody(request), idempotency: nil)
                return json(bytes: bytes, status: 202)
            }
            let keyBytes = Array(key.utf8)
            guard (1...255).contains(keyBytes.count), keyBytes.allSatisfy({ (0x20...0x7e).contains($0) }) else {
                throw Problem.invalidField("", "the Idempotency-Key header must be 1-255 printable ASCII characters")
            }
            let bytes = try await body(request)
            let parsed = try? Self.object(bytes)
            let canonical = parsed.map { CanonicalJSON.serialize(.object($0)) } ?? ([0] + bytes)
            let hmac = Digests.hmac(key: gateway.idempotencyKey, message: canonical)
            let slot = app.config.id + "\u{0}" + key
            guard gateway.keysInFlight.withLockedValue({ $0.insert(slot).inserted }) else {
                throw Problem.conflict("a request with this Idempotency-Key is still being handled; retry after Retry-After seconds", retryAfter: 1)
            }
            defer { _ = gateway.keysInFlight.withLockedValue { $0.remove(slot) } }
            let now = gateway.now
            if let kept = try await gateway.store.idempotentAnswer(app: app.config.id, key: key), kept.createdAt > now - Gateway.idempotencyWindow {
                guard constantTimeEquals(kept.bodyHMAC, hmac) else { throw Problem.idempotencyConflict() }
                var response = json(bytes: kept.body, status: kept.status)
                response.headers[.idempotentReplayed] = "true"
                return response
            }
            do {
                guard let parsed else { throw Problem.invalidJSON() }
                let answer = try await gateway.sendMessage(app: app, body: parsed, idempotency: (key, hmac))
                return json(bytes: answer, status: 202)
            } catch let problem as Problem {
                if (400..<500).contains(Int(problem.status.code)), ![401, 403, 409, 429].contains(Int(problem.status.code)) {
                    try await gateway.store.storeIdempotentAnswer(
                        app: app.config.id, key: key,
                        answer: IdempotentAnswer(bodyHMAC: hmac, status: Int(problem.status.code), body: problem.json, createdAt: now))
                }
                throw problem
            }
        }

        func json(bytes: [UInt8], status: Int) -> Response {
            Response(status: .init(code: status), headers: [.contentType: status >= 400 ? "application/problem+json" : "application/json"],
                     body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
        }
    }
}

