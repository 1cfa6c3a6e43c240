#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushKeyring
import SealedPushCrypto

/// The file store as a `KeyringStorage`: the keyrings' items in the store's first access group.
///
/// - secrets: `key@<service>@<key id>.item`, with the keyring's accessibility (checked against the
///   simulated lock state before every read and write);
/// - records: `genericPassword@<service>@<account>.item`, `alwaysThisDeviceOnly` (public facts).
///
/// `transaction` is the store's: the writers' `flock`, temp files of an interrupted write removed, the
/// change counter moved; every item is replaced with temp + fsync + rename + directory fsync.
struct FileKeyringStorage: KeyringStorage {
    let store: KeychainStore
    let accessibility: Accessibility
    let group: String

    init(store: KeychainStore, accessibility: Accessibility) {
        self.store = store
        self.accessibility = accessibility
        group = store.accessGroups[0]
    }

    private func identity(_ service: String, _ account: String, secret: Bool) -> ItemIdentity {
        ItemIdentity(itemClass: secret ? .key : .genericPassword, accessGroup: group, service: service, account: account)
    }

    func now() -> Date { store.now() }

    func transaction<R>(_ body: (FileKeyringStorage) throws(KeychainError) -> R) throws(KeychainError) -> R {
        try store.transaction { (tx: KeychainStore) throws(KeychainError) -> R in
            try body(FileKeyringStorage(store: tx, accessibility: accessibility))
        }
    }

    func readRecord(service: String, account: String) throws(KeychainError) -> SecureBytes? {
        guard let file = try store.readItemFile(identity(service, account, secret: false)) else { return nil }
        return try file.open(storeKey: store.storeKey)
    }

    func readRecords(service: String) throws(KeychainError) -> [(account: String, data: SecureBytes)] {
        let items: [KeychainItem]
        do {
            items = try store.copyMatching(KeychainQuery(itemClass: .genericPassword, accessGroup: group, service: service,
                                                         limit: .all, returnData: true))
        } catch .itemNotFound { return [] }
        return items.map { ($0.account, $0.data!) }
    }

    func writeRecord(service: String, account: String, data: SecureBytes, label: String) throws(KeychainError) {
        let id = identity(service, account, secret: false)
        let date = store.now()
        let created = (try? store.readItemFile(id))??.header.created ?? date
        try store.writeItem(ItemHeader(itemClass: id.itemClass, accessGroup: id.accessGroup, service: id.service, account: id.account,
                                       label: label, accessibility: .alwaysThisDeviceOnly, applicationTag: nil,
                                       created: created, modified: date), data: data)
    }

    func readSecret(service: String, account: String, what: String) throws(KeychainError) -> SecureBytes? {
        guard let file = try store.readItemFile(identity(service, account, secret: true)) else { return nil }
        let state = try store.deviceLockState()
        try store.checkAvailable(file.header.accessibility, what, state: state)
        return try file.open(storeKey: store.storeKey)
    }

    func writeSecret(service: String, account: String, data: SecureBytes, label: String, tag: [UInt8]) throws(KeychainError) {
        let date = store.now()
        try store.checkAvailable(accessibility, "adding \(label)", state: try store.deviceLockState())
        try store.writeItem(ItemHeader(itemClass: .key, accessGroup: group, service: service, account: account,
                                       label: label, accessibility: accessibility,
                                       applicationTag: tag, created: date, modified: date), data: data)
    }

    func removeItem(service: String, account: String, secret: Bool) throws(KeychainError) {
        try StoreIO.wipeAndRemove(store.path(of: identity(service, account, secret: secret)))
    }

    func location(service: String, account: String, secret: Bool) -> String {
        store.path(of: identity(service, account, secret: secret)).string
    }
}

/// The file store's keyring engine.
typealias KeyringCore<Material: KeyringMaterial> = KeyLifecycle<Material, FileKeyringStorage>

extension KeyLifecycle where Storage == FileKeyringStorage {
    /// The engine over `store`; new keys get `accessibility`.
    init(store: KeychainStore, accessibility: Accessibility) {
        self.init(storage: FileKeyringStorage(store: store, accessibility: accessibility))
    }

    /// The store the keys live in.
    var store: KeychainStore { storage.store }

    // Writes inside a store transaction (tests simulate interrupted operations with these).
    func writePointer(_ tx: KeychainStore, _ p: KeyPointer) throws(KeychainError) {
        try writePointer(FileKeyringStorage(store: tx, accessibility: storage.accessibility), p)
    }
    func writeState(_ tx: KeychainStore, _ st: KeyRecordState) throws(KeychainError) {
        try writeState(FileKeyringStorage(store: tx, accessibility: storage.accessibility), st)
    }
    func readState(_ tx: KeychainStore, _ kid: KeyID) throws(KeychainError) -> KeyRecordState? {
        try readState(FileKeyringStorage(store: tx, accessibility: storage.accessibility), kid)
    }
    func writeKey(_ tx: KeychainStore, _ key: Material) throws(KeychainError) {
        try writeKey(FileKeyringStorage(store: tx, accessibility: storage.accessibility), key)
    }
}
