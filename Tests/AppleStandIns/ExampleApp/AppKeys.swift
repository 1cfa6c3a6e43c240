// The app side of docs/ios.md §3, compiled here as an app target would compile it (default MainActor
// isolation): the device and reveal keys' lifecycle in the Keychain, and the record the app registers.
import SealedPushApple
import SealedPushKeyring
import SealedPushCrypto
import SealedPushWire

/// Creates the keys on first launch and rotates them; returns the record to register with the server.
func setUpDeviceKeys() throws -> DeviceKeyRecord {
    // In the app (not the extensions), while the phone is unlocked: the first keys, then rotations now and then.
    let keys = KeychainDeviceKeySet(accessGroup: "ABCDE12345.com.example.shared")
    let record = try keys.generate()                // device key + reveal key: register record.jsonBytes with your server
    _ = try keys.rotateReveal(grace: 7 * 86_400)    // a new reveal key; the old one opens for 7 more days
    _ = try keys.rotateDevice(grace: 7 * 86_400)    // the same for the device key
    _ = try keys.prune()                            // destroys keys past their deadline
    let current = try keys.export()                 // the record to register now, with its "reveal" member
    _ = record
    return current
}
