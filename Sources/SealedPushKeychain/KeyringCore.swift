#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushCrypto
public import SealedPushWire
import Logging

/// Where a key is in its life.
public enum KeyState: String, Sendable, Codable, CaseIterable {
    /// The one key new messages are sealed to (device) or signed with (sender).
    case active
    /// Still usable for opening (device) or trusted by receivers (sender) until its retire-after deadline.
    case retired
    /// Staged to become active (`stageNext`, then `activate`): its record can be exported and trusted
    /// while the active key still signs; at most one key is next.
    case next
    /// Its secret was wiped and its item deleted; a tombstone keeps the id and dates for the audit trail.
    case destroyed
}

/// What `list` shows about one key: never its secret.
public struct KeyInfo: Sendable, Equatable {
    /// The key id.
    public let keyID: KeyID
    /// Its state.
    public let state: KeyState
    /// The public key (32 bytes; X25519 for device keys, Ed25519 for sender keys).
    public let publicKey: [UInt8]
    /// When it was generated.
    public let createdAt: Date
    /// For a retired key: until when it stays usable.
    public let retireAfter: Date?
    /// For a destroyed key: when it was destroyed.
    public let destroyedAt: Date?
    /// For a destroyed key: why (`destroyed`, `pruned`, `forced`).
    public let destroyReason: String?
    /// When its record was first exported while it was the next key (`nil`: never), which `activate` checks.
    public var exportedAt: Date? = nil

    /// Whether the key is usable at `date`: active or next, or retired with `date <= retireAfter`.
    public func isUsable(at date: Date) -> Bool {
        switch state {
        case .active, .next: return true
        case .retired: return retireAfter.map { date <= $0 } ?? false
        case .destroyed: return false
        }
    }
}

/// A key pair kind a `Keyring` holds: the device's X25519 keys (`BoxKeyPair`) or a sender's Ed25519
/// signing keys (`SigningKeyPair`). SealedPush conforms both; the requirements are the keyring's
/// own plumbing.
public protocol KeyringMaterial: Sendable {
    /// The public record a keyring hands out for a key (`DeviceKeyRecord`, `SenderKeyRecord`).
    associatedtype Record: Sendable
    /// `sealedpush.device-key` or `sealedpush.sender-key`.
    static var service: String { get }
    /// `device key` or `sender key`, for messages.
    static var kindName: String { get }
    /// A fresh random key pair.
    static func generateNew() -> Self
    /// Rebuilds the pair from the 32 secret bytes kept in its item.
    init(storedSecret: SecureBytes) throws(KeychainError)
    /// Rebuilds the pair from its secret and the public key from the key's own (authenticated)
    /// state item, where that saves deriving it again.
    init(storedSecret: SecureBytes, storedPublicKey: [UInt8]) throws(KeychainError)
    /// The 32 secret bytes kept in the item (X25519 scalar, Ed25519 seed).
    var storedSecret: SecureBytes { get }
    /// The key id of the public key.
    var keyID: KeyID { get }
    /// The public key's bytes.
    var publicKeyBytes: [UInt8] { get }
    /// The public record of a key the keyring lists.
    static func record(_ info: KeyInfo) throws(KeychainError) -> Record
    /// The accessibility a keyring gives new keys of this kind unless told otherwise.
    static var defaultAccessibility: Accessibility { get }
}

extension KeyringMaterial {
    /// `afterFirstUnlockThisDeviceOnly`: readable by an extension while the phone is locked.
    public static var defaultAccessibility: Accessibility { .afterFirstUnlockThisDeviceOnly }
}

/// An X25519 key kind a keyring holds and a receiver opens sealed boxes with (device keys, reveal keys).
public protocol BoxKeyMaterial: KeyringMaterial {
    /// The X25519 key pair.
    var boxKeyPair: BoxKeyPair { get }
}

extension BoxKeyPair: BoxKeyMaterial {
    /// The pair itself.
    public var boxKeyPair: BoxKeyPair { self }
}

