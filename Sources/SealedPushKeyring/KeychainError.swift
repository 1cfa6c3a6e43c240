/// Every failure of the keychain store and the keyrings built on it.
///
/// The first cases carry the names of the Apple Keychain's `errSec…` codes so code written against
/// one reads naturally against the other. No case ever carries secret material: only paths,
/// attribute values that are not secret (service, account, group, key ids), and modes.
public enum KeychainError: Error, Equatable, Sendable, CustomStringConvertible {
    /// An item with the same class, access group, service and account already exists (`errSecDuplicateItem`).
    case duplicateItem(String)
    /// No item matches the query (`errSecItemNotFound`).
    case itemNotFound(String)
    /// There is no keychain store at this path (the directory, or its store key, is missing).
    case storeNotFound(path: String, why: String)
    /// The item's accessibility class is not available in the device's lock state (`errSecInteractionNotAllowed`).
    case interactionNotAllowed(String)
    /// The caller is not entitled to the access group it asked for (`errSecMissingEntitlement`).
    case missingEntitlement(group: String)
    /// An item file is not in the store's format: cut short, not UTF-8 JSON, a missing member (`errSecDecode`).
    case decode(path: String, why: String)
    /// An item file failed its integrity check: edited, swapped with another item, or sealed by another store key (`errSecAuthFailed`).
    case authFailed(path: String, why: String)
    /// A parameter is invalid: an empty service, an unsafe access-group name, a bad limit (`errSecParam`).
    case param(String)
    /// A store file or directory is readable or writable by group or others, so the store is refused.
    case insecurePermissions(path: String, mode: UInt32, fix: String)
    /// A store file or directory belongs to another user (`owner`) than the one running this process (`expected`), so the store is refused.
    case notOwner(path: String, owner: UInt32, expected: UInt32)
    /// Another process held the store's writers' lock (`path`) for longer than `waited`, so the operation was not done.
    case busy(path: String, waited: Duration)
    /// A file-system operation failed (disk full, permission denied, read-only file system); `errno`
    /// is the system's code (`EACCES`, `EROFS`, `ENOSPC`, `EFBIG`, …) and the message says what to do
    /// about it. A failed write leaves the file it was replacing as it was (see docs/keychain.md, "Faults").
    case io(operation: String, path: String, errno: Int32)
    /// The keyring already has an active key, so `generate` would make a second one.
    case activeKeyExists(keyID: String)
    /// The keyring has no active key yet.
    case noActiveKey
    /// The operation refuses the active key (destroying it without `force`, retiring it instead of rotating).
    case activeKeyRefused(keyID: String, why: String)
    /// No key with this id is usable (never existed, destroyed, or retired past its deadline).
    case keyNotUsable(keyID: String, state: String)
    /// A next key is already staged, so another `stage` (or a plain `rotate`) would bypass it.
    case nextKeyExists(keyID: String)
    /// The key is not the staged next key, so it cannot be activated (`state`: `active`, `retired`, `destroyed`).
    case notNextKey(keyID: String, state: String)
    /// A Keychain call (`SecItemAdd`, `SecItemCopyMatching`, …) failed with an `OSStatus` this type has no
    /// other case for (the iOS Keychain store of `SealedPushApple`).
    case keychainStatus(operation: String, status: Int32)
    /// The staged next key's record was never exported, so no receiver can trust it yet; activate with `force` to switch anyway.
    case nextKeyNotExported(keyID: String)

    /// What happened and what to do about it.
    public var description: String {
        switch self {
        case let .duplicateItem(what):
            return "duplicateItem: \(what) already exists; update it instead, or delete it first"
        case let .itemNotFound(what):
            return "itemNotFound: no item matches \(what); check the class, service, account and access group, or add it first"
        case let .storeNotFound(path, why):
            return "storeNotFound: no keychain store at \(path) (\(why)); open it with create: true to make one"
        case let .interactionNotAllowed(what):
            return "interactionNotAllowed: \(what) cannot be read or written while the device is in this lock state; unlock the device and retry"
        case let .missingEntitlement(group):
            return "missingEntitlement: this caller is not entitled to access group '\(group)'; open the store with that group among its access groups (iOS: list it in the keychain-access-groups entitlement of both the app and the extension)"
        case let .decode(path, why):
            return "decode: the item file \(path) is not a valid keychain item (\(why)); restore it from a backup or delete it and re-create the item"
        case let .authFailed(path, why):
            return "authFailed: the item file \(path) failed its integrity check (\(why)); it was edited, swapped or sealed under another store key — restore it from a backup or delete it and re-create the item"
        case let .param(why):
            return "param: \(why)"
        case let .insecurePermissions(path, mode, fix):
            return "insecurePermissions: \(path) has mode \(String(mode & 0o7777, radix: 8)), which lets group or others at it; the store refuses to use it. Fix it with: \(fix)"
        case let .notOwner(path, owner, expected):
            return "notOwner: \(path) belongs to uid \(owner), not to uid \(expected) running this process; the store refuses "
                + "files and directories another user could have planted or could change. Fix it with: chown \(expected) '\(path)' "
                + "(after checking its content is yours), or run as the store's owner"
        case let .busy(path, waited):
            return "busy: another process held the store's lock \(path) for longer than \(waited); nothing was changed. "
                + "Retry later; if it stays busy, find the process holding the lock (`fuser \(path)`) and stop it"
        case let .io(operation, path, code):
            return "io: \(operation) \(path) failed: \(errnoText(code)) (\(errnoName(code))); \(ioAdvice(code))"
        case let .activeKeyExists(keyID):
            return "activeKeyExists: the keyring already has active key \(keyID); use rotate to replace it"
        case .noActiveKey:
            return "noActiveKey: the keyring has no active key; generate one first"
        case let .activeKeyRefused(keyID, why):
            return "activeKeyRefused: key \(keyID) is the active key and \(why)"
        case let .keyNotUsable(keyID, state):
            return "keyNotUsable: key \(keyID) is \(state); list the keys and pick an active or retired one"
        case let .nextKeyExists(keyID):
            return "nextKeyExists: key \(keyID) is already staged as the next key; activate it, or retire it to stage another"
        case let .notNextKey(keyID, state):
            return "notNextKey: key \(keyID) is \(state), not the staged next key; stage a next key first and activate that one"
        case let .keychainStatus(operation, status):
            return "keychainStatus: \(operation) failed with OSStatus \(status); check that the app and the extension both list "
                + "the keychain access group in keychain-access-groups, then look the status up (SecCopyErrorMessageString)"
        case let .nextKeyNotExported(keyID):
            return "nextKeyNotExported: the record of next key \(keyID) was never exported, so no receiver trusts it yet; export it and distribute it first, or activate with force"
        }
    }
}
