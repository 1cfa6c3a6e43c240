// Stand-ins for the Security.framework declarations SealedPushApple uses (module-aliased to `Security`
// in the Linux build only; empty elsewhere). Types and signatures follow Apple's documentation
// (developer.apple.com/documentation/security): `OSStatus` is `Int32`, `CFTypeRef` is `AnyObject`,
// the `kSec…` keys are `CFString` constants (here `NSString`, which bridges to `String` with `as`
// as CFString does), `SecItemCopyMatching(_:_:)` takes a `CFDictionary` and an optional
// `UnsafeMutablePointer<CFTypeRef?>`. The status codes and the constants' string values are Apple's
// (SecBase.h for the statuses; SecItemConstants.c of Apple's Security sources for the strings, e.g.
// `kSecAttrAccessible` "pdmn", `kSecAttrAccessibleWhenUnlockedThisDeviceOnly` "aku",
// `kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly` "cku", `kSecAttrSynchronizable` "sync").
//
// Behind them: an in-memory keychain of generic passwords that keeps each item's accessibility class
// (`kSecAttrAccessible`; Apple's default `kSecAttrAccessibleWhenUnlocked` when none is given) and
// whether it is synchronizable, models the device's lock state, and a status tests can force:
// - before the first unlock since boot, only the `Always` classes are readable: an item of any other
//   class answers `errSecInteractionNotAllowed`;
// - after the first unlock, while locked, the `WhenUnlocked` and `WhenPasscodeSet` classes answer
//   `errSecInteractionNotAllowed`; the `AfterFirstUnlock` classes are readable;
// - unlocked, everything is readable.
// A call that touches an item whose class is unavailable (reading, adding, updating or deleting it)
// answers `errSecInteractionNotAllowed` (the stand-in assumes deletes are refused too; Apple's
// documentation does not say). A query without `kSecAttrSynchronizable` (or with `false`) matches only
// items that are not synchronizable, with `true` only synchronizable ones, with
// `kSecAttrSynchronizableAny` both (Apple's documented rule).
#if os(Linux)
public import Foundation
import Synchronization

/// Stand-in: `OSStatus`.
public typealias OSStatus = Int32
/// Stand-in: `CFTypeRef`.
public typealias CFTypeRef = AnyObject
/// Stand-in: `CFString` (toll-free bridged with `NSString`).
public typealias CFString = NSString
/// Stand-in: `CFDictionary` (toll-free bridged with `NSDictionary`).
public typealias CFDictionary = NSDictionary

/// No error.
public var errSecSuccess: OSStatus { 0 }
/// The item cannot be found.
public var errSecItemNotFound: OSStatus { -25300 }
/// The item already exists.
public var errSecDuplicateItem: OSStatus { -25299 }
/// User interaction is not allowed: the item's data protection class is unavailable (device locked).
public var errSecInteractionNotAllowed: OSStatus { -25308 }
/// A required entitlement is missing (e.g. keychain-access-groups).
public var errSecMissingEntitlement: OSStatus { -34018 }
/// A parameter is not valid.
public var errSecParam: OSStatus { -50 }

// Apple declares these as `let kSecClass: CFString` and so on; NSString is not Sendable here, so
// the stand-ins are `nonisolated(unsafe)` (immutable after initialisation).
/// Item class key.
nonisolated(unsafe) public let kSecClass: CFString = "class"
/// Generic password class.
nonisolated(unsafe) public let kSecClassGenericPassword: CFString = "genp"
/// Service attribute.
nonisolated(unsafe) public let kSecAttrService: CFString = "svce"
/// Account attribute.
nonisolated(unsafe) public let kSecAttrAccount: CFString = "acct"
/// Access group attribute.
nonisolated(unsafe) public let kSecAttrAccessGroup: CFString = "agrp"
/// Accessibility attribute.
nonisolated(unsafe) public let kSecAttrAccessible: CFString = "pdmn"
/// Readable only while the device is unlocked; migrates to a new device with an encrypted backup (Apple's default).
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
/// Readable after the first unlock since boot; migrates to a new device with an encrypted backup.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
/// Readable only while the device is unlocked, never migrated to another device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
/// Readable after the first unlock since boot, never migrated to another device.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
/// Readable only while the device is unlocked and has a passcode, never migrated to another device.
nonisolated(unsafe) public let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
/// Whether the item synchronizes through iCloud (a `CFBoolean`, or `kSecAttrSynchronizableAny` in a query).
nonisolated(unsafe) public let kSecAttrSynchronizable: CFString = "sync"
/// In a query: both synchronizable and non-synchronizable items.
nonisolated(unsafe) public let kSecAttrSynchronizableAny: CFString = "syna"
/// Use the data protection keychain (macOS; always on iOS).
nonisolated(unsafe) public let kSecUseDataProtectionKeychain: CFString = "nleg"
/// Return the item's data.
nonisolated(unsafe) public let kSecReturnData: CFString = "r_Data"
/// How many items to match.
nonisolated(unsafe) public let kSecMatchLimit: CFString = "m_Limit"
/// Match one item.
nonisolated(unsafe) public let kSecMatchLimitOne: CFString = "m_LimitOne"
/// The item's data.
nonisolated(unsafe) public let kSecValueData: CFString = "v_Data"
/// Match every item.
nonisolated(unsafe) public let kSecMatchLimitAll: CFString = "m_LimitAll"
/// Return the item's attributes (with several return keys: one dictionary per item).
nonisolated(unsafe) public let kSecReturnAttributes: CFString = "r_Attributes"
/// Label attribute.
nonisolated(unsafe) public let kSecAttrLabel: CFString = "labl"

