import SealedPushCrypto
import SealedPushWire

/// The ids the gateway makes for messages, deliveries and events: the creation time first, then random bytes.
///
/// Time first keeps the database's indexes on these ids growing at one end: a batch of new rows lands in the
/// last leaf page of each index instead of one random page per row. On SQLite that is a page written to the
/// WAL (and again at the checkpoint) per row and index; random 16-byte ids cost about four such pages per
/// message in `make bench-gateway`. The time in an id is the `created_at` the API already returns; the random
/// part (10 bytes from libsodium, `CryptoLibrary.randomIdentifierBytes`) keeps ids unguessable and unique.
enum GatewayIDs {
    /// A message id (26 characters): 12 hex digits of `now` (milliseconds since 1970) and 10 random bytes in
    /// URL-safe base64. Also the wire message id (`id` in the sealed body).
    static func message(now: Int64) -> String {
        timeHex(now) + Base64.encodeURLSafeNoPadding(CryptoLibrary.randomIdentifierBytes(count: 10))
    }

    /// A delivery id: `d_` and a message-style id.
    static func delivery(now: Int64) -> String { "d_" + message(now: now) }

    /// An event id: `evt_` and 32 hex digits (12 of `now`, 20 of random bytes), so listings and webhooks keep
    /// the `evt_` + 32 hex form.
    static func event(now: Int64) -> String {
        "evt_" + timeHex(now) + Hex.encode(CryptoLibrary.randomIdentifierBytes(count: 10))
    }

    /// The low 48 bits of `milliseconds`, as 12 lowercase hex digits (big-endian, so they sort as they grow).
    static func timeHex(_ milliseconds: Int64) -> String {
        let value = UInt64(bitPattern: milliseconds)
        return Hex.encode((0..<6).map { UInt8(truncatingIfNeeded: value >> UInt64(40 - 8 * $0)) })
    }
}
