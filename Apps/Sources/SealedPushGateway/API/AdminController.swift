import Hummingbird
import HTTPTypes
import SealedPushWire

/// The operations routes on `admin_listen` (gateway v1 §7): the dashboard at `/`, `/healthz`, `/readyz`,
/// `/metrics`. The dashboard's page carries a strict `Content-Security-Policy` (no script, styles only from
/// itself), `X-Frame-Options: DENY` and `Referrer-Policy: no-referrer`.
struct AdminController {
    let gateway: Gateway

    /// The dashboard's headers beyond its type: no caching, no framing, no referrer, nothing loaded or run but its own inline style.
    static let dashboardHeaders: HTTPFields = [
        .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
        .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        .xFrameOptions: "DENY", .referrerPolicy: "no-referrer", .xContentTypeOptions: "nosniff",
    ]

    func addRoutes(to routes: inout RouteTable) {
        let gateway = gateway
        routes.on("/", .get) { _, _ -> Response in
            Response(status: .ok, headers: Self.dashboardHeaders, body: ResponseBody(byteBuffer: ByteBuffer(string: try await gateway.dashboardPage())))
        }
        routes.onGetAndHead("healthz") { _, _ in GatewayHTTP.json(.object(JSONObject([("status", "ok")]))) }
        routes.onGetAndHead("readyz") { _, _ in
            let (ready, body) = await gateway.readiness()
            return GatewayHTTP.json(.object(body), status: ready ? .ok : .serviceUnavailable)
        }
        routes.on("metrics", .get) { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                     body: ResponseBody(byteBuffer: ByteBuffer(bytes: gateway.metrics.render())))
        }
    }
}

/// Answers admin requests only when their `Host` names the admin listener: an IP address (with or without the
/// port), `localhost` for a loopback listener, or a name listed in `admin_hosts`. A page read through DNS
/// rebinding (`Host: attacker.example` resolved to this machine) gets `421 misdirected_request`.
struct AdminHostMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext
    let listen: GatewayConfiguration.HostAndPort
    let names: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard Self.accepts(host: request.head.authority, listen: listen, names: names) else {
            throw Problem(.misdirectedRequest, "misdirected_request", "Misdirected request",
                          "the admin listener answers only requests addressed to it by an IP address or a name in admin_hosts (Host header)")
        }
        return try await next(request, context)
    }

    /// Whether `host` (a `Host` header: `name`, `name:port`, `[v6]:port`) addresses the listener.
    static func accepts(host: String?, listen: GatewayConfiguration.HostAndPort, names: Set<String>) -> Bool {
        guard let host, !host.isEmpty else { return false }
        var name = Substring(host)
        var port: Substring?
        if name.hasPrefix("[") {
            guard let close = name.firstIndex(of: "]") else { return false }
            let rest = name[name.index(after: close)...]
            if rest.hasPrefix(":") { port = rest.dropFirst() } else if !rest.isEmpty { return false }
            name = name[name.index(after: name.startIndex)..<close]
        } else if let colon = name.lastIndex(of: ":") {
            port = name[name.index(after: colon)...]
            name = name[..<colon]
        }
        if let port, Int(port) == nil { return false }
        let lower = name.lowercased()
        if names.contains(lower) || lower == listen.host.lowercased() { return true }
        let ipv4 = !lower.isEmpty && lower.allSatisfy { $0 == "." || $0.isASCII && $0.isNumber }
        if ipv4 || lower.contains(":") { return true }  // an address literal: no DNS name to rebind
        let loopback = listen.host.hasPrefix("127.") || listen.host == "::1"
        return loopback && lower == "localhost"
    }
}

extension HTTPField.Name {
    static let contentSecurityPolicy = Self("Content-Security-Policy")!
    static let xFrameOptions = Self("X-Frame-Options")!
    static let referrerPolicy = Self("Referrer-Policy")!
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
}
