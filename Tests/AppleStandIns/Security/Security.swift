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

/// Stand-in only: the in-memory keychain behind the functions below.
public enum StandInKeychain {
    struct Item { var service: String, account: String, group: String, accessible: String, data: Data }
    static let state = Mutex<(items: [Item], forced: OSStatus?)>(([], nil))

    /// Makes every call answer `status` (`nil`: behave normally).
    public static func force(_ status: OSStatus?) { state.withLock { $0.forced = status } }
    /// Removes every item and the forced status.
    public static func reset() { state.withLock { $0 = ([], nil) } }
    /// The accessibility class each stored item was added with, by account.
    public static var accessibility: [String: String] {
        state.withLock { Dictionary($0.items.map { ($0.account, $0.accessible) }, uniquingKeysWith: { a, _ in a }) }
    }

    static func string(_ query: NSDictionary, _ key: CFString) -> String? { query[key as String] as? String }
}

/// Stand-in: returns the item matching `query` (generic passwords by service, account and group).
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    let (service, account, group) = (StandInKeychain.string(query, kSecAttrService), StandInKeychain.string(query, kSecAttrAccount),
                                     StandInKeychain.string(query, kSecAttrAccessGroup))
    let found = StandInKeychain.state.withLock { s -> (OSStatus?, Data?) in
        if let forced = s.forced { return (forced, nil) }
        return (nil, s.items.first { $0.service == service && $0.account == account && (group == nil || $0.group == group) }?.data)
    }
    if let status = found.0 { return status }
    guard let data = found.1 else { return errSecItemNotFound }
    result?.pointee = data as NSData
    return errSecSuccess
}

/// Stand-in: adds a generic password item.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    guard let service = StandInKeychain.string(attributes, kSecAttrService), let account = StandInKeychain.string(attributes, kSecAttrAccount),
          let data = attributes[kSecValueData as String] as? Data else { return -50 }   // errSecParam
    let item = StandInKeychain.Item(service: service, account: account, group: StandInKeychain.string(attributes, kSecAttrAccessGroup) ?? "",
                                    accessible: StandInKeychain.string(attributes, kSecAttrAccessible) ?? "", data: data)
    return StandInKeychain.state.withLock { s -> OSStatus in
        if let forced = s.forced { return forced }
        if s.items.contains(where: { $0.service == item.service && $0.account == item.account }) { return errSecDuplicateItem }
        s.items.append(item)
        return errSecSuccess
    }
}
#endif
