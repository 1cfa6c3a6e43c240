import ArgumentParser
import SealedPushCrypto
import SealedPushKeychain

/// `sealedpush keys`: the device's X25519 keys and their lifecycle.
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage the device's keys: generate, rotate, list, export, retire, destroy, prune.",
        discussion: """
            Exactly one key is active (senders seal to it). A rotated-out key is retired: it still opens \
            messages until its deadline, then `prune` destroys it (secret wiped, a tombstone kept). \
            Give the server the record that `generate`, `rotate` or `export` prints.
            """,
        subcommands: Lifecycle<DeviceKeys>.subcommands
    )
}

/// The words and keyring of the `keys` group.
enum DeviceKeys: LifecycleKind {
    typealias Material = BoxKeyPair
    static let role = StoreRole.device
    static let generateAbstract = "Create the device's first active key and print its device key record."
    static let rotateAbstract = "Make a new active key; the old one stays usable for the grace period. Prints the new record."
    static let rotateGraceHelp = "How long the previous key keeps opening messages (cover APNs storage time and clock skew)."
    static let exportAbstract = "Print the device key record of the active key, or of a named usable key."
    static let retireAbstract = "Retire a key: it opens messages until now + grace, then `prune` destroys it."
    static let retireGraceHelp = "How long it keeps opening messages."
    static let destroyDiscussion = "Messages still sealed to it can never be opened. Refuses the active key unless --force."
    static let destroyForceHelp = "Destroy even the active key (the device then has none until `generate`)."
}
