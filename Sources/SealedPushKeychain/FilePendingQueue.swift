public import SealedPushWire
public import SystemPackage


/// The simulated device's pending queue (reveal v1 §9): `pending.json` in the store's directory, `0600`, readable
/// and writable in every lock state (it stands for the app group file iOS protects with `none`: its payloads are
/// still sealed to the device key).
///
/// `{"dropped": N, "entries": [{"request_id", "thread", "received_at", "payload"}, …]}`, oldest first, at most
/// `maxEntries` entries and `maxBytes` bytes of entries (the oldest dropped first and counted). Every change is one
/// transaction of the store (writers' lock, temp file + fsync + rename + directory fsync).
public struct FilePendingQueue: Sendable {
    /// The file name in the store's directory.
    public static let fileName = "pending.json"
    /// The store whose directory holds the file.
    public let store: KeychainStore
    /// The most entries kept.
    public let maxEntries: Int
    /// The most bytes of entries kept.
    public let maxBytes: Int

    /// The pending queue of `store`'s device, with the bounds of reveal v1 §9 unless told otherwise (tests).
    public init(store: KeychainStore, maxEntries: Int = PendingQueueBounds.maxEntries, maxBytes: Int = PendingQueueBounds.maxBytes) {
        self.store = store
        self.maxEntries = max(1, maxEntries)
        self.maxBytes = max(1, maxBytes)
    }

    /// The file's path.
    public var path: FilePath { store.root.appending(Self.fileName) }

    /// Appends `message` (replacing an entry with its request identifier) and drops the oldest beyond the bounds.
    public func append(_ message: PendingMessage) throws(KeychainError) {
        try update { entries, dropped in
            let (kept, newlyDropped) = PendingQueueBounds.appending(message, to: entries, maxEntries: maxEntries, maxBytes: maxBytes)
            entries = kept
            dropped += newlyDropped
        }
    }

    /// The entries, oldest first.
    public func entries() throws(KeychainError) -> [PendingMessage] { try read(store).entries }

    /// Removes the entries with these request identifiers.
    public func remove(requestIDs: [String]) throws(KeychainError) {
        let removed = Set(requestIDs)
        try update { entries, _ in entries.removeAll { removed.contains($0.requestID) } }
    }

    /// The number of entries and of entries dropped.
    public func status() throws(KeychainError) -> PendingQueueStatus {
        let (entries, dropped) = try read(store)
        return PendingQueueStatus(pending: entries.count, dropped: dropped)
    }

    private func update(_ change: (inout [PendingMessage], inout Int) -> Void) throws(KeychainError) {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) in
            var (entries, dropped) = try read(tx)
            change(&entries, &dropped)
            let bytes = JSON.serialize(.object(JSONObject([("dropped", .int(Int64(dropped))),
                                                          ("entries", .array(entries.map { .object($0.jsonObject) }))])))
            try StoreIO.atomicWrite(path, tmpDirectory: tx.tmpDirectory, bytes: bytes)
        }
    }

    private func read(_ s: KeychainStore) throws(KeychainError) -> (entries: [PendingMessage], dropped: Int) {
        guard let bytes = try s.io.readFile(path) else { return ([], 0) }
        guard case let .object(o)? = try? JSON.parse(bytes), case let .int(dropped)? = o["dropped"], dropped >= 0,
              case let .array(items)? = o["entries"] else {
            throw .decode(path: path.string, why: "the pending queue is not as written; remove the file to start an empty one (its messages are lost)")
        }
        var entries: [PendingMessage] = []
        for item in items {
            guard case let .object(e) = item, let entry = PendingMessage(json: e) else {
                throw .decode(path: path.string, why: "an entry of the pending queue is not as written; remove the file to start an empty one")
            }
            entries.append(entry)
        }
        return (entries, Int(clamping: dropped))
    }
}
