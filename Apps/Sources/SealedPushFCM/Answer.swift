#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import SealedPushWire

/// What a delivery attempt to a push service came to, in platform-neutral terms (platforms v1 §2, gateway v1 §5–§6).
public enum FCMOutcome: Sendable, Equatable {
    /// The push service took the message; `name` is its id (`platform_id`), when its answer said it.
    case accepted(name: String?)
    /// The address is gone: the delivery ends `unregistered` and the device is marked unregistered.
    case unregistered(reason: String)
    /// The push service refused this message for good: the delivery ends `rejected`.
    case rejected(reason: String)
    /// Try again later with backoff, not before `retryAfter` when the service said so, never past `expires_at`.
    case retry(reason: String, retryAfter: Duration?)
    /// The access token was refused (401): renew it and try once more at once.
    case renewTokenAndRetry(reason: String)
    /// The credentials are refused: pause the app (reason `credentials_paused`); `reason` is the push service's.
    case pauseCredentials(reason: String)

    /// The reason a delivery records (`nil` for `accepted`).
    public var reason: String? {
        switch self {
        case .accepted: nil
        case let .unregistered(reason), let .rejected(reason), let .retry(reason, _), let .renewTokenAndRetry(reason),
             let .pauseCredentials(reason): reason
        }
    }
}

/// An FCM error answer's body, `{"error": {"code", "status", "message", "details": […]}}`, as far as it was readable.
public struct FCMErrorBody: Sendable, Equatable {
    /// `error.code`.
    public var code: Int?
    /// `error.status` (e.g. `INVALID_ARGUMENT`), when it is an upper-case code.
    public var status: String?
    /// `error.message` (printable ASCII, at most 512 characters).
    public var message: String?
    /// `errorCode` of the detail of type `type.googleapis.com/google.firebase.fcm.v1.FcmError`, when it is an upper-case code.
    public var errorCode: String?
    /// The `field` of every `fieldViolations` entry of `type.googleapis.com/google.rpc.BadRequest` details.
    public var fieldViolations: [String]

    /// A body from its parts.
    public init(code: Int? = nil, status: String? = nil, message: String? = nil, errorCode: String? = nil, fieldViolations: [String] = []) {
        self.code = code
        self.status = status
        self.message = message
        self.errorCode = errorCode
        self.fieldViolations = fieldViolations
    }

    /// The delivery's reason: `errorCode`, else `status`.
    public var reason: String? { errorCode ?? status }
}

/// Classifies FCM HTTP v1 answers to `messages:send` (platforms v1 §2's table).
public enum FCMAnswer {
    /// The most answer-body bytes read; a longer body counts as unreadable.
    public static let maximumBodyBytes = 64 * 1024
    /// The `@type` of FCM's own error detail.
    public static let fcmErrorType = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
    /// The `@type` of Google's field-violation detail.
    public static let badRequestType = "type.googleapis.com/google.rpc.BadRequest"

    /// The outcome of `response` at time `now` (for a `Retry-After` date):
    ///
    /// | answer | outcome |
    /// |---|---|
    /// | 2xx (FCM answers 200 `{"name"}`) | `accepted(name)`; `name` is `nil` when the body does not say it |
    /// | 404 `UNREGISTERED`, 403 `SENDER_ID_MISMATCH`, 400 `INVALID_ARGUMENT` naming the token | `unregistered` |
    /// | other 400, 404, 413, other 4xx | `rejected` |
    /// | 401 | `renewTokenAndRetry` (the caller renews once; a second 401 pauses) |
    /// | 403 other than `SENDER_ID_MISMATCH` (`PERMISSION_DENIED`, …) | `pauseCredentials` |
    /// | 408, 429, 5xx | `retry`, with `Retry-After` |
    /// | anything else (1xx, 3xx) | `rejected` |
    ///
    /// The reason is the `FcmError` detail's `errorCode`, else `error.status`, else `HTTP <status>` (a body that is
    /// not FCM's error JSON, or is cut off at the read limit, is classified by its status alone).
    public static func classify(_ response: FCMHTTPResponse, now: Date) -> FCMOutcome {
        let status = response.status
        if (200..<300).contains(status) {
            return .accepted(name: response.bodyTruncated ? nil : acceptedName(response.body))
        }
        let error = response.bodyTruncated ? nil : errorBody(response.body)
        let reason = error?.reason ?? "HTTP \(status)"
        switch status {
        case 400:
            if let error, error.status == "INVALID_ARGUMENT" || error.errorCode == "INVALID_ARGUMENT", namesToken(error) {
                return .unregistered(reason: reason)
            }
            return .rejected(reason: reason)
        case 401:
            return .renewTokenAndRetry(reason: reason)
        case 403:
            if error?.errorCode == "SENDER_ID_MISMATCH" { return .unregistered(reason: reason) }
            return .pauseCredentials(reason: reason)
        case 404:
            if error?.errorCode == "UNREGISTERED" { return .unregistered(reason: reason) }
            return .rejected(reason: reason)
        case 408, 429, 500..<600:
            return .retry(reason: reason, retryAfter: retryAfter(response.headers["retry-after"], now: now))
        default:
            return .rejected(reason: reason)
        }
    }

