public import HTTPTypes
import Hummingbird
import PostgresNIO
import GRDB

/// Everything the gateway refuses or fails at, in its callers' terms (gateway v1 §3); `problem` turns each case
/// into the problem details the HTTP API answers, in this one place.
///
/// The request parsers, the `Gateway` service and the controllers throw these; an error of any other type that
/// reaches the HTTP layer is classified by `init(classifying:)`: a database that does not answer is
/// `unavailable` (503, retry), anything else `internal` (500, with the request id to report).
public enum GatewayError: Error, Sendable, Equatable {
    /// 400 `invalid_json`: the body is not a JSON object (or not the receipt or report it should be).
    case invalidJSON(String = "the body is not a JSON object; send a UTF-8 JSON object")
    /// 400 `invalid_field`: the member at the JSON pointer (empty for a path or query parameter or a header) is wrong.
    case invalidField(String, String)
    /// 400 `unknown_member`: the member at the JSON pointer is not part of the request.
    case unknownMember(String)
    /// 400 `unknown_member`: a query parameter is not part of the route; the detail lists the ones it takes.
    case unknownParameter(String)
    /// 401 `unauthorized`: no API key, or one no app has.
    case unauthorized
    /// 403 `forbidden`: the key belongs to another app or lacks the scope; the detail says which.
    case forbidden(String)
    /// 404 `not_found`.
    case notFound(String)
    /// 405 `method_not_allowed`, with the methods the route takes (`Allow`).
    case methodNotAllowed(allowed: [String])
    /// 409 `conflict` (with `Retry-After` when waiting helps).
    case conflict(String, retryAfter: Int? = nil)
    /// 410 `event_not_kept`: `GET …/events?after=` names no event of the app kept now (unknown, or older than the
    /// 7 days events are kept): events after it may be gone, so the receiver lists again without `after`.
    case eventNotKept
    /// 413 `too_large`, at the member whose size is at fault if one is.
    case tooLarge(String, field: String? = nil)
    /// 415 `unsupported_media_type`.
    case unsupportedMediaType
    /// 422 `idempotency_conflict`: the key was used with another body.
    case idempotencyConflict
    /// 422 `too_many_deliveries`: the message would make more deliveries than the app's `max_fanout` (gateway v1 §5).
    case tooManyDeliveries(deliveries: Int, limit: Int)
    /// 422 `platform_not_configured`: the device's platform has no section in the app's configuration (platforms v1 §1).
    case platformNotConfigured(PushPlatform)
    /// 422 with a code of its own (mailbox v1: `mailbox_disabled`, `message_too_large`), its title, detail and field.
    case unprocessable(code: String, title: String, detail: String, field: String?)
    /// 429 `rate_limited`.
    case rateLimited(retryAfter: Int)
    /// 503 `unavailable`: shutting down, queue full, database unreachable; retry after `retryAfter` seconds.
    case unavailable(String, retryAfter: Int = 5)
    /// 500 `internal`: a fault of the gateway itself; the detail names the request id to report.
    case `internal`(requestID: String)

    /// A failure of a type the gateway does not know, in its terms: the databases' connection and I/O failures
    /// are `unavailable`; every other error is `internal`.
    public init(classifying error: any Error, requestID: String) {
        if let error = error as? GatewayError {
            self = error
        } else if Self.isDatabaseUnavailable(error) {
            self = .unavailable("the database did not answer or cannot be written now (down, full or read-only); retry later")
        } else {
            self = .internal(requestID: requestID)
        }
    }

    /// Whether `error` says the database cannot be reached or written now (as opposed to a bug or a refused query).
    static func isDatabaseUnavailable(_ error: any Error) -> Bool {
        if let error = error as? GatewayStoreError { return error.isUnavailable }
        if let error = error as? PSQLError {
            switch error.code {
            case .connectionError, .serverClosedConnection, .clientClosedConnection, .poolClosed,
                 .queryCancelled, .uncleanShutdown, .messageDecodingFailure, .sslUnsupported, .failedToAddSSLHandler:
                return true
            case .server:
                // Class 08 (connection), 53 (insufficient resources: disk full, out of memory, too many connections), 57
                // (operator intervention: shutdown), 40001/40P01 (retry), 25006 (a read-only transaction: a standby, or
                // `default_transaction_read_only` during maintenance).
                let state = error.serverInfo?[.sqlState] ?? ""
                return state.hasPrefix("08") || state.hasPrefix("53") || state.hasPrefix("57") || state == "40001" || state == "40P01"
                    || state == "25006"
            default:
                return false
            }
        }
        if let error = error as? DatabaseError {
            switch error.resultCode {
            case .SQLITE_BUSY, .SQLITE_LOCKED, .SQLITE_IOERR, .SQLITE_FULL, .SQLITE_CANTOPEN, .SQLITE_READONLY, .SQLITE_PROTOCOL:
                return true
            default:
                return false
            }
        }
        return false
    }