/// A device's reveal key (reveal v1 §1): an X25519 pair like the device key, kept under its own
/// service with accessibility `whenUnlockedThisDeviceOnly`, so it opens only while the phone is unlocked.
public struct RevealKeyPair: BoxKeyMaterial {
    /// The X25519 key pair.
    public let boxKeyPair: BoxKeyPair

    /// Wraps an X25519 key pair as a reveal key.
    public init(_ pair: BoxKeyPair) { boxKeyPair = pair }

    /// `sealedpush.reveal-key`.
    public static var service: String { "sealedpush.reveal-key" }
    /// `reveal key`.
    public static var kindName: String { "reveal key" }
    /// `whenUnlockedThisDeviceOnly`: the reveal key cannot be read while the phone is locked.
    public static var defaultAccessibility: Accessibility { .whenUnlockedThisDeviceOnly }
    /// A fresh random key pair.
    public static func generateNew() -> RevealKeyPair { RevealKeyPair(.generate()) }
    /// The `reveal` member (key id and public key) of a listed key.
    public static func record(_ info: KeyInfo) throws(KeychainError) -> RevealKeyRecord {
        do { return RevealKeyRecord(publicKey: try BoxPublicKey(bytes: info.publicKey)) } catch {
            throw .decode(path: info.keyID.hex, why: "the stored public key is malformed")
        }
    }
    /// Rebuilds the pair from its stored X25519 secret.
    public init(storedSecret: SecureBytes) throws(KeychainError) {
        do { try self.init(BoxKeyPair(secretKey: storedSecret)) } catch {
            throw .param("the stored reveal key is unusable: \(error.description)")
        }
    }
    /// Rebuilds the pair from its secret and its stored public key, without deriving it again.
    public init(storedSecret: SecureBytes, storedPublicKey: [UInt8]) throws(KeychainError) {
        do { try self.init(BoxKeyPair(secretKey: storedSecret, publicKey: BoxPublicKey(bytes: storedPublicKey))) } catch {
            throw .param("the stored reveal key is unusable: \(error.description)")
        }
    }
    /// The X25519 secret scalar.
    public var storedSecret: SecureBytes { boxKeyPair.secretKey }
    /// The key id of the public key.
    public var keyID: KeyID { boxKeyPair.keyID }
    /// The X25519 public key's bytes.
    public var publicKeyBytes: [UInt8] { boxKeyPair.publicKey.bytes }
}

extension BoxKeyPair: KeyringMaterial {
    /// `sealedpush.device-key`.
    public static var service: String { "sealedpush.device-key" }
    /// `device key`.
    public static var kindName: String { "device key" }
    /// A fresh random key pair.
    public static func generateNew() -> BoxKeyPair { generate() }
    /// The device key record (public key and creation time) of a listed key.
    public static func record(_ info: KeyInfo) throws(KeychainError) -> DeviceKeyRecord {
        do { return DeviceKeyRecord(publicKey: try BoxPublicKey(bytes: info.publicKey), createdAt: info.createdAt) } catch {
            throw .decode(path: info.keyID.hex, why: "the stored public key is malformed")
        }
    }
    /// Rebuilds the pair from its stored X25519 secret.
    public init(storedSecret: SecureBytes) throws(KeychainError) {
        do { try self.init(secretKey: storedSecret) } catch { throw .param("the stored device key is unusable: \(error.description)") }
    }
    /// Rebuilds the pair from its secret and its stored public key, without deriving it again.
    public init(storedSecret: SecureBytes, storedPublicKey: [UInt8]) throws(KeychainError) {
        // Both halves come from items authenticated under the same key id (the state item carries
        // the public key), so the X25519 base-point multiplication (≈ 28 µs) is not repeated.
        do { try self.init(secretKey: storedSecret, publicKey: BoxPublicKey(bytes: storedPublicKey)) } catch {
            throw .param("the stored device key is unusable: \(error.description)")
        }
    }
    /// The X25519 secret scalar.
    public var storedSecret: SecureBytes { secretKey }
    /// The X25519 public key's bytes.
    public var publicKeyBytes: [UInt8] { publicKey.bytes }
}

