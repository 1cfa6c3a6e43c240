#if canImport(UserNotifications)
public import Foundation
public import SealedPushWire
public import SealedPushReceiver
public import Logging

/// The pending queue of reveal v1 §9 in the app group container: the messages the service extension could not open
/// because the device key could not be read yet (before the first unlock since the phone started), for the next
/// extension run or the app to open.
///
/// **On disk**: `pending-queue.json`, protection **`none`** — it must be read and written before the first unlock,
/// when no other class is available; each entry's payload is still sealed to the device key, so the file is no more
/// readable than the pushes were on the wire (it does show when they arrived and their request identifiers and
/// threads). `{"dropped": N, "entries": [{"request_id", "thread", "received_at", "payload"}, …]}`, oldest first, as
/// `FilePendingQueue` writes it on Linux.
///
/// **Bounded** (`PendingQueueBounds.appending`): at most `maxEntries` (100) entries and `maxBytes` (512 KiB) of
/// entries; the oldest are dropped first and counted in `dropped`, which `status()` reports.
///
/// **Durable**: every change rewrites the file whole under its `flock` — a new file of class `none`, `F_FULLFSYNC`,
/// `rename`, directory sync (`AppGroupFile`) — so a crash leaves the old or the new queue.
///
/// **A damaged file** (not JSON as written, or larger than any queue writes) is replaced, at the next call, by an
/// empty queue that counts the entries it listed as dropped (one when none can be counted), logged at error without
/// content; their notifications keep `(Encrypted)`. (`FilePendingQueue` throws instead, asking for the file to be
/// removed: an extension has nobody to ask.)
public struct AppGroupPendingQueue: PendingQueue, Sendable {
    /// The queue's file name.
    public static let fileName = "pending-queue.json"
    /// The protection class the queue is written with.
    public static let fileProtection = AppGroupFileProtection.noProtection

    /// The directory holding the queue (and its lock).
    public let directory: URL
    /// The most entries kept.
    public let maxEntries: Int
    /// The most bytes of entries kept (each entry counted as its JSON, `PendingMessage.encodedSize`).
    public let maxBytes: Int
    /// The longest a call waits for another process holding the queue's lock.
    public let lockTimeout: Duration
    /// Where a damaged queue is logged (counts only, never a payload or identifier).
    public var logger: Logging.Logger
    let files: any AppGroupFileSystem

    /// A queue in `directory` (a directory of the app group container; made `0700` if missing), with the bounds of
    /// reveal v1 §9 unless told otherwise.
    public init(directory: URL, maxEntries: Int = PendingQueueBounds.maxEntries, maxBytes: Int = PendingQueueBounds.maxBytes,
                lockTimeout: Duration = .seconds(1), logger: Logging.Logger = Logging.Logger(label: "sealedpush.pending")) {
        self.init(directory: directory, maxEntries: maxEntries, maxBytes: maxBytes, lockTimeout: lockTimeout, logger: logger,
                  files: SystemAppGroupFiles())
    }

    /// A queue in `SealedPush` in the container of the app group `groupIdentifier`; throws `containerUnavailable` when
    /// the process's App Groups entitlement does not list the group.
    public init(appGroup groupIdentifier: String, maxEntries: Int = PendingQueueBounds.maxEntries, maxBytes: Int = PendingQueueBounds.maxBytes,
                lockTimeout: Duration = .seconds(1), logger: Logging.Logger = Logging.Logger(label: "sealedpush.pending")) throws(AppGroupStoreError) {
        let files = SystemAppGroupFiles()
        self.init(directory: try AppGroupContainer.directory(groupIdentifier: groupIdentifier, files: files), maxEntries: maxEntries,
                  maxBytes: maxBytes, lockTimeout: lockTimeout, logger: logger, files: files)
    }

    init(directory: URL, maxEntries: Int, maxBytes: Int, lockTimeout: Duration, logger: Logging.Logger, files: any AppGroupFileSystem) {
        self.directory = directory
        self.maxEntries = max(1, maxEntries)
        self.maxBytes = max(1, maxBytes)
        self.lockTimeout = lockTimeout
        self.logger = logger
        self.files = files
    }

