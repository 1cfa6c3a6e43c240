public import SealedPushCrypto

/// The body member `receipt` (receipts v1 §1): where the device reports that it opened the message,
/// and the token that proves it did.
///
/// The token travels only inside the sealed body, so a receipt carrying it proves that someone holding
/// the device key opened this message. The token is a secret until the receipt is sent: never log it.
public struct ReceiptRequest: Sendable, Equatable {
    /// Where the receipt is POSTed: an absolute `https` URL (`http` only to `localhost`, `127.0.0.0/8`, `[::1]`).
    public var url: String
    /// base64url without padding of 16 to 64 random bytes.
    public var token: String

    /// The longest `url`, in bytes.
    public static let maximumURLLength = 2048
    /// How many random bytes a token may hold.
    public static let tokenByteCounts = 16...64

    /// A request from its members (not validated; `init(validating:)` and `MessageSealer` check them).
    public init(url: String, token: String) {
        self.url = url
        self.token = token
    }

    /// A fresh token: base64url without padding of `byteCount` random bytes (default 16).
    public static func makeToken(byteCount: Int = 16) -> String {
        Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: byteCount))
    }

    /// The member as a JSON object: `{"url", "token"}`.
    public var jsonObject: JSONObject { JSONObject([("url", .string(url)), ("token", .string(token))]) }

    /// Why `url` cannot be a receipt URL, or `nil` when it can (§1).
    public static func urlProblem(_ url: String) -> String? {
        guard url.utf8.count <= maximumURLLength else { return "is longer than \(maximumURLLength) bytes" }
        guard let parts = HTTPURL(url) else { return "is not an absolute http(s) URL" }
        switch parts.scheme {
        case "https": return nil
        case "http": return parts.isLoopback ? nil : "must be https (http only to localhost, 127.0.0.0/8 or [::1])"
        default: return "must be https (http only to localhost, 127.0.0.0/8 or [::1])"
        }
    }

    /// Why `token` cannot be a receipt token, or `nil` when it can: base64url without padding of 16 to 64 bytes.
    public static func tokenProblem(_ token: String) -> String? {
        guard let bytes = try? Base64.decodeURLSafeNoPadding(token) else { return "is not base64url without padding" }
        guard tokenByteCounts.contains(bytes.count) else { return "must encode 16 to 64 bytes (it encodes \(bytes.count))" }
        return nil
    }

    /// Reads and validates the member (§1); anything wrong is `malformedMessage`. The messages never quote the token.
    public init(validating value: JSONValue) throws(OpenFailure) {
        func fail(_ why: String) -> OpenFailure { OpenFailure(.malformedMessage, "receipt: \(why)") }
        guard case let .object(o) = value else { throw fail("member 'receipt' must be an object") }
        guard let urlValue = o["url"] else { throw fail("member 'url' is required") }
        guard case let .string(url) = urlValue else { throw fail("member 'url' must be a string") }
        if let problem = Self.urlProblem(url) { throw fail("member 'url' \(problem)") }
        guard let tokenValue = o["token"] else { throw fail("member 'token' is required") }
        guard case let .string(token) = tokenValue else { throw fail("member 'token' must be a string") }
        if let problem = Self.tokenProblem(token) { throw fail("member 'token' \(problem)") }
        self.init(url: url, token: token)
    }
}

/// An absolute `http`/`https` URL split into the parts a receipt needs (strict: ASCII, no whitespace).
public struct HTTPURL: Sendable, Equatable {
    /// `http` or `https`, lowercased.
    public let scheme: String
    /// The host as written (IPv6 literals keep their brackets), lowercased.
    public let host: String
    /// The port, or `nil` for the scheme's default.
    public let port: Int?
    /// The path and query (`/` when empty).
    public let pathAndQuery: String