extension SigningKeyPair: KeyringMaterial {
    /// `sealedpush.sender-key`.
    public static var service: String { "sealedpush.sender-key" }
    /// `sender key`.
    public static var kindName: String { "sender key" }
    /// A fresh random key pair.
    public static func generateNew() -> SigningKeyPair { generate() }
    /// The sender key record (the public key devices trust) of a listed key.
    public static func record(_ info: KeyInfo) throws(KeychainError) -> SenderKeyRecord {
        do { return SenderKeyRecord(publicKey: try SigningPublicKey(bytes: info.publicKey)) } catch {
            throw .decode(path: info.keyID.hex, why: "the stored public key is malformed")
        }
    }
    /// Rebuilds the pair from its stored Ed25519 seed.
    public init(storedSecret: SecureBytes) throws(KeychainError) {
        do { try self.init(seed: storedSecret) } catch { throw .param("the stored sender key is unusable: \(error.description)") }
    }
    /// Rebuilds the pair from its seed (the seed expansion derives both halves anyway).
    public init(storedSecret: SecureBytes, storedPublicKey: [UInt8]) throws(KeychainError) {
        try self.init(storedSecret: storedSecret)
    }
    /// The Ed25519 seed.
    public var storedSecret: SecureBytes { seed }
    /// The Ed25519 public key's bytes.
    public var publicKeyBytes: [UInt8] { publicKey.bytes }
}

/// The committed per-key record (the `…state` item): public facts only.
struct KeyRecordState: Sendable {
    var keyID: KeyID
    var publicKey: [UInt8]
    var createdAt: Date
    var retireAfter: Date?
    var destroyedAt: Date?
    var reason: String?
    var exportedAt: Date?

    var json: SecureBytes {
        var o = JSONObject([("key_id", .string(keyID.hex)), ("public_key", .string(Base64.encode(publicKey))),
                            ("created_at", .string(Timestamp.format(createdAt)))])
        if let retireAfter { o["retire_after"] = .string(Timestamp.format(retireAfter)) }
        if let destroyedAt { o["destroyed_at"] = .string(Timestamp.format(destroyedAt)) }
        if let reason { o["reason"] = .string(reason) }
        if let exportedAt { o["exported_at"] = .string(Timestamp.format(exportedAt)) }
        return SecureBytes(JSON.serialize(.object(o)))
    }

    init(keyID: KeyID, publicKey: [UInt8], createdAt: Date, retireAfter: Date? = nil, destroyedAt: Date? = nil, reason: String? = nil,
         exportedAt: Date? = nil) {
        self.keyID = keyID
        self.publicKey = publicKey
        self.createdAt = ItemHeader.wholeSeconds(createdAt)
        self.retireAfter = retireAfter.map(ItemHeader.wholeSeconds)
        self.destroyedAt = destroyedAt.map(ItemHeader.wholeSeconds)
        self.reason = reason
        self.exportedAt = exportedAt.map(ItemHeader.wholeSeconds)
    }

    init(json: SecureBytes, path: String) throws(KeychainError) {
        let value: JSONValue
        do { value = try json.withSpan { span throws(JSONError) in try JSON.parse(span) } } catch {
            throw .decode(path: path, why: "the key state is not JSON")
        }
        guard case let .object(o) = value, let kidText = o["key_id"]?.stringValue, let kid = KeyID(hex: kidText),
              let pkText = o["public_key"]?.stringValue, let pk = try? Base64.decode(pkText), pk.count == 32,
              let created = o["created_at"]?.stringValue.flatMap(Timestamp.parse) else {
            throw .decode(path: path, why: "the key state lacks key_id, public_key or created_at")
        }
        self.init(keyID: kid, publicKey: pk, createdAt: created,
                  retireAfter: o["retire_after"]?.stringValue.flatMap(Timestamp.parse),
                  destroyedAt: o["destroyed_at"]?.stringValue.flatMap(Timestamp.parse),
                  reason: o["reason"]?.stringValue,
                  exportedAt: o["exported_at"]?.stringValue.flatMap(Timestamp.parse))
    }
}

