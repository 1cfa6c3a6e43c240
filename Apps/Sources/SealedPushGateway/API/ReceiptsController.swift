import Hummingbird
import NIOCore

/// The device endpoints (gateway v1 §6, receipts v1): `POST /v1/receipts` and `POST /v1/reports`, without a
/// bearer key, bodies of at most 4096 bytes. A device's report URL names its app (`/v1/reports?app=<id>`), so
/// that an unauthenticated report only ever touches that app's devices.
///
/// The per-source limit (`device_rate_limit`, revision 2) counts what a source got refused (`400`, `403`,
/// `404`, `413`) and every failure report, never a valid receipt: millions of phones behind one carrier NAT
/// address send valid receipts at any rate. A source over its budget still has each receipt checked; one
/// whose token matches is accepted, the others get `429` with `Retry-After`.
struct ReceiptsController {
    let gateway: Gateway

    func addRoutes(to routes: inout RouteTable) {
        for path in ["v1/receipts", "v1/reports"] {
            let gateway = gateway
            routes.on(path, .post) { request, context in
                let limiter = gateway.sourceLimiter
                let source = GatewayHTTP.sourceAddress(request, context, trusted: gateway.configuration.trustedProxies)
                let overBudget: Bool
                if path == "v1/reports" {
                    // Reports cannot be authenticated: every one counts.
                    guard limiter.admit(source) else { throw GatewayError.rateLimited(retryAfter: 1) }
                    overBudget = false
                } else {
                    overBudget = limiter.isExhausted(source)
                }
                /// A refusal: counted against the source, or `429` when it is over its budget already.
                func refuse(_ error: GatewayError) -> GatewayError {
                    if overBudget { return .rateLimited(retryAfter: 1) }
                    if path == "v1/receipts" { limiter.charge(source) }
                    return error
                }
                let tooLarge = GatewayError.tooLarge("a receipt or report is at most \(GatewayHTTP.maxDeviceBodyBytes) bytes (receipts v1 §4)")
                if let length = request.headers[.contentLength].flatMap(Int.init), length > GatewayHTTP.maxDeviceBodyBytes {
                    throw refuse(tooLarge)
                }
                let bytes: [UInt8]
                do { bytes = Array(try await request.body.collect(upTo: GatewayHTTP.maxDeviceBodyBytes).readableBytesView) } catch is NIOTooManyBytesError {
                    throw refuse(tooLarge)
                }
                switch await gateway.deviceEndpoint(body: bytes, path: path, reportApp: request.uri.queryParameters.get("app")) {
                case .accepted: return Response(status: path == "v1/reports" ? .accepted : .noContent)
                case .wrongToken: throw refuse(.forbidden("the receipt's token does not match the delivery it names"))
                case .unknownID: throw refuse(.notFound("no delivery has this message id"))
                case .unavailable: throw GatewayError.unavailable("the database did not answer; keep the receipt and retry later")
                case .malformed:
                    throw refuse(.invalidJSON(path == "v1/receipts" ? "the body is not a receipt as receipts v1 §2 describes"
                                                                    : "the body is not a failure report as receipts v1 §3 describes"))
                }
            }
        }
    }
}
