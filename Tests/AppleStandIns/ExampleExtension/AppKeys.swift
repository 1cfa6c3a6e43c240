// The app side of docs/ios.md §3, compiled here as an app target would compile it (default MainActor
// isolation): the device keys' lifecycle in the Keychain.
import SealedPushApple
import SealedPushKeyring
import SealedPushCrypto
import SealedPushWire

/// Creates the device key on first launch and rotates it; returns the record to register with the server.
func setUpDeviceKeys() throws -> DeviceKeyRecord {
    // In the app (not the extension): the first key, then a rotation now and then.
    let keyring = KeychainDeviceKeyring(accessGroup: "ABCDE12345.com.example.shared")
    let record = try BoxKeyPair.record(try keyring.lifecycle.generate())      // register record.publicKey with your server
    let next = try BoxKeyPair.record(try keyring.lifecycle.rotate(grace: 7 * 86_400))   // the old key opens for 7 more days
    _ = try keyring.lifecycle.prune()                                          // destroys keys past their deadline
    _ = record
    return next
}
