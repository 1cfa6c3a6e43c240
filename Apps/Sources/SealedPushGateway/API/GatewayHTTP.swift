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
/// problem details in one place: a `GatewayError` through `GatewayError.problem`, Hummingbird's own refusals
/// (no such route, a malformed request) as problems of their status, and an error of any other type through
/// `GatewayError(classifying:)` — `503 unavailable` when the database did not answer, otherwise `500 internal`
/// naming the request id (logged with the error's type, never its text, which may quote a value).
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
        } catch let error as GatewayError {
            response = try error.problem.response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
            if response.status.code >= 400, response.headers[.contentType] != "application/problem+json" {
                let problem = response.status == .notFound
                    ? GatewayError.notFound("no such route; see GET /openapi.json for the API").problem
                    : Problem(response.status, "request_refused", response.status.reasonPhrase,
                              "the request cannot be handled as sent; see GET /openapi.json for the API")
                var rewritten = try problem.response(from: request, context: context)
                for field in response.headers where field.name != .contentType && field.name != .contentLength { rewritten.headers.append(field) }
                response = rewritten
            }
        } catch {
            let classified = GatewayError(classifying: error, requestID: id)
            logger.error("request failed", metadata: ["request_id": "\(id)", "error": "\(String(reflecting: type(of: error)))",
                                                      "status": "\(classified.status.code)"])
            response = try classified.problem.response(from: request, context: context)
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

/// The routes of one router with the methods each path takes, so that any other method on a known path (PATCH,
/// TRACE, QUERY, …) is answered `405 method_not_allowed` with `Allow` (RFC 9110 §15.5.6) instead of `404`.
struct RouteTable {
    let router: Router<GatewayRequestContext>
    private var methods: [(path: String, methods: [HTTPRequest.Method])] = []

    init(_ router: Router<GatewayRequestContext>) { self.router = router }

    /// Adds `handler` for `method` on `path`.
    mutating func on(_ path: String, _ method: HTTPRequest.Method,
                     _ handler: @escaping @Sendable (Request, GatewayRequestContext) async throws -> Response) {
        router.on(RouterPath(stringLiteral: path), method: method, use: handler)
        if let i = methods.firstIndex(where: { $0.path == path }) { methods[i].methods.append(method) } else { methods.append((path, [method])) }
    }

    /// Adds `handler` for `GET` on `path`, and `HEAD` answered as that `GET` without its body (same status, same
    /// headers but the length), as probes and monitors send it.
    mutating func onGetAndHead(_ path: String, _ handler: @escaping @Sendable (Request, GatewayRequestContext) async throws -> Response) {
        on(path, .get, handler)
        on(path, .head) { request, context in
            var response = try await handler(request, context)
            response.body = ResponseBody()
            return response
        }
    }

    /// Adds, after the routes, the middleware that turns "no route" on a known path into `405`: Hummingbird runs the
    /// middleware added last only around its not-found answer.
    func addMethodNotAllowed() {
        router.add(middleware: MethodNotAllowedMiddleware(routes: methods.map { ($0.path.split(separator: "/").map(String.init), $0.methods.map(\.rawValue)) }))
    }
}

/// Answers a request that matched no route with `405` and `Allow` when its path is one of the router's paths.
struct MethodNotAllowedMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    /// Each path's segments (`:name` matches any one segment) and the methods it takes.
    let routes: [(segments: [String], methods: [String])]

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do { return try await next(request, context) } catch let error as HTTPError where error.status == .notFound {
            let segments = request.uri.path.split(separator: "/")
            let matches = routes.filter { route in
                route.segments.count == segments.count
                    && zip(route.segments, segments).allSatisfy { pattern, segment in pattern.hasPrefix(":") || pattern == segment }
            }
            // The most literal match is the one the router chose (`messages/batch` before `messages/:message_id`).
            func parameters(_ route: (segments: [String], methods: [String])) -> Int { route.segments.filter { $0.hasPrefix(":") }.count }
            let fewest = matches.map(parameters).min()
            let allowed = matches.filter { parameters($0) == fewest }.flatMap(\.methods)
            guard !allowed.isEmpty else { throw error }
            throw GatewayError.methodNotAllowed(allowed: allowed)
        }
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


/// The gateway's HTTP API (gateway v1 §4–§6) and its admin routes (§7) as Hummingbird routers: each router is
/// the controllers' routes (`DevicesController`, `MessagesController`, `ReceiptsController`, `AdminController`)
/// behind `RequestMiddleware`; the controllers read HTTP and call the `Gateway` service.
public enum GatewayHTTP {
    /// The largest `/v1/apps` request body.
    static let maxBodyBytes = 64 * 1024
    /// The largest receipt or report body (receipts v1 §4).
    static let maxDeviceBodyBytes = 4096

    /// The router of `listen`: the API, the device endpoints, `/openapi.json` and the Matrix push gateway (`/_matrix/push/v1/notify`).
    public static func apiRouter(_ gateway: Gateway, logger: Logger) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestMiddleware(metrics: gateway.metrics, logger: logger))
        router.add(middleware: MatrixErrorMiddleware())  // Matrix errors under /_matrix/ (matrix v1 §2)
        var routes = RouteTable(router)
        routes.onGetAndHead("openapi.json") { _, _ -> Response in
            Response(status: .ok, headers: [.contentType: "application/json"],
                     body: ResponseBody(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        ReceiptsController(gateway: gateway).addRoutes(to: &routes)
        MailboxController(gateway: gateway).addRoutes(to: &routes)
        DevicesController(gateway: gateway).addRoutes(to: &routes)
        MessagesController(gateway: gateway).addRoutes(to: &routes)
        MatrixController(gateway: gateway).addRoutes(to: &routes)
        routes.addMethodNotAllowed()
        return router
    }

    /// The router of `device_listen`: only the device endpoints (receipts, reports, the mailbox).
    public static func deviceRouter(_ gateway: Gateway, logger: Logger) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestMiddleware(metrics: gateway.metrics, logger: logger))
        var routes = RouteTable(router)
        ReceiptsController(gateway: gateway).addRoutes(to: &routes)
        MailboxController(gateway: gateway).addRoutes(to: &routes)
        routes.addMethodNotAllowed()
        return router
    }

    /// The router of `admin_listen`: the dashboard at `/`, `/healthz`, `/readyz`, `/metrics`.
    public static func adminRouter(_ gateway: Gateway, logger: Logger) -> Router<GatewayRequestContext> {
        let router = Router(context: GatewayRequestContext.self)
        router.add(middleware: RequestMiddleware(metrics: gateway.metrics, logger: logger))
        router.add(middleware: AdminHostMiddleware(listen: gateway.configuration.adminListen, names: gateway.configuration.adminHosts))
        var routes = RouteTable(router)
        AdminController(gateway: gateway).addRoutes(to: &routes)
        routes.addMethodNotAllowed()
        return router
    }

    /// A path parameter that must be a device or user id (1–128 bytes of `[A-Za-z0-9._:@-]`, starting with a
    /// letter or digit). One rule for every method: an id outside that syntax is `400 invalid_field` (it can
    /// name nothing, and a `PUT` could not create it); a well-formed id that names nothing is `404`.
    /// The id is read percent-decoded (RFC 3986: `V.c%3A` is `V.c:`, as a client that encodes `:` sends it).
    static func pathID(_ context: GatewayRequestContext, _ name: String) throws(GatewayError) -> String {
        guard let id = decodedParameter(context, name), IDSyntax.isValid(id) else {
            throw GatewayError.invalidField("", "the \(name) in the path must be 1-128 bytes of [A-Za-z0-9._:@-], starting with a letter or digit")
        }
        return id
    }

    /// A path parameter that must be a message id as this gateway gives them (1–64 bytes of `[A-Za-z0-9_-]`);
    /// anything else is `400 invalid_field`, like `pathID`.
    static func pathMessageID(_ context: GatewayRequestContext) throws(GatewayError) -> String {
        guard let id = decodedParameter(context, "message_id"), (1...64).contains(id.utf8.count),
              id.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x5f || $0 == 0x2d })
        else {
            throw GatewayError.invalidField("", "the message_id in the path must be a message id this gateway answered (1-64 bytes of [A-Za-z0-9_-])")
        }
        return id
    }

    /// A path parameter percent-decoded; nil when absent or not valid percent-encoded UTF-8.
    static func decodedParameter(_ context: GatewayRequestContext, _ name: String) -> String? {
        guard let raw = context.parameters.get(name) else { return nil }
        return raw.contains("%") ? raw.removingPercentEncoding : raw
    }

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: JSON.serialize(value))))
    }

    static func json(bytes: [UInt8], status: Int) -> Response {
        Response(status: .init(code: status), headers: [.contentType: status >= 400 ? "application/problem+json" : "application/json"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// Refuses query parameters other than `known` (gateway v1: unknown members are refused so typos surface).
    static func onlyParameters(_ query: Parameters, _ known: Set<Substring>) throws(GatewayError) {
        for (name, _) in query where !known.contains(name) {
            let list = known.sorted().joined(separator: ", ")
            throw GatewayError.unknownParameter("this query parameter is not part of the API; this route takes \(list)")
        }
    }

    /// The `limit` query parameter: 1–1000, default 100.
    static func limit(_ query: Parameters) throws(GatewayError) -> Int {
        guard let s = query.get("limit") else { return 100 }
        guard let n = Int(s), (1...1000).contains(n) else { throw GatewayError.invalidField("", "the query parameter limit must be an integer from 1 to 1000") }
        return n
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

    /// The body of a `/v1/apps` request, checked for type and size (`limit` bytes, 64 KiB but for a batch), as raw bytes.
    static func body(_ request: Request, limit: Int = maxBodyBytes) async throws -> [UInt8] {
        let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingASCIISpaces().lowercased()
        guard type == "application/json" else { throw GatewayError.unsupportedMediaType }
        let size = limit >= 1 << 20 ? "\(limit >> 20) MiB" : "\(limit >> 10) KiB"
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw GatewayError.tooLarge("the request body is over \(size); send a smaller body")
        }
        do { return Array(try await request.body.collect(upTo: limit).readableBytesView) } catch is NIOTooManyBytesError {
            throw GatewayError.tooLarge("the request body is over \(size); send a smaller body")
        }
    }

    /// The body as a JSON object (`400 invalid_json` otherwise).
    static func jsonBody(_ request: Request) async throws -> JSONObject { try JSONBody.object(try await body(request)) }
}

/// Parsing a request body as the JSON object every `/v1/apps` body is.
enum JSONBody {
    static func object(_ bytes: [UInt8]) throws(GatewayError) -> JSONObject {
        guard let value = try? JSON.parse(bytes), case let .object(o) = value else { throw GatewayError.invalidJSON() }
        return o
    }
}

/// The `/v1/apps` routes' common steps: authentication (gateway v1 §2), then the app's rate limit and its
/// `RateLimit-*` headers, on answers and problems alike.
struct AppAPI: Sendable {
    let gateway: Gateway

    /// Authenticates, takes one token of the app's rate limit (none with `perRequest` false: the batch route
    /// takes one per message), runs `handler` and adds the `RateLimit-*` headers.
    func call(_ request: Request, _ context: GatewayRequestContext, _ scopes: Set<Scope>, perRequest: Bool = true,
              _ handler: (AppRuntime) async throws -> Response) async throws -> Response {
        let app = try gateway.authorize(bearer: Self.bearer(request), appID: context.parameters.get("app") ?? "", anyOf: scopes)
        let limit = app.config.rateLimit
        var remaining = app.rate.available ?? 0
        if perRequest {
            guard let left = app.rate.take() else {
                var problem = GatewayError.rateLimited(retryAfter: 1).problem
                problem.headers += Self.rateHeaders(limit: limit, remaining: 0)
                throw problem
            }
            remaining = left
        }
        var response: Response
        do { response = try await handler(app) } catch let error as GatewayError {
            var problem = error.problem
            problem.headers += Self.rateHeaders(limit: limit, remaining: perRequest ? remaining : app.rate.available ?? 0)
            throw problem
        }
        if !perRequest { remaining = app.rate.available ?? 0 }
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
}
