/// One message the service extension could not open because the device key could not be read yet
/// (before the first unlock since the phone started; reveal v1 §9).
///
/// `payload` is the APNs payload as it arrived (`userInfo`, `aps` included): its `ENCRYPTED_DATA` is still
/// sealed to the device key, so the entry is no more readable than the push was on the wire.
public struct PendingMessage: Sendable, Equatable {
    /// The notification request identifier the placeholder was shown under (what the entry replaces).
    public var requestID: String
    /// The thread identifier the placeholder was shown with.
    public var thread: String
    /// When it arrived, seconds since the Unix epoch: expiry is judged at this time when it is opened.
    public var receivedAt: Int64
    /// The APNs payload as it arrived.
    public var payload: JSONObject

    /// An entry from its parts.
    public init(requestID: String, thread: String, receivedAt: Int64, payload: JSONObject) {
        self.requestID = requestID
        self.thread = thread
        self.receivedAt = receivedAt
        self.payload = payload
    }

    /// `{"request_id", "thread", "received_at", "payload"}` (reveal v1 §9).
    public var jsonObject: JSONObject {
        JSONObject([("request_id", .string(requestID)), ("thread", .string(thread)), ("received_at", .int(receivedAt)),
                    ("payload", .object(payload))])
    }

    /// Reads an entry as `jsonObject` writes it; `nil` when a member is missing or of the wrong type.
    public init?(json o: JSONObject) {
        guard case let .string(requestID)? = o["request_id"], case let .string(thread)? = o["thread"],
              case let .int(receivedAt)? = o["received_at"], case let .object(payload)? = o["payload"] else { return nil }
        self.init(requestID: requestID, thread: thread, receivedAt: receivedAt, payload: payload)
    }

    /// The bytes one entry takes in the queue's file (its JSON), what the 512 KiB bound counts.
    public var encodedSize: Int { JSON.serialize(.object(jsonObject)).count }
}

/// How many entries the pending queue holds and how many it dropped (`device status --json`: `pending`,
/// `pending_dropped`).
public struct PendingQueueStatus: Sendable, Equatable {
    /// Entries waiting.
    public var pending: Int
    /// Entries dropped, oldest first, to keep within the bounds since the queue was made.
    public var dropped: Int

    /// A status from its counts.
    public init(pending: Int, dropped: Int) {
        self.pending = pending
        self.dropped = dropped
    }
}

/// The bounds of reveal v1 §9.
public enum PendingQueueBounds {
    /// At most 100 entries.
    public static let maxEntries = 100
    /// At most 512 KiB of entries.
    public static let maxBytes = 512 * 1024

    /// `entries` with `added` appended (replacing an entry of the same request identifier), trimmed from the
    /// oldest to the bounds; returns the kept entries and how many were dropped. Shared by every implementation.
    public static func appending(_ added: PendingMessage, to entries: [PendingMessage],
                                 maxEntries: Int = maxEntries, maxBytes: Int = maxBytes) -> (kept: [PendingMessage], dropped: Int) {
        var kept = entries.filter { $0.requestID != added.requestID }
        kept.append(added)
        var dropped = 0
        var sizes = kept.map(\.encodedSize)
        var total = sizes.reduce(0, +)
        while !kept.isEmpty, kept.count > maxEntries || total > maxBytes {
            total -= sizes.removeFirst()
            kept.removeFirst()
            dropped += 1
        }
        return (kept, dropped)
    }
}