/// The keyring's commit point (the `…active` item): which key is active, plus the intent of an
/// operation in progress so the next writer can finish or undo it after a crash.
struct KeyPointer: Sendable, Equatable {
    /// The active key.
    var active: KeyID?
    /// The staged next key (trusted ahead of its activation), if any.
    var next: KeyID?
    /// A key being generated by a rotation that has not committed: rolled back on recovery.
    var pending: KeyID?
    /// Keys being destroyed (with the reason): rolled forward on recovery.
    var destroying: [(KeyID, String)] = []

    static func == (a: KeyPointer, b: KeyPointer) -> Bool {
        a.active == b.active && a.next == b.next && a.pending == b.pending && a.destroying.map(\.0) == b.destroying.map(\.0)
            && a.destroying.map(\.1) == b.destroying.map(\.1)
    }

    var json: SecureBytes {
        var o = JSONObject([("active", active.map { .string($0.hex) } ?? .null)])
        if let next { o["next"] = .string(next.hex) }
        if let pending { o["pending"] = .string(pending.hex) }
        if !destroying.isEmpty {
            o["destroying"] = .array(destroying.map { .object(JSONObject([("key_id", .string($0.0.hex)), ("reason", .string($0.1))])) })
        }
        return SecureBytes(JSON.serialize(.object(o)))
    }

    init(active: KeyID?, next: KeyID? = nil, pending: KeyID? = nil, destroying: [(KeyID, String)] = []) {
        self.active = active
        self.next = next
        self.pending = pending
        self.destroying = destroying
    }

    init(json: SecureBytes, path: String) throws(KeychainError) {
        let value: JSONValue
        do { value = try json.withSpan { span throws(JSONError) in try JSON.parse(span) } } catch {
            throw .decode(path: path, why: "the active-key pointer is not JSON")
        }
        guard case let .object(o) = value else { throw .decode(path: path, why: "the active-key pointer is not an object") }
        active = o["active"]?.stringValue.flatMap { KeyID(hex: $0) }
        pending = o["pending"]?.stringValue.flatMap { KeyID(hex: $0) }
        next = o["next"]?.stringValue.flatMap { KeyID(hex: $0) }
        if case let .array(list)? = o["destroying"] {
            destroying = list.compactMap { v in
                guard let obj = v.objectValue, let k = obj["key_id"]?.stringValue.flatMap({ KeyID(hex: $0) }) else { return nil }
                return (k, obj["reason"]?.stringValue ?? "destroyed")
            }
        }
    }
}

/// The shared lifecycle engine behind `DeviceKeyring` and `SenderKeyring`.
///
/// Items (all in the store's default access group):
/// - `key@<service>@<key id>.item`: the secret (accessibility as configured);
/// - `genericPassword@<service>.state@<key id>.item`: the key's public record and deadlines, or its tombstone (`alwaysThisDeviceOnly`);
/// - `genericPassword@<service>.active@pointer.item`: the commit point (`alwaysThisDeviceOnly`).
///
/// A rotation writes the new key and both states first, and commits by replacing the pointer: one
/// atomic rename. Lookup reads the pointer, one state and one key: O(1) in the number of keys.
struct KeyringCore<Material: KeyringMaterial>: Sendable {
    let store: KeychainStore
    let accessibility: Accessibility
    let group: String

    static var logger: Logger { Logger(label: "sealedpush.keyring") }

    init(store: KeychainStore, accessibility: Accessibility) {
        self.store = store
        self.accessibility = accessibility
        self.group = store.accessGroups[0]
    }

    var stateService: String { Material.service + ".state" }
    var pointerService: String { Material.service + ".active" }
    static var tag: [UInt8] { Array(Material.service.utf8) }

    func keyIdentity(_ kid: KeyID) -> ItemIdentity {
        ItemIdentity(itemClass: .key, accessGroup: group, service: Material.service, account: kid.hex)
    }
    func stateIdentity(_ kid: KeyID) -> ItemIdentity {
        ItemIdentity(itemClass: .genericPassword, accessGroup: group, service: stateService, account: kid.hex)
    }
    var pointerIdentity: ItemIdentity {
        ItemIdentity(itemClass: .genericPassword, accessGroup: group, service: pointerService, account: "pointer")
    }

