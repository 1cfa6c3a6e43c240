// Stand-ins for the Security.framework declarations SealedPushApple uses (module-aliased to `Security`
// in the Linux build only; empty elsewhere). Types and signatures follow Apple's documentation
// (developer.apple.com/documentation/security): `OSStatus` is `Int32`, `CFTypeRef` is `AnyObject`,
// the `kSec…` keys are `CFString` constants (here `NSString`, which bridges to `String` with `as`
// as CFString does), `SecItemCopyMatching(_:_:)` takes a `CFDictionary` and an optional
// `UnsafeMutablePointer<CFTypeRef?>`. The status codes are Apple's values. Behind them: an in-memory
// keychain of generic passwords, and a status tests can force.
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
/// Readable after the first unlock since boot, never migrated to another device.
nonisolated(unsafe) public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
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
    struct Item { var service: String, account: String, group: String, accessible: String, label: String?, data: Data }
    struct State { var items: [Item] = [], forced: OSStatus? = nil, entitled: Set<String>? = nil }
    static let state = Mutex(State())

    /// Makes every call answer `status` (`nil`: behave normally).
    public static func force(_ status: OSStatus?) { state.withLock { $0.forced = status } }
    /// Answers `errSecMissingEntitlement` for any access group outside `groups` (`nil`: every group is entitled).
    public static func entitle(_ groups: Set<String>?) { state.withLock { $0.entitled = groups } }
    /// Removes every item, the forced status and the entitlement limit.
    public static func reset() { state.withLock { $0 = State() } }
    /// The accessibility class each stored item was added with, by account.
    public static var accessibility: [String: String] {
        state.withLock { Dictionary($0.items.map { ($0.account, $0.accessible) }, uniquingKeysWith: { a, _ in a }) }
    }
    /// The stored items' services and accounts.
    public static var items: [(service: String, account: String)] { state.withLock { $0.items.map { ($0.service, $0.account) } } }

    static func string(_ query: NSDictionary, _ key: CFString) -> String? { query[key as String] as? String }

    /// The status the state forces for `query`, if any: a forced status, or a group without entitlement.
    static func refused(_ s: State, _ query: NSDictionary) -> OSStatus? {
        if let forced = s.forced { return forced }
        if let entitled = s.entitled, let group = string(query, kSecAttrAccessGroup), !entitled.contains(group) { return errSecMissingEntitlement }
        return nil
    }

    /// Whether `item` matches the service, account and group `query` names (each, when named).
    static func matches(_ item: Item, _ query: NSDictionary) -> Bool {
        (string(query, kSecAttrService).map { $0 == item.service } ?? true) && (string(query, kSecAttrAccount).map { $0 == item.account } ?? true)
            && (string(query, kSecAttrAccessGroup).map { $0 == item.group } ?? true)
    }
}

/// Stand-in: returns the item matching `query` (generic passwords by service, account and group): its data,
/// or with `kSecMatchLimitAll` and `kSecReturnAttributes` an array of dictionaries of attributes and data.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    let all = (query[kSecMatchLimit as String] as? String) == (kSecMatchLimitAll as String)
    let found = StandInKeychain.state.withLock { s -> (OSStatus?, [StandInKeychain.Item]) in
        if let refused = StandInKeychain.refused(s, query) { return (refused, []) }
        return (nil, s.items.filter { StandInKeychain.matches($0, query) })
    }
    if let status = found.0 { return status }
    guard let first = found.1.first else { return errSecItemNotFound }
    if all, (query[kSecReturnAttributes as String] as? Bool) == true {
        result?.pointee = found.1.map { item -> NSDictionary in
            [kSecAttrService as String: item.service, kSecAttrAccount as String: item.account,
             kSecAttrAccessGroup as String: item.group, kSecValueData as String: item.data]
        } as NSArray
    } else {
        result?.pointee = first.data as NSData
    }
    return errSecSuccess
}

/// Stand-in: adds a generic password item.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    guard let service = StandInKeychain.string(attributes, kSecAttrService), let account = StandInKeychain.string(attributes, kSecAttrAccount),
          let data = attributes[kSecValueData as String] as? Data else { return errSecParam }
    let item = StandInKeychain.Item(service: service, account: account, group: StandInKeychain.string(attributes, kSecAttrAccessGroup) ?? "",
                                    accessible: StandInKeychain.string(attributes, kSecAttrAccessible) ?? "",
                                    label: StandInKeychain.string(attributes, kSecAttrLabel), data: data)
    return StandInKeychain.state.withLock { s -> OSStatus in
        if let refused = StandInKeychain.refused(s, attributes) { return refused }
        if s.items.contains(where: { $0.service == item.service && $0.account == item.account && $0.group == item.group }) { return errSecDuplicateItem }
        s.items.append(item)
        return errSecSuccess
    }
}

/// Stand-in: changes the data and label of the items matching `query`.
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    StandInKeychain.state.withLock { s -> OSStatus in
        if let refused = StandInKeychain.refused(s, query) { return refused }
        var changed = false
        for index in s.items.indices where StandInKeychain.matches(s.items[index], query) {
            if let data = attributesToUpdate[kSecValueData as String] as? Data { s.items[index].data = data }
            if let label = StandInKeychain.string(attributesToUpdate, kSecAttrLabel) { s.items[index].label = label }
            changed = true
        }
        return changed ? errSecSuccess : errSecItemNotFound
    }
}

/// Stand-in: deletes the items matching `query`.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    StandInKeychain.state.withLock { s -> OSStatus in
        if let refused = StandInKeychain.refused(s, query) { return refused }
        let before = s.items.count
        s.items.removeAll { StandInKeychain.matches($0, query) }
        return s.items.count < before ? errSecSuccess : errSecItemNotFound
    }
}
#endif