    /// The HTTP status.
    public var status: HTTPResponse.Status { problem.status }

    /// The problem details this error answers (gateway v1 §3): its status, code, title, detail, field and headers.
    public var problem: Problem {
        switch self {
        case let .invalidJSON(detail):
            return Problem(.badRequest, "invalid_json", "Invalid JSON", detail)
        case let .invalidField(field, detail):
            return Problem(.badRequest, "invalid_field", "Invalid field", detail, field: field.isEmpty ? nil : field)
        case let .unknownMember(field):
            return Problem(.badRequest, "unknown_member", "Unknown member",
                           "this member is not part of the request; check its spelling against the API (gateway v1)", field: field)
        case let .unknownParameter(detail):
            return Problem(.badRequest, "unknown_member", "Unknown member", detail)
        case .unauthorized:
            var p = Problem(.unauthorized, "unauthorized", "Unauthorized", "send `Authorization: Bearer <api key>` with a key configured for this app")
            p.headers = [(.wwwAuthenticate, "Bearer")]
            return p
        case let .forbidden(detail):
            return Problem(.forbidden, "forbidden", "Forbidden", detail)
        case let .notFound(detail):
            return Problem(.notFound, "not_found", "Not found", detail)
        case let .methodNotAllowed(allowed):
            var p = Problem(.methodNotAllowed, "method_not_allowed", "Method not allowed",
                            "this route takes \(allowed.joined(separator: ", ")); see GET /openapi.json for the API")
            p.headers = [(.allow, allowed.joined(separator: ", "))]
            return p
        case let .conflict(detail, retryAfter):
            var p = Problem(.conflict, "conflict", "Conflict", detail)
            if let retryAfter { p.headers = [(.retryAfter, String(retryAfter))] }
            return p
        case .eventNotKept:
            return Problem(.gone, "event_not_kept", "Event not kept",
                           "after names no event of this app kept now (events are kept 7 days), so later events may be missing; "
                           + "list again without after and reconcile", field: nil)
        case let .tooLarge(detail, field):
            return Problem(.contentTooLarge, "too_large", "Too large", detail, field: field)
        case .unsupportedMediaType:
            return Problem(.unsupportedMediaType, "unsupported_media_type", "Unsupported media type",
                           "send the body with `Content-Type: application/json`")
        case .idempotencyConflict:
            return Problem(.unprocessableContent, "idempotency_conflict", "Idempotency conflict",
                           "this Idempotency-Key was used with a different body in the last 24 hours; use a new key for a new message")
        case let .tooManyDeliveries(deliveries, limit):
            return Problem(.unprocessableContent, "too_many_deliveries", "Too many deliveries",
                           "this message would make \(deliveries) deliveries and this app allows \(limit) per message (max_fanout); "
                           + "send it in several messages with fewer recipients, or raise the app's max_fanout", field: "/to")
        case let .platformNotConfigured(platform):
            return Problem(.unprocessableContent, "platform_not_configured", "Platform not configured",
                           "this app does not serve \(platform.rawValue) devices: its operator adds a \(platform.rawValue) section to the app in the gateway's configuration",
                           field: "/platform")
        case let .unprocessable(code, title, detail, field):
            return Problem(.unprocessableContent, code, title, detail, field: field)
        case let .rateLimited(retryAfter):
            var p = Problem(.tooManyRequests, "rate_limited", "Rate limited", "too many requests; retry after the number of seconds in Retry-After")
            p.headers = [(.retryAfter, String(retryAfter))]
            return p
        case let .unavailable(detail, retryAfter):
            var p = Problem(.serviceUnavailable, "unavailable", "Unavailable", detail)
            p.headers = [(.retryAfter, String(retryAfter))]
            return p
        case let .internal(requestID):
            return Problem(.internalServerError, "internal", "Internal error",
                           "the gateway failed to handle this request; nothing was sent for it. Retry later, and report Request-Id \(requestID) to its operator if it persists")
        }
    }
}

extension HTTPField.Name {
    static let allow = Self("Allow")!
}
