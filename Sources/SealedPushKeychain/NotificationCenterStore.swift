public import SealedPushWire
public import SystemPackage

/// One notification as the system keeps it (reveal v1 §7): exactly what the service extension handed over.
public struct StoredNotification: Sendable, Equatable {
    /// The notification request identifier.
    public var requestID: String
    /// When it was delivered, seconds since the Unix epoch.
    public var deliveredAt: Int64
    /// The title line.
    public var title: String
    /// The subtitle line.
    public var subtitle: String
    /// The body text.
    public var body: String
    /// The category identifier.
    public var category: String
    /// The thread identifier.
    public var thread: String
    /// The userInfo, as handed over.
    public var userInfo: JSONObject
    /// The file names of the attachments handed over.
    public var attachments: [String]

    /// A stored notification from its parts.
    public init(requestID: String, deliveredAt: Int64, title: String, subtitle: String, body: String, category: String, thread: String,
                userInfo: JSONObject, attachments: [String]) {
        self.requestID = requestID
        self.deliveredAt = deliveredAt
        self.title = title
        self.subtitle = subtitle
        self.body = body
        self.category = category
        self.thread = thread
        self.userInfo = userInfo
        self.attachments = attachments
    }

    /// `{"request_id", "delivered_at", "title", "subtitle", "body", "category", "thread", "userInfo", "attachments"}`.
    public var jsonObject: JSONObject {
        JSONObject([("request_id", .string(requestID)), ("delivered_at", .int(deliveredAt)), ("title", .string(title)),
                    ("subtitle", .string(subtitle)), ("body", .string(body)), ("category", .string(category)), ("thread", .string(thread)),
                    ("userInfo", .object(userInfo)), ("attachments", .array(attachments.map { .string($0) }))])
    }

    /// Reads an entry as `jsonObject` writes it; `nil` when a member is missing or of the wrong type.
    public init?(json o: JSONObject) {
        guard case let .string(requestID)? = o["request_id"], case let .int(deliveredAt)? = o["delivered_at"],
              case let .string(title)? = o["title"], case let .string(subtitle)? = o["subtitle"], case let .string(body)? = o["body"],
              case let .string(category)? = o["category"], case let .string(thread)? = o["thread"],
              case let .object(userInfo)? = o["userInfo"], case let .array(files)? = o["attachments"] else { return nil }
        var names: [String] = []
        for file in files {
            guard case let .string(name) = file else { return nil }
            names.append(name)
        }
        self.init(requestID: requestID, deliveredAt: deliveredAt, title: title, subtitle: subtitle, body: body, category: category,
                  thread: thread, userInfo: userInfo, attachments: names)
    }
}

/// What a simulated iPhone's system keeps of its notifications (reveal v1 §7), as iOS keeps delivered
/// content in its own store: `notifications.json` in the store's directory, **in the clear** (it stands
/// for the store forensic tools read; it is not one of SealedPush's items and is not sealed), `0600`.
///
/// A notification delivered again under the same request identifier replaces its entry, as on iOS. At
/// most `capacity` entries are kept, the oldest dropped first. Every change is one transaction of the
/// store (writers' lock, temp file + fsync + rename + directory fsync).
public struct NotificationCenterStore: Sendable {
    /// The file name in the store's directory.
    public static let fileName = "notifications.json"
    /// The store whose directory holds the file.
    public let store: KeychainStore
    /// The most entries kept (100: an entry is at most about 8 KiB, a payload and its decrypted text, so the
    /// file stays under the store's 1 MiB read limit).
    public let capacity: Int

    /// The notification store of `store`'s device.
    public init(store: KeychainStore, capacity: Int = 100) {
        self.store = store
        self.capacity = max(1, capacity)
    }

    /// The file's path.
    public var path: FilePath { store.root.appending(Self.fileName) }

    /// Every entry, oldest first. A file that is not as written (edited, cut short) is `decode`, naming it.
    public func entries() throws(KeychainError) -> [StoredNotification] {
        try read(store)
    }

    /// The entry of `requestID`, or `nil` when there is none.
    public func entry(requestID: String) throws(KeychainError) -> StoredNotification? {
        try entries().last { $0.requestID == requestID }
    }

    /// Appends `notification`, replacing an entry with the same request identifier.
    public func append(_ notification: StoredNotification) throws(KeychainError) {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) in
            var list = try read(tx).filter { $0.requestID != notification.requestID }
            list.append(notification)
            if list.count > capacity { list.removeFirst(list.count - capacity) }
            let bytes = JSON.serialize(.array(list.map { .object($0.jsonObject) }))
            try StoreIO.atomicWrite(path, tmpDirectory: tx.tmpDirectory, bytes: bytes)
        }
    }

    /// Replaces the entry of `notification.requestID` with `notification` (moved to the end, as a notification
    /// iOS shows again); returns `false`, changing nothing, when there is no such entry (the user removed it).
    public func replace(_ notification: StoredNotification) throws(KeychainError) -> Bool {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> Bool in
            var list = try read(tx)
            guard list.contains(where: { $0.requestID == notification.requestID }) else { return false }
            list.removeAll { $0.requestID == notification.requestID }
            list.append(notification)
            let bytes = JSON.serialize(.array(list.map { .object($0.jsonObject) }))
            try StoreIO.atomicWrite(path, tmpDirectory: tx.tmpDirectory, bytes: bytes)
            return true
        }
    }

    /// Removes the entry of `requestID` (the user cleared the notification); returns whether there was one.
    @discardableResult
    public func remove(requestID: String) throws(KeychainError) -> Bool {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> Bool in
            var list = try read(tx)
            guard list.contains(where: { $0.requestID == requestID }) else { return false }
            list.removeAll { $0.requestID == requestID }
            let bytes = JSON.serialize(.array(list.map { .object($0.jsonObject) }))
            try StoreIO.atomicWrite(path, tmpDirectory: tx.tmpDirectory, bytes: bytes)
            return true
        }
    }

    private func read(_ s: KeychainStore) throws(KeychainError) -> [StoredNotification] {
        guard let bytes = try s.io.readFile(path) else { return [] }
        guard case let .array(items)? = try? JSON.parse(bytes) else {
            throw .decode(path: path.string, why: "the notification store is not a JSON array; remove the file to start an empty one")
        }
        var out: [StoredNotification] = []
        for item in items {
            guard case let .object(o) = item, let entry = StoredNotification(json: o) else {
                throw .decode(path: path.string, why: "an entry of the notification store is not as written; remove the file to start an empty one")
            }
            out.append(entry)
        }
        return out
    }
}