    /// Whether an `INVALID_ARGUMENT` answer is about the registration token rather than the message: a
    /// `google.rpc.BadRequest` field violation on `message.token`, or — as FCM answers a token that is not one
    /// ("The registration token is not a valid FCM registration token", with an `FcmError` detail and no field
    /// violations) — no field violation on another field and a message that speaks of the registration token.
    public static func namesToken(_ error: FCMErrorBody) -> Bool {
        if error.fieldViolations.contains("message.token") { return true }
        guard error.fieldViolations.isEmpty, let message = error.message?.lowercased() else { return false }
        return message.contains("registration token") || message.contains("message.token")
    }

    /// The `name` of a 200 answer (`projects/…/messages/…`), or `nil` when the body is not `{"name": string}` with
    /// 1–512 printable ASCII characters.
    public static func acceptedName(_ body: [UInt8]) -> String? {
        guard case let .object(object)? = try? JSON.parse(body, maxDepth: 8), let name = object["name"]?.stringValue,
              (1...512).contains(name.utf8.count), name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
        else { return nil }
        return name
    }

    /// FCM's error JSON, or `nil` when `body` is not `{"error": {…}}`. Codes that are not 1–64 of `[A-Z0-9_]` are dropped.
    public static func errorBody(_ body: [UInt8]) -> FCMErrorBody? {
        guard case let .object(object)? = try? JSON.parse(body, maxDepth: 16), case let .object(error)? = object["error"] else {
            return nil
        }
        var result = FCMErrorBody()
        result.code = error["code"]?.intValue.flatMap { Int(exactly: $0) }
        result.status = error["status"]?.stringValue.flatMap(code)
        result.message = error["message"]?.stringValue.map {
            String(String.UnicodeScalarView($0.unicodeScalars.lazy.filter { $0.value >= 0x20 && $0.value < 0x7F }.prefix(512)))
        }
        if case let .array(details)? = error["details"] {
            for case let .object(detail) in details {
                switch detail["@type"]?.stringValue {
                case fcmErrorType?:
                    if result.errorCode == nil { result.errorCode = detail["errorCode"]?.stringValue.flatMap(code) }
                case badRequestType?:
                    if case let .array(violations)? = detail["fieldViolations"] {
                        for case let .object(violation) in violations {
                            if let field = violation["field"]?.stringValue { result.fieldViolations.append(String(field.prefix(128))) }
                        }
                    }
                default: break
                }
            }
        }
        return result
    }

    /// `s` when it is an upper-case error code (1–64 of `[A-Z0-9_]`), else `nil`.
    static func code(_ s: String) -> String? {
        (1...64).contains(s.utf8.count) && s.utf8.allSatisfy({ ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x5F }) ? s : nil
    }

    /// A `Retry-After` value (RFC 9110 §10.2.3) as a delay from `now`: delay-seconds, or an HTTP-date (IMF-fixdate,
    /// RFC 850 or asctime form; a date in the past is zero). `nil` when absent or unreadable.
    public static func retryAfter(_ value: String?, now: Date) -> Duration? {
        guard let raw = value else { return nil }
        let value = String(raw.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
        guard !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
            guard value.utf8.count <= 9, let seconds = Int64(value) else { return nil }
            return .seconds(seconds)
        }
        guard let date = httpDate(value) else { return nil }
        let delay = date.timeIntervalSince(now)
        return delay > 0 ? .seconds(Int64(delay.rounded(.up))) : .zero
    }

    /// Parses an HTTP-date in any of RFC 9110's three forms (always GMT).
    public static func httpDate(_ text: String) -> Date? {
        let tokens = text.split(whereSeparator: { $0 == " " || $0 == "," || $0 == "-" || $0 == ":" }).map(String.init)
        let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
        var day: Int?, month: Int?, year: Int?, hour: Int?, minute: Int?, second: Int?
        if tokens.count == 8, tokens[7] == "GMT" {
            // IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT" or RFC 850 "Sunday, 06-Nov-94 08:49:37 GMT".
            day = Int(tokens[1])
            month = months.firstIndex(of: tokens[2].lowercased()).map { $0 + 1 }
            if let y = Int(tokens[3]) {
                year = tokens[3].count == 4 ? y : tokens[3].count == 2 ? (y < 70 ? 2000 + y : 1900 + y) : nil
            }
            (hour, minute, second) = (Int(tokens[4]), Int(tokens[5]), Int(tokens[6]))
        } else if tokens.count == 7 {
            // asctime "Sun Nov  6 08:49:37 1994".
            month = months.firstIndex(of: tokens[1].lowercased()).map { $0 + 1 }
            day = Int(tokens[2])
            (hour, minute, second) = (Int(tokens[3]), Int(tokens[4]), Int(tokens[5]))
            year = tokens[6].count == 4 ? Int(tokens[6]) : nil
        }
        guard let day, let month, let year, let hour, let minute, let second,
              (1...31).contains(day), (0...23).contains(hour), (0...59).contains(minute), (0...60).contains(second),
              (1900...9999).contains(year)
        else { return nil }
        // Days from 1970-01-01 to the civil date (Howard Hinnant's days_from_civil).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        let days = era * 146_097 + doe - 719_468
        return Date(timeIntervalSince1970: TimeInterval(days * 86_400 + hour * 3600 + minute * 60 + second))
    }
}
