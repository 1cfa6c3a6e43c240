import ArgumentParser
import SealedPushCrypto
import SealedPushKeychain

/// `sealedpush sender`: the server's Ed25519 signing keys and their lifecycle.
struct SenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sender",
        abstract: "Manage the server's signing keys: generate, rotate, list, export, retire, destroy, prune.",
        discussion: """
            The server's own store (--keychain DIR). Exactly one key is active: `seal --sign-with DIR`
            signs with it. Give devices the record `generate`, `rotate` or `export` prints
            (`sealedpush trust add RECORD.json`); after a rotation keep the old key trusted until
            signed messages in flight have been delivered.
            """,
        subcommands: Lifecycle<SenderKeys>.subcommands
    )
}

/// The words and keyring of the `sender` group.
enum SenderKeys: LifecycleKind {
    typealias Material = SigningKeyPair
    static let role = StoreRole.sender
    static let generateAbstract = "Create the server's first active signing key and print its sender key record."
    static let rotateAbstract = "Make a new active signing key; the old one is retired for the grace period. Prints the new record."
    static let rotateGraceHelp = "How long the previous key stays listed as retired before `prune` destroys it."
    static let exportAbstract = "Print the sender key record of the active key, or of a named usable key."
    static let retireAbstract = "Retire a signing key until now + grace, then `prune` destroys it."
    static let retireGraceHelp = "How long it stays retired before pruning."
    static let destroyDiscussion = "Refuses the active key unless --force."
    static let destroyForceHelp = "Destroy even the active key (nothing can be signed until `generate`)."
}