    var file: AppGroupFile {
        AppGroupFile(url: directory.appendingPathComponent(Self.fileName), protection: Self.fileProtection, files: files, lockTimeout: lockTimeout)
    }

    /// The largest file read: twice the largest queue the default bounds allow (entries are at most `maxBytes`, plus
    /// a comma each and the wrapper), so a queue written with other bounds still reads.
    var readLimit: Int { 2 * max(maxBytes, PendingQueueBounds.maxBytes) + 64 * 1024 }

    /// The queue as read: entries and dropped count, or `nil` when the file is damaged.
    struct State: Equatable {
        var entries: [PendingMessage] = []
        var dropped = 0
    }

    /// Appends `message`, replacing an entry with the same request identifier, and drops the oldest entries beyond the
    /// bounds (counted). When this returns the queue is on disk.
    public func append(_ message: PendingMessage) throws(AppGroupStoreError) {
        try change { state in
            let (kept, dropped) = PendingQueueBounds.appending(message, to: state.entries, maxEntries: maxEntries, maxBytes: maxBytes)
            state.entries = kept
            state.dropped += dropped
        }
    }

    /// The entries, oldest first.
    public func entries() throws(AppGroupStoreError) -> [PendingMessage] { try current().entries }

    /// Removes the entries with these request identifiers (absent ones are ignored; nothing is written when none is there).
    public func remove(requestIDs: [String]) throws(AppGroupStoreError) {
        let removed = Set(requestIDs)
        guard try current().entries.contains(where: { removed.contains($0.requestID) }) else { return }
        try change { state in state.entries.removeAll { removed.contains($0.requestID) } }
    }

    /// The number of entries and of entries dropped.
    public func status() throws(AppGroupStoreError) -> PendingQueueStatus {
        let state = try current()
        return PendingQueueStatus(pending: state.entries.count, dropped: state.dropped)
    }

    /// The queue as it is (no lock: every change is an atomic rename); a damaged file is replaced first.
    private func current() throws(AppGroupStoreError) -> State {
        switch try file.read(maximumBytes: readLimit) {
        case .missing: return State()
        case let .bytes(bytes): if let state = Self.decode(bytes) { return state }
        case .oversized: break
        }
        return try change { _ in }
    }

    /// Applies `edit` to the queue under its lock and writes it back durably; a damaged queue is recovered first.
    @discardableResult
    private func change(_ edit: (inout State) -> Void) throws(AppGroupStoreError) -> State {
        try file.update(maximumBytes: readLimit) { (stored) throws(AppGroupStoreError) -> (write: [UInt8]?, result: State) in
            var state: State
            switch stored {
            case .missing: state = State()
            case let .bytes(bytes): state = Self.decode(bytes) ?? recovered(from: bytes)
            case .oversized: state = recovered(from: nil)
            }
            edit(&state)
            return (Self.encode(state), state)
        }
    }

    static func encode(_ state: State) -> [UInt8] {
        JSON.serialize(.object(JSONObject([("dropped", .int(Int64(state.dropped))),
                                           ("entries", .array(state.entries.map { .object($0.jsonObject) }))])))
    }

    static func decode(_ bytes: [UInt8]) -> State? {
        guard case let .object(o)? = try? JSON.parse(bytes), case let .int(dropped)? = o["dropped"], dropped >= 0,
              case let .array(items)? = o["entries"] else { return nil }
        var state = State(entries: [], dropped: Int(clamping: dropped))
        for item in items {
            guard case let .object(e) = item, let entry = PendingMessage(json: e) else { return nil }
            state.entries.append(entry)
        }
        return state
    }

    /// An empty queue replacing a damaged one: what it listed is counted as dropped (one when nothing can be counted).
    func recovered(from bytes: [UInt8]?) -> State {
        var state = State()
        if let bytes, case let .object(o)? = try? JSON.parse(bytes), case let .array(items)? = o["entries"] {
            let before = o["dropped"]?.intValue.map { Int(clamping: max(0, $0)) } ?? 0
            state.dropped = before + max(1, items.count)
        } else {
            state.dropped = 1
        }
        logger.error("the pending queue was damaged; replaced it with an empty queue counting the lost entries as dropped",
                     metadata: ["dropped": "\(state.dropped)"])
        return state
    }
}
#endif