    /// Parses `scheme://host[:port][/path][?query]`; `nil` for anything else (user info and fragments are refused).
    ///
    /// Works on the UTF-8 bytes (every one must be printable ASCII): a device's receipt outbox parses each
    /// queued URL, up to 2048 bytes, on every change.
    public init?(_ text: String) {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return nil }
        func lowercased(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
        func startsCaseInsensitive(_ prefix: String) -> Bool {
            let p = Array(prefix.utf8)
            return bytes.count >= p.count && zip(bytes, p).allSatisfy { lowercased($0) == $1 }
        }
        let rest: ArraySlice<UInt8>
        if startsCaseInsensitive("https://") { scheme = "https"; rest = bytes[8...] }
        else if startsCaseInsensitive("http://") { scheme = "http"; rest = bytes[7...] }
        else { return nil }
        guard !rest.contains(UInt8(ascii: "#")) else { return nil }
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") } ?? rest.endIndex
        let authority = rest[rest.startIndex..<authorityEnd]
        guard !authority.isEmpty, !authority.contains(UInt8(ascii: "@")) else { return nil }
        var hostPart = authority
        var portPart: ArraySlice<UInt8>?
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return nil }
            hostPart = authority[...close]
            let tail = authority[(close + 1)...]
            if !tail.isEmpty {
                guard tail.first == UInt8(ascii: ":") else { return nil }
                portPart = tail.dropFirst()
            }
            let isHex = { (b: UInt8) in (b >= 0x30 && b <= 0x39) || (lowercased(b) >= 0x61 && lowercased(b) <= 0x66) }
            guard hostPart.count > 2,
                  hostPart.dropFirst().dropLast().allSatisfy({ isHex($0) || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") })
            else { return nil }
        } else if let colon = authority.firstIndex(of: UInt8(ascii: ":")) {
            hostPart = authority[..<colon]
            portPart = authority[(colon + 1)...]
        }
        guard !hostPart.isEmpty else { return nil }
        if let portPart {
            guard (1...5).contains(portPart.count), portPart.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
            let p = portPart.reduce(0) { $0 * 10 + Int($1 - 0x30) }
            guard (1...65535).contains(p) else { return nil }
            port = p
        } else {
            port = nil
        }
        host = String(decoding: hostPart.map(lowercased), as: UTF8.self)
        let path = rest[authorityEnd...]
        pathAndQuery = path.isEmpty ? "/" : (path.first == UInt8(ascii: "?") ? "/" : "") + String(decoding: path, as: UTF8.self)
    }

    /// The URL's origin, `scheme://host:port` with the scheme's default port written out (`https://a.example:443`):
    /// the unit a device's outbox queues, backs off and counts dropped entries by (receipts from one origin never
    /// wait on, or learn about, another's).
    public var origin: String { "\(scheme)://\(host):\(port ?? (scheme == "https" ? 443 : 80))" }

    /// Whether the host is `localhost`, in `127.0.0.0/8`, or `[::1]` (`AttachmentURLPolicy.isLoopback(host:)`).
    public var isLoopback: Bool { AttachmentURLPolicy.isLoopback(host: host) }
}

/// What an opened message's attachments came to, as a receipt reports it (§2).
public struct ReceiptAttachmentCounts: Sendable, Equatable {
    /// How many were attached.
    public var attached: Int
    /// How many failed, by reason code.
    public var failed: [String: Int]

    /// Counts from their parts.
    public init(attached: Int, failed: [String: Int] = [:]) {
        self.attached = attached
        self.failed = failed
    }

    /// `{"attached": n, "failed": {"<reason>": count, …}}`, reasons sorted.
    public var jsonObject: JSONObject {
        JSONObject([("attached", .int(Int64(attached))),
                    ("failed", .object(JSONObject(failed.sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })))])
    }
}