    // MARK: reading (no lock)

    func readPointer(_ s: KeychainStore) throws(KeychainError) -> KeyPointer {
        guard let file = try s.readItemFile(pointerIdentity) else { return KeyPointer(active: nil) }
        return try KeyPointer(json: try file.open(storeKey: s.storeKey), path: file.path)
    }

    func readState(_ s: KeychainStore, _ kid: KeyID) throws(KeychainError) -> KeyRecordState? {
        guard let file = try s.readItemFile(stateIdentity(kid)) else { return nil }
        return try KeyRecordState(json: try file.open(storeKey: s.storeKey), path: file.path)
    }

    /// The key pair, or `nil` if its item is gone; `interactionNotAllowed` when its class is unavailable.
    func readKey(_ s: KeychainStore, _ kid: KeyID, publicKey: [UInt8]? = nil) throws(KeychainError) -> Material? {
        guard let file = try s.readItemFile(keyIdentity(kid)) else { return nil }
        let state = try s.deviceLockState()
        try s.checkAvailable(file.header.accessibility, "\(Material.kindName) \(kid.hex)", state: state)
        let secret = try file.open(storeKey: s.storeKey)
        let material: Material
        if let publicKey { material = try Material(storedSecret: secret, storedPublicKey: publicKey) }
        else { material = try Material(storedSecret: secret) }
        guard material.keyID == kid else {
            throw .authFailed(path: file.path, why: "the key in the item does not have the id the item is filed under")
        }
        return material
    }

    func info(_ st: KeyRecordState, pointer: KeyPointer) -> KeyInfo {
        let state: KeyState
        if st.destroyedAt != nil || pointer.destroying.contains(where: { $0.0 == st.keyID }) { state = .destroyed }
        else if pointer.active == st.keyID { state = .active }
        else if pointer.next == st.keyID { state = .next }
        else { state = .retired }
        return KeyInfo(keyID: st.keyID, state: state, publicKey: st.publicKey, createdAt: st.createdAt,
                       retireAfter: state == .retired ? st.retireAfter : nil, destroyedAt: st.destroyedAt,
                       destroyReason: st.reason, exportedAt: st.exportedAt)
    }

    /// A lookup's answer; a found key carries the deadline it is usable until (`nil`: the active key).
    enum Lookup { case found(Material, usableUntil: Date?), unknown, locked }

    /// O(1): the pointer, the key's state, the key item (plus the store key and lock state).
    func lookUp(_ kid: KeyID) -> Lookup {
        do {
            let pointer = try readPointer(store)
            guard pointer.pending != kid, !pointer.destroying.contains(where: { $0.0 == kid }),
                  let st = try readState(store, kid), st.destroyedAt == nil else { return .unknown }
            var usableUntil: Date?
            if pointer.active != kid && pointer.next != kid {
                guard let deadline = st.retireAfter, store.now() <= deadline else { return .unknown }
                usableUntil = deadline
            }
            guard let key = try readKey(store, kid, publicKey: st.publicKey) else { return .unknown }
            return .found(key, usableUntil: usableUntil)
        } catch let error {
            if case .interactionNotAllowed = error { return .locked }
            Self.logger.error("key lookup failed", metadata: ["key_id": "\(kid.hex)", "error": "\(error.description)"])
            return .unknown
        }
    }

    func list() throws(KeychainError) -> [KeyInfo] {
        let pointer = try readPointer(store)
        let items: [KeychainItem]
        do {
            items = try store.copyMatching(KeychainQuery(itemClass: .genericPassword, accessGroup: group, service: stateService,
                                                         limit: .all, returnData: true))
        } catch .itemNotFound { return [] }
        var out: [KeyInfo] = []
        for item in items {
            let st = try KeyRecordState(json: item.data!, path: item.account)
            if pointer.pending == st.keyID { continue }  // an uncommitted rotation
            out.append(info(st, pointer: pointer))
        }
        return out.sorted { ($0.createdAt, $0.keyID.hex) < ($1.createdAt, $1.keyID.hex) }
    }

