public import Hummingbird
public import HTTPTypes
public import SealedPushWire
import Crypto
import NIOConcurrencyHelpers
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// RFC 3339 UTC times with milliseconds and a `Z` (gateway v1: `2026-11-23T20:57:27.123Z`).
public enum GatewayTime {
    /// Formats Unix milliseconds.
    public static func format(_ ms: Int64) -> String {
        let seconds = ms >= 0 ? ms / 1000 : (ms - 999) / 1000
        let millis = ms - seconds * 1000
        var text = Timestamp.format(Date(timeIntervalSince1970: Double(seconds)))
        text.removeLast()  // the Z
        let m = String(millis)
        return text + "." + String(repeating: "0", count: 3 - m.count) + m + "Z"
    }

    /// Parses an RFC 3339 UTC time (`Z`, optional fraction) to Unix milliseconds; `nil` otherwise.
    public static func parse(_ text: String) -> Int64? {
        guard let date = Timestamp.parse(text) else { return nil }
        return Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
    }

    /// A JSON time, or null.
    static func json(_ ms: Int64?) -> JSONValue { ms.map { .string(format($0)) } ?? .null }
}

/// A problem details answer (RFC 9457, gateway v1 §3), written as `application/problem+json`: made from a
/// `GatewayError` (`GatewayError.problem`), the one place that maps errors to problems.
public struct Problem: Error, HTTPResponseError, Sendable {
    /// The HTTP status.
    public let status: HTTPResponse.Status
    /// The code after `urn:sealedpush:problem:`.
    public let code: String
    /// A short, fixed summary of the code.
    public let title: String
    /// What happened and what to do; never quotes a request value.
    public let detail: String
    /// The member at fault (a JSON pointer), if one is.
    public let field: String?
    /// Extra headers (`Retry-After`, `WWW-Authenticate`).
    public var headers: [(HTTPField.Name, String)] = []

    /// A problem.
    public init(_ status: HTTPResponse.Status, _ code: String, _ title: String, _ detail: String, field: String? = nil) {
        self.status = status
        self.code = code
        self.title = title
        self.detail = detail
        self.field = field
    }

    /// The body.
    public var json: [UInt8] {
        var o = JSONObject([("type", .string("urn:sealedpush:problem:" + code)), ("title", .string(title)),
                            ("status", .int(Int64(status.code))), ("detail", .string(detail))])
        if let field { o["field"] = .string(field) }
        return JSON.serialize(.object(o))
    }

    /// The response.
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var fields = HTTPFields()
        fields[.contentType] = "application/problem+json"
        for (name, value) in headers { fields[name] = value }
        return Response(status: status, headers: fields, body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
    }
}

/// RFC 8785 (JSON Canonicalization Scheme) serialization: members sorted by their UTF-16 code units, no
/// whitespace, minimal string escapes, numbers as ECMAScript prints them.
public enum CanonicalJSON {
    /// The canonical bytes of `value`.
    public static func serialize(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        write(value, into: &out)
        return out
    }

    static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out += Array("null".utf8)
        case let .bool(b): out += Array((b ? "true" : "false").utf8)
        case let .int(i): out += Array(String(i).utf8)
        case let .double(d): out += Array(number(d).utf8)
        case let .string(s): string(s, into: &out)
        case let .array(a):
            out.append(UInt8(ascii: "["))
            for (n, e) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                write(e, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(o):
            out.append(UInt8(ascii: "{"))
            let sorted = o.members.sorted { Array($0.key.utf16).lexicographicallyPrecedes(Array($1.key.utf16)) }
            for (n, m) in sorted.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                string(m.key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(m.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// ECMAScript's Number-to-String for finite doubles (integers without a fraction, shortest round trip otherwise).
    static func number(_ d: Double) -> String {
        guard d.isFinite else { return "null" }
        if d == 0 { return "0" }
        if d == d.rounded(), abs(d) < 9.2e18, let i = Int64(exactly: d) { return String(i) }
        var text = "\(d)"  // Swift prints the shortest representation that round-trips
        if let e = text.firstIndex(of: "e") {
            let exponent = text[text.index(after: e)...]
            text = String(text[..<e]) + "e" + (exponent.hasPrefix("-") ? exponent : "+" + exponent)
        }
        return text
    }

    static let hex = Array("0123456789abcdef".utf8)

    static func string(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for c in s.utf8 {
            switch c {
            case 0x22: out += [0x5c, 0x22]
            case 0x5c: out += [0x5c, 0x5c]
            case 0x08: out += [0x5c, UInt8(ascii: "b")]
            case 0x0c: out += [0x5c, UInt8(ascii: "f")]
            case 0x0a: out += [0x5c, UInt8(ascii: "n")]
            case 0x0d: out += [0x5c, UInt8(ascii: "r")]
            case 0x09: out += [0x5c, UInt8(ascii: "t")]
            case 0..<0x20: out += Array("\\u00".utf8) + [hex[Int(c >> 4)], hex[Int(c & 0xf)]]
            default: out.append(c)
            }
        }
        out.append(UInt8(ascii: "\""))
    }
}

/// HMAC-SHA-256 and SHA-256 (swift-crypto) for idempotency body hashes and API keys.
enum Digests {
    static func hmac(key: [UInt8], message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    static func sha256(_ bytes: some Sequence<UInt8>) -> [UInt8] { Array(SHA256.hash(data: Array(bytes))) }
}

/// Writes waiting for a store's next transaction (group commit): callers queue theirs, one writer at a time takes
/// all that are queued and runs them in one transaction, until none are left.
final class WriteQueue<Job: Sendable>: Sendable {
    let state = NIOLockedValueBox<(jobs: [Job], writing: Bool)>(([], false))

    /// Queues `job`; true when no writer runs and the caller must start one.
    func enqueue(_ job: Job) -> Bool {
        state.withLockedValue { s in
            s.jobs.append(job)
            guard !s.writing else { return false }
            s.writing = true
            return true
        }
    }

    /// Everything queued, or nil (and the writer stops) when nothing is.
    func takeAll() -> [Job]? {
        state.withLockedValue { s in
            guard !s.jobs.isEmpty else {
                s.writing = false
                return nil
            }
            defer { s.jobs.removeAll(keepingCapacity: true) }
            return s.jobs
        }
    }
}

extension JSONValue {
    /// The value as an integer when it is a JSON number whose value is an integer that fits in 64 bits: `7`,
    /// and also `7.0` or `7e0`, which JSON does not tell apart from `7` and JSON Schema's `integer` admits
    /// (the OpenAPI document's integers). Nil for any other value, a fraction or a number out of range.
    var integralValue: Int64? {
        switch self {
        case let .int(i): return i
        case let .double(d) where d.isFinite && d.rounded(.towardZero) == d: return Int64(exactly: d)
        default: return nil
        }
    }

    /// This value with every number that is an integer written as one (`.double(7.0)` becomes `.int(7)`, at any
    /// depth), so that a reader expecting integers takes `7.0` as the document's `integer` type promises.
    var integralNumbersAsIntegers: JSONValue {
        switch self {
        case let .double(d): return integralValue.map(JSONValue.int) ?? .double(d)
        case let .array(items): return .array(items.map(\.integralNumbersAsIntegers))
        case let .object(o): return .object(JSONObject(o.map { ($0.key, $0.value.integralNumbersAsIntegers) }))
        default: return self
        }
    }
}