/// A message a device POSTs to a receipt or report URL (receipts v1 §2 and §3).
public enum ReceiptMessage: Sendable, Equatable {
    /// §2: the message `id` opened; `token` is the one its body carried.
    case delivered(id: String, token: String, at: Int64, attachments: ReceiptAttachmentCounts?)
    /// Reveal v1 §6: a content extension revealed message `id` (its outer body carried `token`); the §2
    /// members with `"type": "revealed"`.
    case revealed(id: String, token: String, at: Int64, attachments: ReceiptAttachmentCounts?)
    /// §3: a message sealed to `kid` (`nil`: no envelope key id could be read) failed with `reason`;
    /// `count` failures are reported by this one.
    case failed(reason: ReasonCode, kid: KeyID?, at: Int64, count: Int)

    /// The largest request body a collector accepts (§4: 413 above).
    public static let maximumBodyBytes = 4096

    /// The reason codes a failure report carries: the checks of wire format v1 §5, except `replayed`.
    public static let reportableReasons: Set<ReasonCode> = [
        .malformedPayload, .unsupportedVersion, .unknownKey, .decryptionFailed, .badPadding, .malformedMessage,
        .recipientMismatch, .untrustedSender, .badSignature, .signatureRequired, .expired, .notYetValid, .keychainLocked,
    ]

    /// The JSON object of §2 or §3, with `"dropped": n` when an outbox reports entries it dropped.
    public func jsonObject(dropped: Int = 0) -> JSONObject {
        var o = JSONObject()
        o["v"] = .int(1)
        switch self {
        case let .delivered(id, token, at, attachments), let .revealed(id, token, at, attachments):
            if case .revealed = self { o["type"] = .string("revealed") } else { o["type"] = .string("delivered") }
            o["id"] = .string(id)
            o["token"] = .string(token)
            o["at"] = .int(at)
            if let attachments { o["attachments"] = .object(attachments.jsonObject) }
        case let .failed(reason, kid, at, count):
            o["type"] = .string("failed")
            o["reason"] = .string(reason.rawValue)
            o["kid"] = kid.map { .string($0.hex) } ?? .null
            o["at"] = .int(at)
            o["count"] = .int(Int64(count))
        }
        if dropped > 0 { o["dropped"] = .int(Int64(dropped)) }
        return o
    }

    /// The size every body a device posts is padded to when it fits (all bodies a device makes do), so a body's
    /// size tells an observer nothing about attachment failures, the id's length or the dropped count.
    public static let paddedBodyBytes = 512

    /// The §2 or §3 body as posted: the JSON object (with `dropped`), then spaces (JSON whitespace, which every
    /// JSON parser and `parse` accept) up to `paddedBodyBytes`, or to the next multiple of 256 bytes for a
    /// longer body.
    public func paddedBody(dropped: Int = 0) -> [UInt8] {
        var body = JSON.serialize(.object(jsonObject(dropped: dropped)))
        let target = body.count <= Self.paddedBodyBytes ? Self.paddedBodyBytes : (body.count + 255) / 256 * 256
        body.append(contentsOf: repeatElement(0x20, count: target - body.count))
        return body
    }