    func activeKey() throws(KeychainError) -> Material {
        guard let kid = try readPointer(store).active else { throw .noActiveKey }
        guard let key = try readKey(store, kid) else { throw .itemNotFound("the active \(Material.kindName) \(kid.hex)") }
        return key
    }

    /// The info of an active or usable retired key (the active one when `kid` is nil).
    func usableInfo(_ kid: KeyID?) throws(KeychainError) -> KeyInfo {
        let pointer = try readPointer(store)
        guard let id = kid ?? pointer.active else { throw .noActiveKey }
        guard let st = try readState(store, id), pointer.pending != id else { throw .keyNotUsable(keyID: id.hex, state: "not in this keyring") }
        let i = info(st, pointer: pointer)
        guard i.isUsable(at: store.now()) else {
            throw .keyNotUsable(keyID: id.hex, state: i.state == .destroyed ? "destroyed" : "retired past its deadline")
        }
        return i
    }

    // MARK: writing (under the writers' lock)

    func writePointer(_ tx: KeychainStore, _ p: KeyPointer) throws(KeychainError) {
        try writeSmall(tx, pointerIdentity, p.json, label: "active \(Material.kindName): \(p.active?.hex ?? "none")")
    }

    func writeState(_ tx: KeychainStore, _ st: KeyRecordState) throws(KeychainError) {
        let what = st.destroyedAt != nil ? "tombstone" : "state"
        try writeSmall(tx, stateIdentity(st.keyID), st.json, label: "\(Material.kindName) \(st.keyID.hex) \(what)")
    }

    private func writeSmall(_ tx: KeychainStore, _ id: ItemIdentity, _ data: SecureBytes, label: String) throws(KeychainError) {
        let date = tx.now()
        let created = (try? tx.readItemFile(id))??.header.created ?? date
        try tx.writeItem(ItemHeader(itemClass: id.itemClass, accessGroup: id.accessGroup, service: id.service, account: id.account,
                                    label: label, accessibility: .alwaysThisDeviceOnly, applicationTag: nil,
                                    created: created, modified: date), data: data)
    }

    func writeKey(_ tx: KeychainStore, _ key: Material) throws(KeychainError) {
        let date = tx.now()
        try tx.checkAvailable(accessibility, "adding \(Material.kindName) \(key.keyID.hex)", state: try tx.deviceLockState())
        try tx.writeItem(ItemHeader(itemClass: .key, accessGroup: group, service: Material.service, account: key.keyID.hex,
                                    label: "\(Material.kindName) \(key.keyID.hex)", accessibility: accessibility,
                                    applicationTag: Self.tag, created: date, modified: date), data: key.storedSecret)
    }

    /// Finishes or undoes what a crashed writer left: a pending key is removed (it never became
    /// active, so nothing was sealed to it), a started destruction is completed.
    func recover(_ tx: KeychainStore) throws(KeychainError) -> KeyPointer {
        var pointer = try readPointer(tx)
        guard pointer.pending != nil || !pointer.destroying.isEmpty else { return pointer }
        if let pending = pointer.pending {
            Self.logger.notice("rolling back an interrupted rotation", metadata: ["key_id": "\(pending.hex)"])
            try StoreIO.wipeAndRemove(tx.path(of: keyIdentity(pending)))
            try StoreIO.wipeAndRemove(tx.path(of: stateIdentity(pending)))
            pointer.pending = nil
        }
        for (kid, reason) in pointer.destroying {
            try finishDestroy(tx, kid, reason: reason)
        }
        pointer.destroying = []
        try writePointer(tx, pointer)
        return pointer
    }

    private func finishDestroy(_ tx: KeychainStore, _ kid: KeyID, reason: String) throws(KeychainError) {
        if var st = try readState(tx, kid), st.destroyedAt == nil {
            st.destroyedAt = ItemHeader.wholeSeconds(tx.now())
            st.retireAfter = nil
            st.reason = reason
            try writeState(tx, st)
        }
        try StoreIO.wipeAndRemove(tx.path(of: keyIdentity(kid)))
    }

