#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
public import SealedPushCrypto
public import SealedPushWire

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

