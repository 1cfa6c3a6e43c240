import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif

/// RFC 8030 `Urgency` (§5.3), from SealedPush's APNs-style priority.
public enum WebPushUrgency: String, Sendable, CaseIterable {
    /// `very-low`.
    case veryLow = "very-low"
    /// `low`.
    case low
    /// `normal`: priority 5.
    case normal
    /// `high`: priority 10.
    case high

    /// The urgency for an APNs-style priority: 10 → `high`, 5 → `normal`; `nil` for any other value.
    public init?(priority: Int) {
        switch priority {
        case 10: self = .high
        case 5: self = .normal
        default: return nil
        }
    }

    /// The urgency a header names (case-insensitive, RFC 8030 §5.3), or `nil`.
    public init?(headerValue: String) {
        self.init(rawValue: headerValue.lowercased())
    }
}

/// The request headers of a Web Push delivery (platforms v1 §3) and their checks on the push service's side.
public enum WebPushRequest {
    /// `Content-Encoding` of every SealedPush body.
    public static let contentEncoding = "aes128gcm"

    /// `Topic` for a collapse id: the first 32 characters of base64url(SHA-256(collapse id)), no padding (a topic is at
    /// most 32 base64url characters, RFC 8030 §5.4; the hash keeps the collapse id itself from the push service).
    public static func topic(collapseID: String) -> String {
        String(WebPushBase64URL.encode(Array(SHA256.hash(data: Array(collapseID.utf8)))).prefix(32))
    }

    /// `TTL` in whole seconds until `expiresAt` (rounded down), 0 when it has passed.
    public static func ttl(expiresAt: Date, now: Date) -> Int {
        let seconds = expiresAt.timeIntervalSince(now)
        guard seconds.isFinite, seconds > 0 else { return 0 }
        return seconds >= Double(Int32.max) ? Int(Int32.max) : Int(seconds.rounded(.down))
    }

    /// `TTL` in whole seconds between Unix times, 0 when `expiresAt` has passed.
    public static func ttl(expiresAt: Int64, now: Int64) -> Int {
        let (difference, overflow) = expiresAt.subtractingReportingOverflow(now)
        guard !overflow else { return expiresAt > now ? Int(Int32.max) : 0 }
        return Int(min(max(0, difference), Int64(Int32.max)))
    }

    /// The headers of a delivery, in the order platforms v1 §3 lists them (`Topic` only with a collapse id).
    public static func headers(ttl: Int, urgency: WebPushUrgency, topic: String?, authorization: String) -> [(name: String, value: String)] {
        var headers: [(name: String, value: String)] = [("TTL", String(max(0, ttl))), ("Urgency", urgency.rawValue)]
        if let topic { headers.append(("Topic", topic)) }
        headers.append(("Content-Encoding", contentEncoding))
        headers.append(("Authorization", authorization))
        return headers
    }

    /// A `TTL` header's seconds (RFC 8030 §5.2: a non-negative decimal integer), or `nil`.
    public static func parseTTL(_ value: String) -> Int? {
        guard !value.isEmpty, value.utf8.count <= 10, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(value)
    }

    /// Whether `value` is a valid `Topic` (RFC 8030 §5.4): 1–32 characters of the base64url alphabet.
    public static func isValidTopic(_ value: String) -> Bool {
        (1...32).contains(value.utf8.count) && value.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
        }
    }
}