/// Stand-in only: the in-memory keychain behind the functions below.
public enum StandInKeychain {
    /// Stand-in only: the device's lock state, which decides which accessibility classes can be used.
    public enum LockState: Sendable {
        /// The device started and was not unlocked since: only the `Always` classes are available.
        case beforeFirstUnlock
        /// Unlocked once since it started, locked now: the `AfterFirstUnlock` classes are available.
        case locked
        /// Unlocked: every class is available.
        case unlocked
    }

    /// Stand-in only: one stored item as a test sees it (never its data).
    public struct StoredItem: Sendable, Equatable {
        /// Its service.
        public let service: String
        /// Its account.
        public let account: String
        /// Its access group.
        public let group: String
        /// Its `kSecAttrAccessible` value (`"cku"`, `"aku"`, …).
        public let accessible: String
        /// Whether it synchronizes through iCloud.
        public let synchronizable: Bool
    }

    struct Item { var service: String, account: String, group: String, accessible: String, synchronizable: Bool, label: String?, data: Data }
    struct State { var items: [Item] = [], forced: OSStatus? = nil, entitled: Set<String>? = nil, lock: LockState = .unlocked }
    static let state = Mutex(State())

    /// Makes every call answer `status` (`nil`: behave normally).
    public static func force(_ status: OSStatus?) { state.withLock { $0.forced = status } }
    /// Answers `errSecMissingEntitlement` for any access group outside `groups` (`nil`: every group is entitled).
    public static func entitle(_ groups: Set<String>?) { state.withLock { $0.entitled = groups } }
    /// Puts the device in `lock` (the stand-in starts `unlocked`).
    public static func setLockState(_ lock: LockState) { state.withLock { $0.lock = lock } }
    /// Removes every item, the forced status and the entitlement limit, and unlocks the device.
    public static func reset() { state.withLock { $0 = State() } }
    /// The accessibility class each stored item was added with, by account (the first item of an account).
    public static var accessibility: [String: String] {
        state.withLock { Dictionary($0.items.map { ($0.account, $0.accessible) }, uniquingKeysWith: { a, _ in a }) }
    }
    /// The stored items' services and accounts.
    public static var items: [(service: String, account: String)] { state.withLock { $0.items.map { ($0.service, $0.account) } } }
    /// The stored item of `service` and `account` (any group), without its data.
    public static func item(service: String, account: String) -> StoredItem? {
        state.withLock { s in
            s.items.first { $0.service == service && $0.account == account }.map {
                StoredItem(service: $0.service, account: $0.account, group: $0.group, accessible: $0.accessible, synchronizable: $0.synchronizable)
            }
        }
    }

    static func string(_ query: NSDictionary, _ key: CFString) -> String? { query[key as String] as? String }

    /// The status the state forces for `query`, if any: a forced status, or a group without entitlement.
    static func refused(_ s: State, _ query: NSDictionary) -> OSStatus? {
        if let forced = s.forced { return forced }
        if let entitled = s.entitled, let group = string(query, kSecAttrAccessGroup), !entitled.contains(group) { return errSecMissingEntitlement }
        return nil
    }

    /// Whether items of class `accessible` can be used in `lock`.
    static func available(_ accessible: String, _ lock: LockState) -> Bool {
        switch lock {
        case .unlocked: return true
        case .locked:
            return ![kSecAttrAccessibleWhenUnlocked as String, kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String,
                     kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly as String].contains(accessible)
        case .beforeFirstUnlock:
            return ["dk", "dku"].contains(accessible)   // kSecAttrAccessibleAlways, …AlwaysThisDeviceOnly (deprecated: not declared here)
        }
    }

    /// Whether `item` matches the service, account, group and synchronizability `query` names (each, when named).
    static func matches(_ item: Item, _ query: NSDictionary) -> Bool {
        let sync: Bool
        if string(query, kSecAttrSynchronizable) == (kSecAttrSynchronizableAny as String) { sync = true }
        else { sync = (query[kSecAttrSynchronizable as String] as? Bool ?? false) == item.synchronizable }
        return sync && (string(query, kSecAttrService).map { $0 == item.service } ?? true)
            && (string(query, kSecAttrAccount).map { $0 == item.account } ?? true)
            && (string(query, kSecAttrAccessGroup).map { $0 == item.group } ?? true)
    }

