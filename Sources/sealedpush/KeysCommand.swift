import ArgumentParser
import Foundation
import SealedPushKeychain
import SealedPushWire

/// `sealedpush keys`: the device's X25519 keys and their lifecycle.
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage the device's keys: generate, rotate, list, export, retire, destroy, prune.",
        discussion: """
            Exactly one key is active (senders seal to it). A rotated-out key is retired: it still opens
            messages until its deadline, then `prune` destroys it (secret wiped, a tombstone kept).
            Give the server the record that `generate`, `rotate` or `export` prints.
            """,
        subcommands: [Generate.self, Rotate.self, List.self, Export.self, Retire.self, Destroy.self, Prune.self]
    )

    static func ring(_ options: KeychainOptions, create: Bool) throws -> DeviceKeyring {
        DeviceKeyring(store: try openStore(options, create: create))
    }

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create the device's first active key and print its device key record.",
            discussion: "Refuses when the store already has an active key (use `rotate`).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try LifecycleRun.generate(try KeysCommand.ring(store, create: true)) }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make a new active key; the old one stays usable for the grace period. Prints the new record.")
        @OptionGroup var store: KeychainOptions
        @Option(parsing: .unconditional, help: "How long the previous key keeps opening messages (cover APNs storage time and clock skew).")
        var grace = DurationArgument(milliseconds: 7 * 86_400_000)
        func run() throws { try LifecycleRun.rotate(try KeysCommand.ring(store, create: false), grace: grace) }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys: id, state, created, retire-by, destroyed-at (never a secret).")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws { try LifecycleRun.list(try KeysCommand.ring(store, create: false), json: output.json) }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the device key record of the active key, or of a named usable key.")
        @OptionGroup var store: KeychainOptions
        @Option(name: .customLong("key-id"), help: "A usable key to export instead of the active one.")
        var keyID: KeyIDArgument?
        func run() throws { try LifecycleRun.export(try KeysCommand.ring(store, create: false), keyID: keyID) }
    }

    struct Retire: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Retire a key: it opens messages until now + grace, then `prune` destroys it.")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to retire.") var keyID: KeyIDArgument
        @Option(parsing: .unconditional, help: "How long it keeps opening messages.") var grace = DurationArgument(milliseconds: 0)
        func run() throws {
            try LifecycleRun.retire(try KeysCommand.ring(store, create: false), keyID: keyID, grace: grace, json: output.json)
        }
    }

    struct Destroy: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Destroy a key now: its secret is wiped and its item deleted; a tombstone stays for the audit trail.",
            discussion: "Messages still sealed to it can never be opened. Refuses the active key unless --force.")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to destroy.") var keyID: KeyIDArgument
        @Flag(help: "Destroy even the active key (the device then has none until `generate`).") var force = false
        func run() throws {
            try LifecycleRun.destroy(try KeysCommand.ring(store, create: false), keyID: keyID, force: force, json: output.json)
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Destroy every retired key past its deadline (run it on a timer).")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws { try LifecycleRun.prune(try KeysCommand.ring(store, create: false), json: output.json) }
    }
}

/// The bodies of the lifecycle subcommands, shared by `keys` and `sender`.
enum LifecycleRun {
    static func generate(_ ring: some LifecycleKeyring) throws {
        KeyOutput.printRecord(try keychain { () throws(KeychainError) in try ring.generateRecord() })
    }

    static func rotate(_ ring: some LifecycleKeyring, grace: DurationArgument) throws {
        KeyOutput.printRecord(try keychain { () throws(KeychainError) in try ring.rotateRecord(grace: grace.duration) })
    }

    static func list(_ ring: some LifecycleKeyring, json: Bool) throws {
        KeyOutput.printInfos(try keychain { () throws(KeychainError) in try ring.list() }, json: json)
    }

    static func export(_ ring: some LifecycleKeyring, keyID: KeyIDArgument?) throws {
        KeyOutput.printRecord(try keychain { () throws(KeychainError) in try ring.exportRecord(keyID: keyID?.keyID) })
    }

    static func retire(_ ring: some LifecycleKeyring, keyID: KeyIDArgument, grace: DurationArgument, json: Bool) throws {
        let info = try keychain { () throws(KeychainError) in try ring.retire(keyID: keyID.keyID, grace: grace.duration) }
        KeyOutput.printInfos([info], json: json)
    }

    static func destroy(_ ring: some LifecycleKeyring, keyID: KeyIDArgument, force: Bool, json: Bool) throws {
        let info = try keychain { () throws(KeychainError) in try ring.destroy(keyID: keyID.keyID, force: force) }
        KeyOutput.printInfos(info.map { [$0] } ?? [], json: json)
    }

    static func prune(_ ring: some LifecycleKeyring, json: Bool) throws {
        let destroyed = try keychain { () throws(KeychainError) in try ring.prune() }
        if json || !destroyed.isEmpty { KeyOutput.printInfos(destroyed, json: json) } else { print("nothing to prune") }
    }
}
