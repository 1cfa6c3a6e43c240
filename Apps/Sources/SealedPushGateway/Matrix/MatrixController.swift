import Hummingbird
import Logging
import HTTPTypes
import NIOCore
import SealedPushWire

/// The Matrix Push Gateway endpoint (matrix v1 §2) on `listen`: `POST /_matrix/push/v1/notify`, without an API key
/// (the Matrix API has none), its source checked against the apps' `matrix.allowed_sources`. Its answers and
/// errors are Matrix's (`{"rejected": […]}`, `{"errcode", "error"}`), never RFC 9457 problems.
struct MatrixController {
    let gateway: Gateway

    /// The path, as the router takes it.
    static let notifyPath = "_matrix/push/v1/notify"

    func addRoutes(to routes: inout RouteTable) {
        let gateway = gateway
        routes.on(Self.notifyPath, .post) { request, context in
            let source = GatewayHTTP.sourceAddress(request, context, trusted: gateway.configuration.trustedProxies)
            guard gateway.matrixAdmits(source: source) else {
                return Self.response(MatrixError.forbidden("this address is not among the allowed_sources of the gateway's Matrix apps; add the homeserver's address to matrix.allowed_sources"))
            }
            if let length = request.headers[.contentLength].flatMap(Int.init), length > MatrixNotification.maxBodyBytes {
                return Self.response(.tooLarge)
            }
            let bytes: [UInt8]
            do { bytes = Array(try await request.body.collect(upTo: MatrixNotification.maxBodyBytes).readableBytesView) } catch is NIOTooManyBytesError {
                return Self.response(.tooLarge)
            }
            do {
                let notification = try MatrixNotification(bytes)
                let rejected = try await gateway.matrixNotify(notification, source: source)
                return GatewayHTTP.json(.object(JSONObject([("rejected", .array(rejected.map { .string($0) }))])))
            } catch let error as MatrixError {
                return Self.response(error)
            } catch {
                let classified = GatewayError(classifying: error, requestID: context.requestID)
                if case let .unavailable(detail, retryAfter) = classified { return Self.response(.unavailable(detail, retryAfter: retryAfter)) }
                gateway.logger.error("matrix notify failed", metadata: ["request_id": "\(context.requestID)", "error": "\(String(reflecting: type(of: error)))"])
                return Self.response(.internal(requestID: context.requestID))
            }
        }
    }

    /// A Matrix error as its response.
    static func response(_ error: MatrixError) -> Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter = error.retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(status: .init(code: error.status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(bytes: error.json)))
    }
}

/// Under `/_matrix/`, the router's own refusals as Matrix errors (matrix v1 §2): an unknown path `404
/// M_UNRECOGNIZED`, a wrong method `405 M_UNRECOGNIZED`, anything else thrown `500 M_UNKNOWN`. Other paths pass.
struct MatrixErrorMiddleware: RouterMiddleware {
    typealias Context = GatewayRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard request.uri.path.hasPrefix("/_matrix/") || request.uri.path == "/_matrix" else { return try await next(request, context) }
        do { return try await next(request, context) } catch let error as GatewayError {
            if case .methodNotAllowed = error {
                var response = MatrixController.response(.methodNotAllowed)
                response.headers[.allow] = "POST"
                return response
            }
            if case .notFound = error { return MatrixController.response(.unrecognized) }
            return MatrixController.response(.internal(requestID: context.requestID))
        } catch let error as HTTPError where error.status == .notFound {
            return MatrixController.response(.unrecognized)
        } catch let error as HTTPError where error.status == .methodNotAllowed {
            return MatrixController.response(.methodNotAllowed)
        } catch {
            return MatrixController.response(.internal(requestID: context.requestID))
        }
    }
}

extension Gateway {
    /// Whether any app with a `matrix` section takes notifications from `source` (or no app has one: every pushkey
    /// is then rejected as not configured, so that homeservers drop their pushers).
    func matrixAdmits(source: String) -> Bool {
        let sections = apps.values.compactMap(\.config.matrix)
        return sections.isEmpty || sections.contains { $0.allows(source: source) }
    }
}