    /// Reads a §2 (or reveal v1 §6 `revealed`) or §3 body strictly (a collector's check: anything else is a `400`), with its `dropped` count.
    /// Unknown members are refused; the message never quotes the token. Whitespace around the object (a
    /// device's padding) is accepted up to the 4096-byte limit.
    public static func parse(_ bytes: [UInt8]) -> (message: ReceiptMessage, dropped: Int)? {
        guard bytes.count <= maximumBodyBytes, case let .object(o)? = try? JSON.parse(bytes), o["v"] == .int(1),
              case let .string(type)? = o["type"], case let .int(at)? = o["at"], at >= 0 else { return nil }
        var dropped = 0
        if let d = o["dropped"] {
            guard case let .int(n) = d, n >= 1, n <= Int64(Int32.max) else { return nil }
            dropped = Int(n)
        }
        switch type {
        case "delivered", "revealed":
            guard o.allSatisfy({ ["v", "type", "id", "token", "at", "attachments", "dropped"].contains($0.key) }),
                  case let .string(id)? = o["id"], (1...64).contains(id.utf8.count),
                  case let .string(token)? = o["token"], ReceiptRequest.tokenProblem(token) == nil else { return nil }
            var counts: ReceiptAttachmentCounts?
            if let a = o["attachments"] {
                guard case let .object(ao) = a, ao.count == 2, case let .int(attached)? = ao["attached"], (0...4).contains(attached),
                      case let .object(failed)? = ao["failed"] else { return nil }
                var byReason: [String: Int] = [:]
                for (reason, value) in failed {
                    guard ReasonCode(rawValue: reason) != nil, case let .int(n) = value, (1...4).contains(n) else { return nil }
                    byReason[reason] = Int(n)
                }
                guard Int(attached) + byReason.values.reduce(0, +) <= 4 else { return nil }
                counts = ReceiptAttachmentCounts(attached: Int(attached), failed: byReason)
            }
            if type == "revealed" { return (.revealed(id: id, token: token, at: at, attachments: counts), dropped) }
            return (.delivered(id: id, token: token, at: at, attachments: counts), dropped)
        case "failed":
            guard o.allSatisfy({ ["v", "type", "reason", "kid", "at", "count", "dropped"].contains($0.key) }),
                  case let .string(reasonText)? = o["reason"], let reason = ReasonCode(rawValue: reasonText),
                  reportableReasons.contains(reason),
                  case let .int(count)? = o["count"], count >= 1, count <= Int64(Int32.max), let kidValue = o["kid"] else { return nil }
            var kid: KeyID?
            switch kidValue {
            case .null: kid = nil
            case let .string(hex):
                guard let k = KeyID(hex: hex) else { return nil }
                kid = k
            default: return nil
            }
            return (.failed(reason: reason, kid: kid, at: at, count: Int(count)), dropped)
        default:
            return nil
        }
    }
}

/// One receipt or failure report waiting in a device's outbox (receipts v1 §2): sent again later.
public struct ReceiptOutboxEntry: Sendable, Equatable {
    /// The entry's number in its outbox (increasing; oldest first).
    public var sequence: UInt64
    /// Where it goes.
    public var url: String
    /// What it says (without `dropped`, which is added when it is sent).
    public var message: ReceiptMessage
    /// When it was queued (device clock, Unix seconds).
    public var queuedAt: Int64
    /// When the message it is about expires (its `exp`), if known: the entry is not kept past it (`"until"`).
    public var expiresAt: Int64?

    /// An entry from its parts.
    public init(sequence: UInt64, url: String, message: ReceiptMessage, queuedAt: Int64, expiresAt: Int64? = nil) {
        self.sequence = sequence
        self.url = url
        self.message = message
        self.queuedAt = queuedAt
        self.expiresAt = expiresAt
    }
}

/// One receipt origin's part of a device's outbox (`scheme://host:port`, see `HTTPURL.origin`): its entries, the
/// entries of it that were dropped, and its backoff. Each origin is flushed, backed off and told of drops alone.
public struct ReceiptOriginQueue: Sendable, Equatable {
    /// The origin, `scheme://host:port`.
    public var origin: String
    /// Its entries waiting, oldest first.
    public var entries: [ReceiptOutboxEntry]
    /// How many of its entries were dropped and not yet reported (sent only to this origin, as `"dropped": n`).
    public var dropped: Int
    /// How many flushes in a row it failed (no answer, or neither `2xx` nor a final refusal).
    public var failures: Int
    /// The device time (Unix seconds) before which it is not tried again; `nil` when it may be tried now.
    public var retryAt: Int64?

    /// A queue from its parts.
    public init(origin: String, entries: [ReceiptOutboxEntry], dropped: Int = 0, failures: Int = 0, retryAt: Int64? = nil) {
        self.origin = origin
        self.entries = entries
        self.dropped = dropped
        self.failures = failures
        self.retryAt = retryAt
    }
}