    func generate(using imported: Material? = nil) throws(KeychainError) -> KeyInfo {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> KeyInfo in
            var pointer = try recover(tx)
            if let active = pointer.active { throw .activeKeyExists(keyID: active.hex) }
            let st = try writePendingKey(tx, &pointer, imported: imported)
            let committed = KeyPointer(active: st.keyID)
            try writePointer(tx, committed)
            return info(st, pointer: committed)
        }
    }

    func rotate(grace: TimeInterval, using imported: Material? = nil) throws(KeychainError) -> KeyInfo {
        guard grace >= 0 else { throw .param("the grace period must not be negative") }
        return try store.transaction { (tx: KeychainStore) throws(KeychainError) -> KeyInfo in
            var pointer = try recover(tx)
            guard let old = pointer.active else { throw .noActiveKey }
            if let next = pointer.next { throw .nextKeyExists(keyID: next.hex) }
            guard var oldState = try readState(tx, old) else {
                throw .itemNotFound("the state of the active \(Material.kindName) \(old.hex)")
            }
            // 1–2. The new key, announced as pending, and its state; the old key's deadline (ignored while it is active).
            let st = try writePendingKey(tx, &pointer, imported: imported)
            let key = st.keyID
            oldState.retireAfter = tx.now().addingTimeInterval(grace)
            try writeState(tx, oldState)
            // 3. Commit: one rename makes the new key active and the old one retired.
            let committed = KeyPointer(active: key)
            try writePointer(tx, committed)
            return info(st, pointer: committed)
        }
    }

    func retire(_ kid: KeyID, grace: TimeInterval) throws(KeychainError) -> KeyInfo {
        guard grace >= 0 else { throw .param("the grace period must not be negative") }
        return try store.transaction { (tx: KeychainStore) throws(KeychainError) -> KeyInfo in
            let pointer = try recover(tx)
            if pointer.active == kid {
                throw .activeKeyRefused(keyID: kid.hex, why: "cannot be retired directly; rotate to make a new active key, which retires this one")
            }
            guard var st = try readState(tx, kid) else { throw .itemNotFound("\(Material.kindName) \(kid.hex)") }
            guard st.destroyedAt == nil else { throw .keyNotUsable(keyID: kid.hex, state: "destroyed") }
            st.retireAfter = tx.now().addingTimeInterval(grace)
            try writeState(tx, st)
            var committed = pointer
            if pointer.next == kid {
                // A staged key that is dropped becomes an ordinary retired one.
                committed.next = nil
                try writePointer(tx, committed)
            }
            return info(st, pointer: committed)
        }
    }

    func destroy(_ kids: [KeyID], force: Bool, reason: String, onlyExpiredAt date: Date? = nil) throws(KeychainError) -> [KeyInfo] {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> [KeyInfo] in
            var pointer = try recover(tx)
            var targets: [KeyID] = []
            for kid in kids {
                guard let st = try readState(tx, kid) else { throw .itemNotFound("\(Material.kindName) \(kid.hex)") }
                if st.destroyedAt != nil { continue }
                // Prune re-checks under the lock: a key extended or activated meanwhile is kept.
                if let date, info(st, pointer: pointer).isUsable(at: date) { continue }
                if pointer.active == kid && !force {
                    throw .activeKeyRefused(keyID: kid.hex, why: "destroying it would leave no key to seal to; rotate first, or destroy it with force")
                }
                targets.append(kid)
            }
            guard !targets.isEmpty else { return [] }
            // Record the intent first: a crash from here on is completed by the next writer.
            if let active = pointer.active, targets.contains(active) { pointer.active = nil }
            if let next = pointer.next, targets.contains(next) { pointer.next = nil }
            pointer.destroying = targets.map { ($0, reason) }
            try writePointer(tx, pointer)
            for kid in targets { try finishDestroy(tx, kid, reason: reason) }
            pointer.destroying = []
            try writePointer(tx, pointer)
            var out: [KeyInfo] = []
            for kid in targets { if let st = try readState(tx, kid) { out.append(info(st, pointer: pointer)) } }
            return out
        }
    }

    /// Writes a new key (`imported`, or a fresh one) and its state, announced first as the pointer's pending
    /// key so that a crash before the caller's commit rolls it back.
    private func writePendingKey(_ tx: KeychainStore, _ pointer: inout KeyPointer, imported: Material?) throws(KeychainError) -> KeyRecordState {
        if let imported, try readState(tx, imported.keyID) != nil {
            throw .duplicateItem("\(Material.kindName) \(imported.keyID.hex) is already in this store")
        }
        let key = imported ?? Material.generateNew()
        pointer.pending = key.keyID
        try writePointer(tx, pointer)
        try writeKey(tx, key)
        let st = KeyRecordState(keyID: key.keyID, publicKey: key.publicKeyBytes, createdAt: tx.now())
        try writeState(tx, st)
        return st
    }

    /// Makes a new key the staged next key (state `next`) beside the active one, which keeps signing
    /// (or being sealed to) until `activate`. Refuses when there is no active key or a next key exists.
    func stageNext(using imported: Material? = nil) throws(KeychainError) -> KeyInfo {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> KeyInfo in
            var pointer = try recover(tx)
            guard pointer.active != nil else { throw .noActiveKey }
            if let next = pointer.next { throw .nextKeyExists(keyID: next.hex) }
            let st = try writePendingKey(tx, &pointer, imported: imported)
            // Commit: one rename adds the next key; the active key is untouched.
            pointer.pending = nil
            pointer.next = st.keyID
            try writePointer(tx, pointer)
            return info(st, pointer: pointer)
        }
    }

    /// The info of a usable key for `export`; a next key's first export is recorded (`exportedAt`),
    /// which is what `activate` checks before switching to it.
    func exportInfo(_ kid: KeyID?) throws(KeychainError) -> KeyInfo {
        let found = try usableInfo(kid)
        guard found.state == .next, found.exportedAt == nil else { return found }
        return try store.transaction { (tx: KeychainStore) throws(KeychainError) -> KeyInfo in
            let pointer = try recover(tx)
            guard pointer.next == found.keyID, var st = try readState(tx, found.keyID) else { return try usableInfo(found.keyID) }
            if st.exportedAt == nil {
                st.exportedAt = ItemHeader.wholeSeconds(tx.now())
                try writeState(tx, st)
            }
            return info(st, pointer: pointer)
        }
    }

    /// Makes the staged next key `kid` active; the previous active key is retired until now + `grace`.
    /// Refuses a key that is not the next one, and (unless `force`) one whose record was never exported.
    func activate(_ kid: KeyID, force: Bool, grace: TimeInterval) throws(KeychainError) -> KeyInfo {
        guard grace >= 0 else { throw .param("the grace period must not be negative") }
        return try store.transaction { (tx: KeychainStore) throws(KeychainError) -> KeyInfo in
            let pointer = try recover(tx)
            guard let st = try readState(tx, kid) else { throw .itemNotFound("\(Material.kindName) \(kid.hex)") }
            guard pointer.next == kid else {
                throw .notNextKey(keyID: kid.hex, state: info(st, pointer: pointer).state.rawValue)
            }
            if st.exportedAt == nil && !force { throw .nextKeyNotExported(keyID: kid.hex) }
            if let old = pointer.active, var oldState = try readState(tx, old) {
                oldState.retireAfter = tx.now().addingTimeInterval(grace)
                try writeState(tx, oldState)
            }
            // Commit: one rename makes the next key active and the old one retired.
            let committed = KeyPointer(active: kid)
            try writePointer(tx, committed)
            return info(st, pointer: committed)
        }
    }

    func prune() throws(KeychainError) -> [KeyInfo] {
        let date = store.now()
        let expired = try list().filter { $0.state == .retired && !$0.isUsable(at: date) }.map(\.keyID)
        guard !expired.isEmpty else { return [] }
        return try destroy(expired, force: false, reason: "pruned", onlyExpiredAt: date)
    }
}

extension Duration {
    /// The duration in seconds as a `TimeInterval`.
    var timeInterval: TimeInterval {
        let c = components
        return TimeInterval(c.seconds) + TimeInterval(c.attoseconds) / 1e18
    }
}
