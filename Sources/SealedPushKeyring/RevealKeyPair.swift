public import SealedPushCrypto
public import SealedPushWire

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
///
/// Here, beside the lifecycle, so that both stores use it: the file store (`SealedPushKeychain`'s
/// `RevealKeyring`) and the iOS Keychain (`SealedPushApple`'s `KeychainRevealKeyring`). Each store says
/// how it protects the kind's secrets.
public struct RevealKeyPair: BoxKeyMaterial {
    /// The X25519 key pair.
    public let boxKeyPair: BoxKeyPair

    /// Wraps an X25519 key pair as a reveal key.
    public init(_ pair: BoxKeyPair) { boxKeyPair = pair }

    /// `sealedpush.reveal-key`.
    public static var service: String { "sealedpush.reveal-key" }
    /// `reveal key`.
    public static var kindName: String { "reveal key" }
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
