import ArgumentParser
import SealedPushCrypto
import SealedPushKeychain

/// `sealedpush sender`: the server's Ed25519 signing keys and their lifecycle.
struct SenderCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sender",
        abstract: "Manage the server's signing keys: generate, rotate, list, export, activate, retire, destroy, prune.",
        discussion: """
            The server's own store (--keychain DIR). Exactly one key is active: `seal --sign-with DIR` signs with it. \
            Give devices the record `generate` or `export` prints (`sealedpush trust add RECORD.json`).

            Staged rotation (no device ever sees untrustedSender): `rotate --stage` makes a next key while the \
            active one keeps signing; `export --key-id NEXT_ID` prints its record for every device to trust; \
            `activate NEXT_ID` then makes it the signing key (refused while its record was never exported, \
            unless --force). Keep the old key trusted until signed messages in flight have been delivered.
            """,
        subcommands: [
            Lifecycle<SenderKeys>.Generate.self, SenderRotate.self, Lifecycle<SenderKeys>.List.self, Lifecycle<SenderKeys>.Export.self,
            SenderActivate.self, Lifecycle<SenderKeys>.Retire.self, Lifecycle<SenderKeys>.Destroy.self, Lifecycle<SenderKeys>.Prune.self,
        ]
    )
}

/// The words and keyring of the `sender` group.
enum SenderKeys: LifecycleKind {
    typealias Material = SigningKeyPair
    static let role = StoreRole.sender
    static let generateAbstract = "Create the server's first active signing key and print its sender key record."
    static let rotateAbstract = "Make a new signing key; the old one is retired for the grace period. Prints the new record."
    static let rotateGraceHelp = "How long the previous key stays listed as retired before `prune` destroys it."
    static let exportAbstract = "Print the sender key record of the active key, or of a named usable key (the next key, say)."
    static let retireAbstract = "Retire a signing key until now + grace, then `prune` destroys it."
    static let retireGraceHelp = "How long it stays retired before pruning."
    static let destroyDiscussion = "Refuses the active key unless --force."
    static let destroyForceHelp = "Destroy even the active key (nothing can be signed until `generate`)."
}

/// `sealedpush sender rotate [--stage] [--grace D]`: a new signing key, active at once or staged as next.
struct SenderRotate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rotate",
        abstract: "Make a new signing key: staged as next with --stage (recommended), else active at once.",
        discussion: """
            With --stage the new key is the next key: the active key keeps signing, the new key's id and state \
            are printed, and the steps are: `sealedpush sender export --key-id NEXT_ID --keychain DIR > sender-next.json`; \
            on every device `sealedpush trust add sender-next.json`; then `sealedpush sender activate NEXT_ID --keychain DIR`.

            Without --stage the new key signs at once and its record is printed: devices that do not trust it \
            yet answer untrustedSender until they do.

            Examples:
              sealedpush sender rotate --stage --keychain srv
              sealedpush sender rotate --keychain srv --grace 2d > sender-new.json
            """)
    @OptionGroup var store: KeychainOptions
    @OptionGroup var output: JSONOutputOptions
    @Flag(help: "Stage the new key as next: the active key keeps signing until `sender activate`.")
    var stage = false
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "Without --stage: how long the previous key stays listed as retired before `prune` destroys it (default: 7d). With --stage, give it to `activate`.",
        valueName: "DURATION"))
    var grace: DurationArgument?

    func validate() throws {
        if stage && grace != nil {
            throw ValidationError("--grace goes with `sender activate` when you --stage: the old key is retired when the next one is activated.")
        }
        if output.json && !stage { throw ValidationError("--json goes with --stage; without it the output is the new key record (JSON already).") }
    }

    func run() throws {
        let ring = try Lifecycle<SenderKeys>.ring(store, create: false)
        let dir = store.directory.path
        if stage {
            let info = try keychain(store, role: .sender) { () throws(KeychainError) in try ring.stageNext() }
            KeyOutput.printInfos([info], json: output.json)
            let id = info.keyID.hex
            printError("""
                Staged next signing key \(id); the active key keeps signing. Next:
                  1. sealedpush sender export --key-id \(id) --keychain \(dir) > sender-next.json
                  2. on every device: sealedpush trust add sender-next.json
                  3. sealedpush sender activate \(id) --keychain \(dir)
                """)
            return
        }
        let grace = self.grace?.duration ?? SenderKeyring.defaultGrace
        KeyOutput.printRecord(try keychain(store, role: .sender) { () throws(KeychainError) in try ring.rotate(grace: grace).jsonBytes })
    }
}

/// `sealedpush sender activate KEY_ID [--force] [--grace D]`: the staged next key starts signing.
struct SenderActivate: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "activate",
        abstract: "Make the staged next signing key active; the previous one is retired for the grace period.",
        discussion: """
            Refuses a key whose record was never exported (`sealedpush sender export --key-id KEY_ID`), since \
            no device can trust it yet; --force switches anyway. Prints the keys whose state changed.

            Example: sealedpush sender activate 3f2a9c0d1e4b5a67 --keychain srv --grace 2d
            """)
    @OptionGroup var store: KeychainOptions
    @OptionGroup var output: JSONOutputOptions
    @Argument(help: "The next key's id (16 lowercase hex digits, as `sender rotate --stage` and `sender list` print it).",
              transform: KeyIDArgument.parse)
    var keyID: KeyIDArgument
    @Flag(help: "Activate even a key whose record was never exported (devices that do not trust it answer untrustedSender).")
    var force = false
    @Option(parsing: .unconditional, help: ArgumentHelp(
        "How long the previous key stays listed as retired before `prune` destroys it.", valueName: "DURATION"))
    var grace = DurationArgument(milliseconds: 7 * 86_400_000)

    func run() throws {
        let ring = try Lifecycle<SenderKeys>.ring(store, create: false)
        let before = try keychain(store, role: .sender) { () throws(KeychainError) in try ring.list() }
        let previous = before.first { $0.state == .active }?.keyID
        let activated: KeyInfo
        do { activated = try ring.activate(keyID: keyID.keyID, force: force, grace: grace.duration) } catch .itemNotFound {
            throw unknownKey(keyID.keyID, directory: store.directory.path, role: .sender)
        } catch { throw cliError(error, directory: store.directory.path, role: .sender) }
        let after = try keychain(store, role: .sender) { () throws(KeychainError) in try ring.list() }
        KeyOutput.printInfos([activated] + after.filter { $0.keyID == previous }, json: output.json)
    }
}
