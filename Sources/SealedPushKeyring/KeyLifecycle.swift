#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushCrypto
import SealedPushWire
import Logging

/// The key lifecycle — generate, rotate, stage and activate, retire, destroy, prune, look up — over any
/// `KeyringStorage`: the file store (`SealedPushKeychain`'s `Keyring`) or the iOS Keychain (`SealedPushApple`).
///
/// Items, by service and account (the storage decides where they live and how they are protected):
/// - `<service>` / `<key id>`: the secret;
/// - `<service>.state` / `<key id>`: the key's public record and deadlines, or its tombstone;
/// - `<service>.active` / `pointer`: the commit point, with the intent of an operation in progress.
///
/// A rotation writes the new key and both states first, and commits by replacing the pointer: one
/// atomic item replacement. Lookup reads the pointer, one state and one key: O(1) in the number of keys.
/// A writer that died half-way is finished or undone by the next writer (`recover`).
public struct KeyLifecycle<Material: KeyringMaterial, Storage: KeyringStorage>: Sendable {
    /// Where the items live.
    public let storage: Storage

    static var logger: Logger { Logger(label: "sealedpush.keyring") }

    /// The lifecycle of `Material` keys in `storage`.
    public init(storage: Storage) { self.storage = storage }

    var stateService: String { Material.service + ".state" }
    var pointerService: String { Material.service + ".active" }
    /// The application tag of key items: the service's bytes.
    package static var tag: [UInt8] { Array(Material.service.utf8) }
    static var pointerAccount: String { "pointer" }

    // MARK: reading (no lock)

    package func readPointer(_ s: Storage) throws(KeychainError) -> KeyPointer {
        guard let data = try s.readRecord(service: pointerService, account: Self.pointerAccount) else { return KeyPointer(active: nil) }
        return try KeyPointer(json: data, path: s.location(service: pointerService, account: Self.pointerAccount, secret: false))
    }

    package func readState(_ s: Storage, _ kid: KeyID) throws(KeychainError) -> KeyRecordState? {
        guard let data = try s.readRecord(service: stateService, account: kid.hex) else { return nil }
        return try KeyRecordState(json: data, path: s.location(service: stateService, account: kid.hex, secret: false))
    }

    /// The key pair, or `nil` if its item is gone; `interactionNotAllowed` when its class is unavailable.
    package func readKey(_ s: Storage, _ kid: KeyID, publicKey: [UInt8]? = nil) throws(KeychainError) -> Material? {
        guard let secret = try s.readSecret(service: Material.service, account: kid.hex, what: "\(Material.kindName) \(kid.hex)") else {
            return nil
        }
        let material: Material
        if let publicKey { material = try Material(storedSecret: secret, storedPublicKey: publicKey) }
        else { material = try Material(storedSecret: secret) }
        guard material.keyID == kid else {
            throw .authFailed(path: s.location(service: Material.service, account: kid.hex, secret: true),
                              why: "the key in the item does not have the id the item is filed under")
        }
        return material
    }