    /// What a query returns for one item: its attributes (with its data when asked) as a dictionary, or its data alone.
    static func result(_ item: Item, attributes: Bool, data: Bool) -> AnyObject? {
        if attributes {
            var found: [String: Any] = [kSecAttrService as String: item.service, kSecAttrAccount as String: item.account,
                                        kSecAttrAccessGroup as String: item.group, kSecAttrAccessible as String: item.accessible,
                                        kSecAttrSynchronizable as String: item.synchronizable]
            if let label = item.label { found[kSecAttrLabel as String] = label }
            if data { found[kSecValueData as String] = item.data }
            return found as NSDictionary
        }
        return data ? item.data as NSData : nil
    }
}

/// Stand-in: returns the items matching `query` (generic passwords by service, account, group and
/// synchronizability): one item, or with `kSecMatchLimitAll` an array; each its data (`kSecReturnData`),
/// or with `kSecReturnAttributes` a dictionary of its attributes (and its data when both are asked).
/// `errSecInteractionNotAllowed` when a matching item's class is unavailable in the lock state.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    let all = (query[kSecMatchLimit as String] as? String) == (kSecMatchLimitAll as String)
    let attributes = (query[kSecReturnAttributes as String] as? Bool) == true
    let data = (query[kSecReturnData as String] as? Bool) == true
    let found = StandInKeychain.state.withLock { s -> (OSStatus?, [StandInKeychain.Item]) in
        if let refused = StandInKeychain.refused(s, query) { return (refused, []) }
        let matching = s.items.filter { StandInKeychain.matches($0, query) }
        if matching.contains(where: { !StandInKeychain.available($0.accessible, s.lock) }) { return (errSecInteractionNotAllowed, []) }
        return (nil, matching)
    }
    if let status = found.0 { return status }
    guard let first = found.1.first else { return errSecItemNotFound }
    if all {
        result?.pointee = found.1.compactMap { StandInKeychain.result($0, attributes: attributes, data: data) } as NSArray
    } else {
        result?.pointee = StandInKeychain.result(first, attributes: attributes, data: data)
    }
    return errSecSuccess
}

/// Stand-in: adds a generic password item (class `kSecAttrAccessibleWhenUnlocked` unless `kSecAttrAccessible` says otherwise).
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    guard let service = StandInKeychain.string(attributes, kSecAttrService), let account = StandInKeychain.string(attributes, kSecAttrAccount),
          let data = attributes[kSecValueData as String] as? Data else { return errSecParam }
    let item = StandInKeychain.Item(service: service, account: account, group: StandInKeychain.string(attributes, kSecAttrAccessGroup) ?? "",
                                    accessible: StandInKeychain.string(attributes, kSecAttrAccessible) ?? (kSecAttrAccessibleWhenUnlocked as String),
                                    synchronizable: attributes[kSecAttrSynchronizable as String] as? Bool ?? false,
                                    label: StandInKeychain.string(attributes, kSecAttrLabel), data: data)
    return StandInKeychain.state.withLock { s -> OSStatus in
        if let refused = StandInKeychain.refused(s, attributes) { return refused }
        guard StandInKeychain.available(item.accessible, s.lock) else { return errSecInteractionNotAllowed }
        if s.items.contains(where: { $0.service == item.service && $0.account == item.account && $0.group == item.group
                                     && $0.synchronizable == item.synchronizable }) { return errSecDuplicateItem }
        s.items.append(item)
        return errSecSuccess
    }
}

/// Stand-in: changes the data, label and accessibility of the items matching `query`.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    StandInKeychain.state.withLock { s -> OSStatus in
        if let refused = StandInKeychain.refused(s, query) { return refused }
        let indices = s.items.indices.filter { StandInKeychain.matches(s.items[$0], query) }
        guard !indices.isEmpty else { return errSecItemNotFound }
        let accessible = StandInKeychain.string(attributesToUpdate, kSecAttrAccessible)
        if indices.contains(where: { !StandInKeychain.available(s.items[$0].accessible, s.lock) })
            || accessible.map({ !StandInKeychain.available($0, s.lock) }) == true { return errSecInteractionNotAllowed }
        for index in indices {
            if let data = attributesToUpdate[kSecValueData as String] as? Data { s.items[index].data = data }
            if let label = StandInKeychain.string(attributesToUpdate, kSecAttrLabel) { s.items[index].label = label }
            if let accessible { s.items[index].accessible = accessible }
        }
        return errSecSuccess
    }
}

/// Stand-in: deletes the items matching `query`.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    StandInKeychain.state.withLock { s -> OSStatus in
        if let refused = StandInKeychain.refused(s, query) { return refused }
        let matching = s.items.filter { StandInKeychain.matches($0, query) }
        guard !matching.isEmpty else { return errSecItemNotFound }
        if matching.contains(where: { !StandInKeychain.available($0.accessible, s.lock) }) { return errSecInteractionNotAllowed }
        s.items.removeAll { StandInKeychain.matches($0, query) }
        return errSecSuccess
    }
}
#endif
