public import SealedPushWire

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

    /// An empty summary.
    public init() {}
}
