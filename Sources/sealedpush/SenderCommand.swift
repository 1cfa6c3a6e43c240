import ArgumentParser
import Foundation
import SealedPushKeychain
import SealedPushWire

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
        subcommands: [Generate.self, Rotate.self, List.self, Export.self, Retire.self, Destroy.self, Prune.self]
    )

    static func ring(_ options: KeychainOptions, create: Bool) throws -> SenderKeyring {
        SenderKeyring(store: try openStore(options, create: create))
    }

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the server's first active signing key and print its sender key record.",
            discussion: "Refuses when the store already has an active key (use `rotate`).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try LifecycleRun.generate(try SenderCommand.ring(store, create: true)) }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new active signing key; the old one is retired for the grace period. Prints the new record.")
        @OptionGroup var store: KeychainOptions
        @Option(parsing: .unconditional, help: "How long the previous key stays listed as retired before `prune` destroys it.")
        var grace = DurationArgument(milliseconds: 7 * 86_400_000)
        func run() throws { try LifecycleRun.rotate(try SenderCommand.ring(store, create: false), grace: grace) }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys: id, state, created, retire-by, destroyed-at (never a secret).")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws { try LifecycleRun.list(try SenderCommand.ring(store, create: false), json: output.json) }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the sender key record of the active key, or of a named usable key.")
        @OptionGroup var store: KeychainOptions
        @Option(name: .customLong("key-id"), help: "A usable key to export instead of the active one.")
        var keyID: KeyIDArgument?
        func run() throws { try LifecycleRun.export(try SenderCommand.ring(store, create: false), keyID: keyID) }
    }

    struct Retire: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Retire a signing key until now + grace, then `prune` destroys it.")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to retire.") var keyID: KeyIDArgument
        @Option(parsing: .unconditional, help: "How long it stays retired before pruning.") var grace = DurationArgument(milliseconds: 0)
        func run() throws {
            try LifecycleRun.retire(try SenderCommand.ring(store, create: false), keyID: keyID, grace: grace, json: output.json)
        }
    }

    struct Destroy: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Destroy a key now: its secret is wiped and its item deleted; a tombstone stays for the audit trail.",
            discussion: "Refuses the active key unless --force.")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to destroy.") var keyID: KeyIDArgument
        @Flag(help: "Destroy even the active key (nothing can be signed until `generate`).") var force = false
        func run() throws {
            try LifecycleRun.destroy(try SenderCommand.ring(store, create: false), keyID: keyID, force: force, json: output.json)
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Destroy every retired key past its deadline (run it on a timer).")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws { try LifecycleRun.prune(try SenderCommand.ring(store, create: false), json: output.json) }
    }
}

