public import SealedPushCrypto

/// What signs outgoing messages (wire format §4): an Ed25519 key named by its sender key id.
///
/// `SigningKeyPair` (a key in this process's memory, for example read from a `SenderKeyring`) is
/// one; a key held by a KMS or an HSM is another, which implements `sign` with a request to it
/// (docs/key-rotation.md, "Signing in a KMS or HSM"). `NotificationSender` takes any signer: a
/// signer with a `localKeyPair` signs on the synchronous path (`seal`), any other through
/// `sealAsync`.
public protocol MessageSigner: Sendable {
    /// The sender key id of the signing key (what the body's `sender` member names, and what
    /// devices find in their trusted sender records).
    var keyID: KeyID { get }

    /// A pure Ed25519 signature (RFC 8032, no prehash: 64 bytes) of `message`, which is
    /// `"SealedPush-v1-sig" || 0x00 || recipient key id || body` (`InnerMessage.signedBytes`).
    ///
    /// `message` holds the plaintext body of the message: whatever signs it sees the message.
    func sign(_ message: SecureBytes) async throws -> [UInt8]

    /// The key pair itself when it is in this process's memory, so `NotificationSender.seal` can
    /// sign synchronously without a task hop; `nil` (the default) for a remote signer.
    var localKeyPair: SigningKeyPair? { get }
}

extension MessageSigner {
    /// A remote signer has no local key pair.
    public var localKeyPair: SigningKeyPair? { nil }
}

extension SigningKeyPair: MessageSigner {
    /// Signs in process (`crypto_sign_detached`).
    public func sign(_ message: SecureBytes) async throws -> [UInt8] { signature(for: message) }

    /// Itself: an in-memory key signs on the synchronous path.
    public var localKeyPair: SigningKeyPair? { self }
}
