#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushCrypto

/// The kind of an item (`kSecClass`): the class is part of the item's identity.
public enum KeychainItemClass: String, Sendable, CaseIterable, Codable {
    /// A cryptographic key (`kSecClassKey`).
    case key
    /// A generic password (`kSecClassGenericPassword`): any small secret or policy value.
    case genericPassword
}

/// The device's data-protection state, which decides which items can be read.
public enum DeviceLockState: String, Sendable, CaseIterable, Codable {
    /// Booted and never unlocked since: only `always` items are readable.
    case beforeFirstUnlock
    /// Unlocked: every item is readable.
    case unlocked
    /// Locked after having been unlocked once since boot: `afterFirstUnlock` and `always` items are readable.
    case locked
}

/// When an item's secret may be read (`kSecAttrAccessible`).
///
/// The `ThisDeviceOnly` variants behave the same on this store; they mark items that a real
/// deployment must never let leave the device (no backup, no migration).
public enum Accessibility: String, Sendable, CaseIterable, Codable {
    /// Only while the device is unlocked.
    case whenUnlocked
    /// After the first unlock since boot, until the next reboot.
    case afterFirstUnlock
    /// In every state (the Keychain deprecated this; provided for tests and public data).
    case always
    /// `whenUnlocked`, never migrated to another device.
    case whenUnlockedThisDeviceOnly
    /// `afterFirstUnlock`, never migrated to another device (the default for device keys).
    case afterFirstUnlockThisDeviceOnly
    /// `always`, never migrated to another device.
    case alwaysThisDeviceOnly

    /// Whether an item of this class can be read in `state`.
    public func isAvailable(in state: DeviceLockState) -> Bool {
        switch self {
        case .whenUnlocked, .whenUnlockedThisDeviceOnly: return state == .unlocked
        case .afterFirstUnlock, .afterFirstUnlockThisDeviceOnly: return state != .beforeFirstUnlock
        case .always, .alwaysThisDeviceOnly: return true
        }
    }
}

/// One item: its attributes and, when asked for and readable, its secret data.
public struct KeychainItem: Sendable {
    /// The item class (part of the identity).
    public var itemClass: KeychainItemClass
    /// The access group it lives in (part of the identity).
    public var accessGroup: String
    /// The service (part of the identity).
    public var service: String
    /// The account (part of the identity).
    public var account: String
    /// A human-readable label, not secret.
    public var label: String?
    /// When the secret may be read.
    public var accessibility: Accessibility
    /// An opaque application tag (`kSecAttrApplicationTag`), e.g. the role of a key; not secret.
    public var applicationTag: [UInt8]?
    /// When the item was added (whole seconds).
    public var creationDate: Date
    /// When the item was last updated (whole seconds).
    public var modificationDate: Date
    /// The secret, present only when the query asked for data.
    public var data: SecureBytes?
}

/// How many items a query returns (`kSecMatchLimit`).
public enum MatchLimit: Sendable, Equatable {
    /// The first matching item (`kSecMatchLimitOne`).
    case one
    /// Every matching item (`kSecMatchLimitAll`).
    case all
    /// At most this many items (must be at least 1).
    case max(Int)
}

/// What to match; every `nil` attribute matches anything.
///
/// When class, access group, service and account are all given the store opens that one file
/// directly; otherwise it reads the headers of the items in the entitled groups.
public struct KeychainQuery: Sendable {
    /// Match this class.
    public var itemClass: KeychainItemClass?
    /// Match this access group; `nil` searches every group the caller is entitled to.
    public var accessGroup: String?
    /// Match this service.
    public var service: String?
    /// Match this account.
    public var account: String?
    /// Match this label exactly.
    public var label: String?
    /// Match this accessibility class.
    public var accessibility: Accessibility?
    /// Match this application tag exactly.
    public var applicationTag: [UInt8]?
    /// How many items to return.
    public var limit: MatchLimit
    /// Whether to decrypt and return the secret (`kSecReturnData`); needs the class to be available.
    public var returnData: Bool

    /// A query; by default it matches everything, returns one item and no data.
    public init(itemClass: KeychainItemClass? = nil, accessGroup: String? = nil, service: String? = nil,
                account: String? = nil, label: String? = nil, accessibility: Accessibility? = nil,
                applicationTag: [UInt8]? = nil, limit: MatchLimit = .one, returnData: Bool = false) {
        self.itemClass = itemClass
        self.accessGroup = accessGroup
        self.service = service
        self.account = account
        self.label = label
        self.accessibility = accessibility
        self.applicationTag = applicationTag
        self.limit = limit
        self.returnData = returnData
    }

    func matches(_ h: ItemHeader) -> Bool {
        if let itemClass, itemClass != h.itemClass { return false }
        if let accessGroup, accessGroup != h.accessGroup { return false }
        if let service, service != h.service { return false }
        if let account, account != h.account { return false }
        if let label, label != h.label { return false }
        if let accessibility, accessibility != h.accessibility { return false }
        if let applicationTag, applicationTag != h.applicationTag { return false }
        return true
    }

    var describedForErrors: String {
        var parts: [String] = []
        if let itemClass { parts.append("class \(itemClass.rawValue)") }
        if let accessGroup { parts.append("group '\(accessGroup)'") }
        if let service { parts.append("service '\(service)'") }
        if let account { parts.append("account '\(account)'") }
        if let label { parts.append("label '\(label)'") }
        if let accessibility { parts.append("accessibility \(accessibility.rawValue)") }
        if applicationTag != nil { parts.append("the given application tag") }
        return parts.isEmpty ? "the query (any item)" : parts.joined(separator: ", ")
    }
}

/// What an update does to one optional attribute.
public enum AttributeChange<Value: Sendable & Equatable>: Sendable, Equatable {
    /// Leave it as it is.
    case keep
    /// Set it to this value.
    case set(Value)
    /// Remove it.
    case remove

    /// The attribute after the change, from its value before.
    func applied(to current: Value?) -> Value? {
        switch self {
        case .keep: return current
        case let .set(value): return value
        case .remove: return nil
        }
    }
}

/// What an update changes (`SecItemUpdate`'s attributes to update); `nil` or `.keep` leaves a value as it is.
///
/// The identity (class, group, service, account) cannot change: delete and add instead.
public struct KeychainUpdate: Sendable {
    /// New secret data.
    public var data: SecureBytes?
    /// The label's change.
    public var label: AttributeChange<String>
    /// New accessibility class.
    public var accessibility: Accessibility?
    /// The application tag's change.
    public var applicationTag: AttributeChange<[UInt8]>

    /// An update of the given values.
    public init(data: SecureBytes? = nil, label: AttributeChange<String> = .keep, accessibility: Accessibility? = nil,
                applicationTag: AttributeChange<[UInt8]> = .keep) {
        self.data = data
        self.label = label
        self.accessibility = accessibility
        self.applicationTag = applicationTag
    }
}
