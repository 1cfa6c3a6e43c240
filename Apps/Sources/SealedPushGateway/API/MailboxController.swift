import Hummingbird
import NIOCore
import SealedPushWire

/// The mailbox routes (mailbox v1 §3, §7): `POST /v1/mailbox/fetch`, `/v1/mailbox/challenge` and `/v1/mailbox/list`,
/// without an API key (the handle, or the device key, is the capability), bodies of at most 1 KiB, answers
/// `Cache-Control: no-store`.
///
/// The per-source limit (`device_rate_limit`, gateway v1 §6) counts what a source got refused (`400`, `403`,
/// `404`, `413`), never a fetch that found its message nor a `410`, and every challenge (each is a row the store
/// keeps for 60 s). A source over its budget still has each fetch checked: one that finds its message is answered,
/// the others get `429` with `Retry-After`.
struct MailboxController {
    let gateway: Gateway

    func addRoutes(to routes: inout RouteTable) {
        for route in ["fetch", "challenge", "list"] {
            let gateway = gateway
            routes.on("v1/mailbox/\(route)", .post) { request, context in
                let limiter = gateway.sourceLimiter
                let source = GatewayHTTP.sourceAddress(request, context, trusted: gateway.configuration.trustedProxies)
                if route == "challenge" {
                    guard limiter.admit(source) else {
                        gateway.metrics.mailbox(route: route, answer: "rate_limited")
                        throw GatewayError.rateLimited(retryAfter: 1)
                    }
                }
                let overBudget = route != "challenge" && limiter.isExhausted(source)
                /// A refusal: counted against the source, or `429` when it is over its budget already.
                func refuse(_ problem: Problem, answer: String) -> Problem {
                    if overBudget {
                        gateway.metrics.mailbox(route: route, answer: "rate_limited")
                        return GatewayError.rateLimited(retryAfter: 1).problem
                    }
                    if route != "challenge" { limiter.charge(source) }
                    gateway.metrics.mailbox(route: route, answer: answer)
                    return problem
                }
                let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingASCIISpaces().lowercased()
                guard type == "application/json" else { throw refuse(GatewayError.unsupportedMediaType.problem, answer: "invalid") }
                if let length = request.headers[.contentLength].flatMap(Int.init), length > Gateway.maxMailboxBodyBytes {
                    throw refuse(MailboxProblem.bodyTooLarge, answer: "too_large")
                }
                let bytes: [UInt8]
                do { bytes = Array(try await request.body.collect(upTo: Gateway.maxMailboxBodyBytes).readableBytesView) } catch is NIOTooManyBytesError {
                    throw refuse(MailboxProblem.bodyTooLarge, answer: "too_large")
                }
                let answer: MailboxAnswer
                do {
                    switch route {
                    case "fetch": answer = try await gateway.mailboxFetch(body: bytes)
                    case "challenge": answer = try await gateway.mailboxChallenge(body: bytes)
                    default: answer = try await gateway.mailboxList(body: bytes)
                    }
                } catch {
                    gateway.metrics.mailbox(route: route, answer: "unavailable")
                    throw GatewayError.unavailable("the database did not answer; retry later")
                }
                switch answer {
                case let .ok(body):
                    gateway.metrics.mailbox(route: route, answer: "ok")
                    return Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                                    body: ResponseBody(byteBuffer: ByteBuffer(bytes: JSON.serialize(.object(body)))))
                case let .gone(reason):
                    gateway.metrics.mailbox(route: route, answer: reason.rawValue)
                    throw MailboxProblem.gone(reason)
                case let .refused(problem):
                    throw refuse(problem, answer: problem.code == "invalid_json" || problem.code == "invalid_field" ? "invalid" : problem.code)
                }
            }
        }
    }
}
