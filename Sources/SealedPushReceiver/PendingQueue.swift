public import SealedPushWire
public import SealedPushCrypto

/// The pending queue of reveal v1 §9: one file that can be read and written before the first unlock (iOS
/// file protection `none`), bounded to `maxEntries` entries and `maxBytes` bytes (the oldest dropped first and
/// counted), rewritten whole and synced on each change.
///
/// Every method is one durable step. Implementations: the simulated device's file in its directory
/// (`FilePendingQueue`), the app group container on iOS (`AppGroupPendingQueue`).
public protocol PendingQueue: Sendable {
    /// Appends `message`, replacing an entry with the same request identifier, and drops the oldest entries
    /// beyond the bounds (counted in `status().dropped`).
    func append(_ message: PendingMessage) throws
    /// The entries, oldest first.
    func entries() throws -> [PendingMessage]
    /// Removes the entries with these request identifiers (absent ones are ignored).
    func remove(requestIDs: [String]) throws
    /// The number of entries and of entries dropped.
    func status() throws -> PendingQueueStatus
}

/// Replaces a notification the system still shows with new content (reveal v1 §9): iOS's
/// `UNUserNotificationCenter` in the app, the notification store of the simulated device.
public protocol DeliveredNotificationReplacer: Sendable {
    /// Replaces the delivered notification `request.identifier` with `request.content`; returns `false`, and changes
    /// nothing, when no such notification is shown any more (the user removed it).
    func replaceDelivered(_ request: NotificationRequest) async -> Bool
    /// Called once after a pass over the pending queue replaced more than `SecretMessageExtension.summaryThreshold`
    /// notifications (each replaced silently): one alert that says how many arrived. The default does nothing.
    func summarize(replaced count: Int) async
    /// Removes the delivered notifications whose userInfo holds `SEALEDPUSH_FETCH` equal to `handle` (a retracted
    /// mailbox message, mailbox v1 §6); returns how many it removed. The default removes none.
    func removeDelivered(holdingHandle handle: String) async -> Int
    /// The delivered notifications whose userInfo still holds `SEALEDPUSH_FETCH` (mailbox v1 §5 "Later"), each with
    /// its request identifier and content. The default lists none.
    func deliveredHoldingHandles() async -> [NotificationRequest]
}

extension DeliveredNotificationReplacer {
    /// Does nothing (a replacer without a summary alert).
    public func summarize(replaced count: Int) async {}
    /// Removes nothing (a replacer that cannot list what is shown); returns 0.
    public func removeDelivered(holdingHandle handle: String) async -> Int { 0 }
    /// Lists nothing (a replacer that cannot list what is shown).
    public func deliveredHoldingHandles() async -> [NotificationRequest] { [] }
}

/// What one pass over the pending queue did (reveal v1 §9).
public struct PendingQueueSummary: Sendable, Equatable {
    /// Entries that opened and whose notification was replaced with the message.
    public var replaced = 0
    /// Entries that opened but whose notification the user had already removed (left alone).
    public var alreadyRemoved = 0
    /// Entries that failed a check: removed, their notification keeps `(Encrypted)`.
    public var failed = 0
    /// Entries left in the queue because the device key still cannot be read (or the queue could not be updated).
    public var remaining = 0
    /// Entries dropped unopened because they waited longer than a message can be opened (the replay window after
    /// `received_at`: the message's own expiry is sealed inside it).
    public var expired = 0

    /// An empty summary.
    public init() {}
}

/// What a pass over the handles kept in delivered notifications did (mailbox v1 §5 "Later").
public struct KeptHandlesSummary: Sendable, Equatable {
    /// Notifications replaced with the message that was fetched and opened.
    public var replaced = 0
    /// Notifications replaced with `(Deleted)` (or removed, with the filtering entitlement): the sender retracted them.
    public var retracted = 0
    /// Notifications whose message was fetched and failed a check, or was gone (`410 collected`/`expired`): replaced
    /// with `(Encrypted)` without the handle.
    public var failed = 0
    /// Notifications left as they are, the handle kept: the fetch failed, or the device key cannot be read yet.
    public var remaining = 0

    /// An empty summary.
    public init() {}
}

/// A pending-queue entry sealed again to the device's reveal public key (reveal v1 revision 3 §9): what the queue
/// holds then is `{request_id, thread: "", received_at, payload: {"SEALEDPUSH_QUEUED": envelope}}`, where the
/// envelope (key id of the reveal key, sealed box) holds the whole entry, thread and payload included, as JSON. Its
/// secret reads only while the phone is unlocked, so an extraction after the first unlock opens nothing in the queue.
public enum SealedPendingEntry {
    /// The payload member holding the sealed entry.
    public static let payloadKey = "SEALEDPUSH_QUEUED"

    /// `entry` sealed to `revealKey`.
    public static func seal(_ entry: PendingMessage, to revealKey: BoxPublicKey) throws(CryptoError) -> PendingMessage {
        let plain = SecureBytes(JSON.serialize(.object(entry.jsonObject)))
        let box = try SealedBox.seal(plain, to: revealKey)
        let envelope = Envelope(keyID: revealKey.keyID, sealedBox: box)
        return PendingMessage(requestID: entry.requestID, thread: "", receivedAt: entry.receivedAt,
                              payload: JSONObject([(payloadKey, .string(envelope.base64))]))
    }

    /// The reveal key's id of a sealed entry; `nil` for an entry kept as it arrived (no reveal key when queued).
    public static func keyID(of entry: PendingMessage) -> KeyID? {
        guard let text = entry.payload[payloadKey]?.stringValue else { return nil }
        return try? Envelope(base64: text).keyID
    }

    /// Whether `entry` is sealed to a reveal key.
    public static func isSealed(_ entry: PendingMessage) -> Bool { entry.payload[payloadKey] != nil }

    /// The entry inside a sealed one, opened with `revealKey`; `nil` when it does not open or is not an entry.
    public static func open(_ entry: PendingMessage, with revealKey: BoxKeyPair) -> PendingMessage? {
        guard let text = entry.payload[payloadKey]?.stringValue, let envelope = try? Envelope(base64: text),
              let plain = try? SealedBox.open(bytes: envelope.sealedBox, with: revealKey),
              case let .object(o)? = try? plain.withSpan({ span throws(JSONError) in try JSON.parse(span) }),
              let inner = PendingMessage(json: o), inner.requestID == entry.requestID else { return nil }
        return inner
    }
}
