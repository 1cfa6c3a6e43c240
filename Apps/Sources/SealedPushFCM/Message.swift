#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import SealedPushWire

/// The FCM HTTP v1 request body SealedPush sends (platforms v1 §2): a data-only message, so FCM never sees text
/// and the app's `FirebaseMessagingService.onMessageReceived` always runs:
///
///     {"message": {"token": "<fcm_token>",
///                  "data": {"ENCRYPTED_DATA": "<the wire v1 envelope, standard base64>", "sealedpush": "1"},
///                  "android": {"priority": "HIGH" | "NORMAL", "ttl": "<seconds>s", "collapse_key": "<collapse id>"}}}
public enum FCMMessage {
    /// FCM's limit on a message's data: the UTF-8 bytes of every key and every value of `data`, summed (FCM's
    /// error-code reference: "4096 bytes for most messages … This includes both the keys and the values").
    public static let maximumDataBytes = 4096
    /// The longest `ttl` FCM accepts: 28 days, in seconds.
    public static let maximumTTL: Int64 = 28 * 86_400
    /// The data keys besides `ENCRYPTED_DATA`'s value: `ENCRYPTED_DATA`, `sealedpush` and its value `1`.
    public static let dataOverheadBytes = "ENCRYPTED_DATA".utf8.count + "sealedpush".utf8.count + "1".utf8.count
    /// The longest wire envelope (in bytes, before base64) whose message fits `maximumDataBytes`: the sealer's budget.
    public static let maximumEnvelopeBytes = (maximumDataBytes - dataOverheadBytes) / 4 * 3

    /// `android.priority`.
    public enum Priority: String, Sendable {
        /// `HIGH`: wakes the device (Doze) at once; gateway priority 10.
        case high = "HIGH"
        /// `NORMAL`: may wait for a maintenance window; gateway priority 5.
        case normal = "NORMAL"

        /// The FCM priority for a gateway (APNs-style) priority: 10 → `HIGH`, 5 → `NORMAL`.
        public init(gatewayPriority: Int) throws(FCMMessageError) {
            switch gatewayPriority {
            case 10: self = .high
            case 5: self = .normal
            default: throw .invalidPriority(gatewayPriority)
            }
        }
    }

    /// Whether `token` is a syntactically valid FCM registration token: 1–4096 of `[A-Za-z0-9_:.-]`.
    public static func isValidToken(_ token: String) -> Bool {
        (1...4096).contains(token.utf8.count) && token.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x5F || c == 0x3A || c == 0x2E || c == 0x2D
        }
    }

    /// The size FCM counts for `data`: the UTF-8 bytes of its keys and values.
    public static func dataSize(_ data: [String: String]) -> Int {
        data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    }

    /// Throws `dataTooLarge` when `data` is over FCM's 4096 bytes (exactly 4096 is accepted).
    public static func checkDataBudget(_ data: [String: String]) throws(FCMMessageError) {
        let size = dataSize(data)
        guard size <= maximumDataBytes else { throw .dataTooLarge(bytes: size, limit: maximumDataBytes) }
    }

    /// The `android.ttl` seconds for a message: `expiresAt` − `now` in whole seconds, rounded down so FCM never
    /// keeps it longer than it may live, at most 28 days (FCM's maximum); 0 when the message's own `ttl` is 0 ("now or
    /// never"). A message with less than a second left goes as `0s`; one whose `expiresAt` has passed throws `expired`.
    public static func timeToLive(messageTTL: Int64, expiresAt: Date, now: Date) throws(FCMMessageError) -> Int64 {
        if messageTTL == 0 { return 0 }
        let remaining = expiresAt.timeIntervalSince(now)
        guard remaining > 0 else { throw .expired }
        return min(Int64(remaining.rounded(.down)), maximumTTL)
    }

    /// The request body for one delivery, compact UTF-8 JSON with members in the order above.
    ///
    /// - Parameters:
    ///   - token: the device's FCM registration token.
    ///   - envelope: the sealed wire v1 envelope (sent as standard base64).
    ///   - priority: the gateway priority, 10 or 5.
    ///   - messageTTL: the message's `ttl` in seconds (0: deliver now or never).
    ///   - expiresAt: the message's `expires_at`.
    ///   - now: the time of this attempt.
    ///   - collapseID: the message's `collapse_id`, if any; else `deliveryID` is the collapse key.
    ///   - deliveryID: the delivery's id.
    public static func body(token: String, envelope: [UInt8], priority: Int, messageTTL: Int64, expiresAt: Date, now: Date,
                            collapseID: String?, deliveryID: String) throws(FCMMessageError) -> [UInt8] {
        guard isValidToken(token) else { throw .invalidToken(length: token.utf8.count) }
        let androidPriority = try Priority(gatewayPriority: priority)
        let ttl = try timeToLive(messageTTL: messageTTL, expiresAt: expiresAt, now: now)
        let collapseKey = collapseID ?? deliveryID
        guard (1...64).contains(collapseKey.utf8.count) else { throw .invalidCollapseKey(length: collapseKey.utf8.count) }
        let encrypted = Data(envelope).base64EncodedString()
        try checkDataBudget(["ENCRYPTED_DATA": encrypted, "sealedpush": "1"])
        let message = JSONObject([
            ("token", .string(token)),
            ("data", .object(JSONObject([("ENCRYPTED_DATA", .string(encrypted)), ("sealedpush", .string("1"))]))),
            ("android", .object(JSONObject([
                ("priority", .string(androidPriority.rawValue)),
                ("ttl", .string("\(ttl)s")),
                ("collapse_key", .string(collapseKey)),
            ]))),
        ])
        return JSON.serialize(.object(JSONObject([("message", .object(message))])))
    }
}
