public import SealedPushCrypto
public import SealedPushKeyring
public import SealedPushWire

extension Keyring where Material == BoxKeyPair {
    /// Makes an existing key pair the first active key (migrating a device's key into this store, or
    /// loading a test keychain with known keys); throws `activeKeyExists` if there is one.
    @discardableResult
    public func generate(importing keyPair: BoxKeyPair) throws(KeychainError) -> DeviceKeyRecord {
        try importedRecord(core.generate(using: keyPair))
    }

    /// Makes an existing key pair the new active key; the previous one is retired until now + `grace`.
    @discardableResult
    public func rotate(to keyPair: BoxKeyPair, grace: Duration = DeviceKeyring.defaultGrace) throws(KeychainError) -> DeviceKeyRecord {
        try importedRecord(core.rotate(grace: grace.timeInterval, using: keyPair))
    }

    private func importedRecord(_ info: KeyInfo) throws(KeychainError) -> DeviceKeyRecord {
        DeviceKeyRecord(publicKey: try! BoxPublicKey(bytes: info.publicKey), createdAt: info.createdAt)  // 32 bytes from the key itself
    }
}