    package func info(_ st: KeyRecordState, pointer: KeyPointer) -> KeyInfo {
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
    public enum Lookup {
        /// The key, usable until the deadline (`nil`: the active or next key).
        case found(Material, usableUntil: Date?)
        /// No usable key with this id.
        case unknown
        /// The key's item cannot be read in the device's lock state.
        case locked
        /// The storage cannot be asked (a missing entitlement, another Keychain error).
        case unavailable
    }

    /// O(1): the pointer, the key's state, the key item (plus the store key and lock state).
    public func lookUp(_ kid: KeyID) -> Lookup {
        do {
            let pointer = try readPointer(storage)
            guard pointer.pending != kid, !pointer.destroying.contains(where: { $0.0 == kid }),
                  let st = try readState(storage, kid), st.destroyedAt == nil else { return .unknown }
            var usableUntil: Date?
            if pointer.active != kid && pointer.next != kid {
                guard let deadline = st.retireAfter, storage.now() <= deadline else { return .unknown }
                usableUntil = deadline
            }
            guard let key = try readKey(storage, kid, publicKey: st.publicKey) else { return .unknown }
            return .found(key, usableUntil: usableUntil)
        } catch let error {
            if case .interactionNotAllowed = error { return .locked }
            if case .missingEntitlement = error { return .unavailable }
            if case .keychainStatus = error {
                Self.logger.error("key lookup failed", metadata: ["key_id": "\(kid.hex)", "error": "\(error.description)"])
                return .unavailable
            }
            Self.logger.error("key lookup failed", metadata: ["key_id": "\(kid.hex)", "error": "\(error.description)"])
            return .unknown
        }
    }

    public func list() throws(KeychainError) -> [KeyInfo] {
        let pointer = try readPointer(storage)
        let items = try storage.readRecords(service: stateService)
        var out: [KeyInfo] = []
        for item in items {
            let st = try KeyRecordState(json: item.data, path: item.account)
            if pointer.pending == st.keyID { continue }  // an uncommitted rotation
            out.append(info(st, pointer: pointer))
        }
        return out.sorted { ($0.createdAt, $0.keyID.hex) < ($1.createdAt, $1.keyID.hex) }
    }

    public func activeKey() throws(KeychainError) -> Material {
        guard let kid = try readPointer(storage).active else { throw .noActiveKey }
        guard let key = try readKey(storage, kid) else { throw .itemNotFound("the active \(Material.kindName) \(kid.hex)") }
        return key
    }

    /// The info of an active or usable retired key (the active one when `kid` is nil).
    public func usableInfo(_ kid: KeyID?) throws(KeychainError) -> KeyInfo {
        let pointer = try readPointer(storage)
        guard let id = kid ?? pointer.active else { throw .noActiveKey }
        guard let st = try readState(storage, id), pointer.pending != id else { throw .keyNotUsable(keyID: id.hex, state: "not in this keyring") }
        let i = info(st, pointer: pointer)
        guard i.isUsable(at: storage.now()) else {
            throw .keyNotUsable(keyID: id.hex, state: i.state == .destroyed ? "destroyed" : "retired past its deadline")
        }
        return i
    }

    // MARK: writing (under the writers' lock)

    package func writePointer(_ tx: Storage, _ p: KeyPointer) throws(KeychainError) {
        try tx.writeRecord(service: pointerService, account: Self.pointerAccount, data: p.json,
                           label: "active \(Material.kindName): \(p.active?.hex ?? "none")")
    }

    package func writeState(_ tx: Storage, _ st: KeyRecordState) throws(KeychainError) {
        let what = st.destroyedAt != nil ? "tombstone" : "state"
        try tx.writeRecord(service: stateService, account: st.keyID.hex, data: st.json, label: "\(Material.kindName) \(st.keyID.hex) \(what)")
    }

    package func writeKey(_ tx: Storage, _ key: Material) throws(KeychainError) {
        try tx.writeSecret(service: Material.service, account: key.keyID.hex, data: key.storedSecret,
                           label: "\(Material.kindName) \(key.keyID.hex)", tag: Self.tag)
    }

    /// Finishes or undoes what a crashed writer left: a pending key is removed (it never became
    /// active, so nothing was sealed to it), a started destruction is completed.
    package func recover(_ tx: Storage) throws(KeychainError) -> KeyPointer {
        var pointer = try readPointer(tx)
        guard pointer.pending != nil || !pointer.destroying.isEmpty else { return pointer }
        if let pending = pointer.pending {
            Self.logger.notice("rolling back an interrupted rotation", metadata: ["key_id": "\(pending.hex)"])
            try tx.removeItem(service: Material.service, account: pending.hex, secret: true)
            try tx.removeItem(service: stateService, account: pending.hex, secret: false)
            pointer.pending = nil
        }
        for (kid, reason) in pointer.destroying {
            try finishDestroy(tx, kid, reason: reason)
        }
        pointer.destroying = []
        try writePointer(tx, pointer)
        return pointer
    }

    private func finishDestroy(_ tx: Storage, _ kid: KeyID, reason: String) throws(KeychainError) {
        if var st = try readState(tx, kid), st.destroyedAt == nil {
            st.destroyedAt = KeyTimes.wholeSeconds(tx.now())
            st.retireAfter = nil
            st.reason = reason
            try writeState(tx, st)
        }
        try tx.removeItem(service: Material.service, account: kid.hex, secret: true)
    }

    public func generate(using imported: Material? = nil) throws(KeychainError) -> KeyInfo {
        try storage.transaction { (tx: Storage) throws(KeychainError) -> KeyInfo in
            var pointer = try recover(tx)
            if let active = pointer.active { throw .activeKeyExists(keyID: active.hex) }
            let st = try writePendingKey(tx, &pointer, imported: imported)
            let committed = KeyPointer(active: st.keyID)
            try writePointer(tx, committed)
            return info(st, pointer: committed)
        }
    }

    public func rotate(grace: TimeInterval, using imported: Material? = nil) throws(KeychainError) -> KeyInfo {
        guard grace >= 0 else { throw .param("the grace period must not be negative") }
        return try storage.transaction { (tx: Storage) throws(KeychainError) -> KeyInfo in
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

    public func retire(_ kid: KeyID, grace: TimeInterval) throws(KeychainError) -> KeyInfo {
        guard grace >= 0 else { throw .param("the grace period must not be negative") }
        return try storage.transaction { (tx: Storage) throws(KeychainError) -> KeyInfo in
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

    public func destroy(_ kids: [KeyID], force: Bool, reason: String, onlyExpiredAt date: Date? = nil) throws(KeychainError) -> [KeyInfo] {
        try storage.transaction { (tx: Storage) throws(KeychainError) -> [KeyInfo] in
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
    private func writePendingKey(_ tx: Storage, _ pointer: inout KeyPointer, imported: Material?) throws(KeychainError) -> KeyRecordState {
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
    public func stageNext(using imported: Material? = nil) throws(KeychainError) -> KeyInfo {
        try storage.transaction { (tx: Storage) throws(KeychainError) -> KeyInfo in
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
    public func exportInfo(_ kid: KeyID?) throws(KeychainError) -> KeyInfo {
        let found = try usableInfo(kid)
        guard found.state == .next, found.exportedAt == nil else { return found }
        return try storage.transaction { (tx: Storage) throws(KeychainError) -> KeyInfo in
            let pointer = try recover(tx)
            guard pointer.next == found.keyID, var st = try readState(tx, found.keyID) else { return try usableInfo(found.keyID) }
            if st.exportedAt == nil {
                st.exportedAt = KeyTimes.wholeSeconds(tx.now())
                try writeState(tx, st)
            }
            return info(st, pointer: pointer)
        }
    }

    /// Makes the staged next key `kid` active; the previous active key is retired until now + `grace`.
    /// Refuses a key that is not the next one, and (unless `force`) one whose record was never exported.
    public func activate(_ kid: KeyID, force: Bool, grace: TimeInterval) throws(KeychainError) -> KeyInfo {
        guard grace >= 0 else { throw .param("the grace period must not be negative") }
        return try storage.transaction { (tx: Storage) throws(KeychainError) -> KeyInfo in
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

    public func prune() throws(KeychainError) -> [KeyInfo] {
        let date = storage.now()
        let expired = try list().filter { $0.state == .retired && !$0.isUsable(at: date) }.map(\.keyID)
        guard !expired.isEmpty else { return [] }
        return try destroy(expired, force: false, reason: "pruned", onlyExpiredAt: date)
    }
}

extension Duration {
    /// The duration in seconds as a `TimeInterval`.
    package var timeInterval: TimeInterval {
        let c = components
        return TimeInterval(c.seconds) + TimeInterval(c.attoseconds) / 1e18
    }
}
