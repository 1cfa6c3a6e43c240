import ArgumentParser
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire

/// `sealedpush keys`: the device's X25519 keys (device key and reveal key, reveal v1 §1) and their lifecycle.
struct KeysCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keys",
        abstract: "Manage the device's keys: generate, add-reveal, rotate, list, export, retire, destroy, prune.",
        discussion: """
            A device has a device key (every message is sealed to it; readable after the first unlock) and, \
            unless generated with --no-reveal, a reveal key (reveal messages' text is sealed to it; readable \
            only while the phone is unlocked). Each kind has exactly one active key and its own lifecycle: \
            `rotate` makes a new device key, `rotate --reveal` a new reveal key; a rotated-out key is retired: \
            it still opens messages until its deadline, then `prune` destroys it (secret wiped, a tombstone \
            kept). Give the server the record that `generate`, `add-reveal`, `rotate` or `export` prints \
            (the device key's, with the reveal key in its `reveal` member).
            """,
        subcommands: [
            DeviceKeyGroup.Generate.self, DeviceKeyGroup.AddReveal.self, DeviceKeyGroup.Rotate.self, DeviceKeyGroup.List.self,
            DeviceKeyGroup.Export.self, DeviceKeyGroup.Retire.self, DeviceKeyGroup.Destroy.self, DeviceKeyGroup.Prune.self,
        ]
    )
}

/// The `keys` group's subcommands, over the library's `DeviceKeys` (both keyrings of the device).
///
/// Named apart from the library's `SealedPushKeychain.DeviceKeys`, which the commands use.
enum DeviceKeyGroup {
    /// Both keyrings of the store in `options`.
    static func keys(_ options: KeychainOptions, create: Bool) throws -> DeviceKeys {
        DeviceKeys(store: try openStore(options, create: create, role: .device))
    }

    /// Runs a keys operation, mapping its error in the CLI's terms for a key of `kind`.
    static func run<R>(_ options: KeychainOptions, kind: DeviceKeyKind, _ operation: KeysOperation, keyID: KeyID? = nil,
                       _ body: () throws(KeychainError) -> R) throws -> R {
        do { return try body() } catch {
            throw CLIErrors.keys(error, kind: kind, operation: operation, directory: options.directory.path, keyID: keyID)
        }
    }

    /// Which keyring holds `keyID`: the reveal keyring when it lists it, else the device keyring.
    static func kind(of keyID: KeyID, in keys: DeviceKeys, options: KeychainOptions) throws -> DeviceKeyKind {
        let revealIDs = try run(options, kind: .reveal, .list) { () throws(KeychainError) in try keys.reveal.list().map(\.keyID) }
        return revealIDs.contains(keyID) ? .reveal : .device
    }

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "generate",
            abstract: "Create the device's first device key and reveal key; print the device key record.",
            discussion: """
                The record carries the reveal key in its `reveal` member (reveal messages need it). The reveal key \
                is kept whenUnlockedThisDeviceOnly, so the phone must be unlocked (`sealedpush device unlock`). \
                Refuses when the store already has an active key (use `rotate`, or `add-reveal` for a device \
                without a reveal key).
                """)
        @OptionGroup var store: KeychainOptions
        @Flag(name: .customLong("no-reveal"), help: "Make only the device key (the device cannot receive reveal messages until `keys add-reveal`).")
        var noReveal = false
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: true)
            let record = try DeviceKeyGroup.run(store, kind: noReveal ? .device : .reveal, .generate) { () throws(KeychainError) in
                try keys.generate(reveal: !noReveal)
            }
            KeyOutput.printRecord(record.jsonBytes)
        }
    }

    struct AddReveal: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "add-reveal",
            abstract: "Give a device without a reveal key one (generated with --no-reveal, or its reveal key destroyed); print the new record.",
            discussion: "The phone must be unlocked. Register the printed record with the server again.")
        @OptionGroup var store: KeychainOptions
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            let record = try DeviceKeyGroup.run(store, kind: .reveal, .addReveal) { () throws(KeychainError) in try keys.addReveal() }
            KeyOutput.printRecord(record.jsonBytes)
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate",
            abstract: "Make a new active device key (with --reveal: reveal key); the old one stays usable for the grace period. Prints the new record.",
            discussion: """
                The other kind of key is unchanged. A retired reveal key keeps opening reveal messages still \
                waiting in Notification Center until its grace ends. Rotating the reveal key needs the phone unlocked.
                """)
        @OptionGroup var store: KeychainOptions
        @Flag(help: "Rotate the reveal key instead of the device key.")
        var reveal = false
        @Option(parsing: .unconditional, help: ArgumentHelp(
            "How long the previous key keeps opening messages (cover APNs storage time, Notification Center and clock skew).",
            valueName: "DURATION"))
        var grace = DurationArgument(milliseconds: 7 * 86_400_000)
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            let record = try DeviceKeyGroup.run(store, kind: reveal ? .reveal : .device, .rotate) { () throws(KeychainError) -> DeviceKeyRecord in
                if reveal { return try keys.rotateReveal(grace: grace.duration) }
                return try keys.rotateDevice(grace: grace.duration)
            }
            KeyOutput.printRecord(record.jsonBytes)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List keys of both kinds: id, kind (device or reveal), state, created, retire-by, destroyed-at (never a secret).")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            KeyOutput.printListings(try DeviceKeyGroup.run(store, kind: .device, .list) { () throws(KeychainError) in try keys.list() }, json: output.json)
        }
    }

    struct Export: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "export",
            abstract: "Print the device key record: the active device key (or a named usable one) with the active reveal key in `reveal`.")
        @OptionGroup var store: KeychainOptions
        @Option(name: .customLong("key-id"), help: "A usable device key to export instead of the active one.")
        var keyID: KeyIDArgument?
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            let record: DeviceKeyRecord
            if let keyID {
                if try DeviceKeyGroup.kind(of: keyID.keyID, in: keys, options: store) == .reveal {
                    throw CLIError("key \(keyID.keyID.hex) is a reveal key: `export --key-id` names a device key; the record's `reveal` member is "
                                   + "always the active reveal key (`sealedpush keys export --keychain \(store.directory.path)`)")
                }
                record = try DeviceKeyGroup.run(store, kind: .device, .export) { () throws(KeychainError) -> DeviceKeyRecord in
                    let current = try keys.export()
                    return try keys.device.export(keyID: keyID.keyID).withReveal(current.reveal)
                }
            } else {
                record = try DeviceKeyGroup.run(store, kind: .device, .export) { () throws(KeychainError) in try keys.export() }
            }
            KeyOutput.printRecord(record.jsonBytes)
        }
    }

    struct Retire: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retire",
            abstract: "Retire a device or reveal key: it opens messages until now + grace, then `prune` destroys it.")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to retire (16 lowercase hex digits), of either kind.", transform: KeyIDArgument.parse)
        var keyID: KeyIDArgument
        @Option(parsing: .unconditional, help: ArgumentHelp("How long it keeps opening messages.", valueName: "DURATION"))
        var grace = DurationArgument(milliseconds: 0)
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            let kind = try DeviceKeyGroup.kind(of: keyID.keyID, in: keys, options: store)
            let info = try DeviceKeyGroup.run(store, kind: kind, .retire, keyID: keyID.keyID) { () throws(KeychainError) -> KeyInfo in
                if kind == .reveal { return try keys.reveal.retire(keyID: keyID.keyID, grace: grace.duration) }
                return try keys.device.retire(keyID: keyID.keyID, grace: grace.duration)
            }
            KeyOutput.printListings([(kind, info)], json: output.json)
        }
    }

    struct Destroy: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "destroy",
            abstract: "Destroy a device or reveal key now: its secret is wiped and its item deleted; a tombstone stays for the audit trail.",
            discussion: """
                Messages still sealed to it can never be opened. Refuses the active key of either kind unless --force \
                (a device whose reveal key is destroyed gets a new one with `keys add-reveal`).
                """)
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to destroy (16 lowercase hex digits), of either kind.", transform: KeyIDArgument.parse)
        var keyID: KeyIDArgument
        @Flag(help: "Destroy even the active key (the device then has none of that kind until `generate` or `add-reveal`).")
        var force = false
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            let kind = try DeviceKeyGroup.kind(of: keyID.keyID, in: keys, options: store)
            let info = try DeviceKeyGroup.run(store, kind: kind, .destroy, keyID: keyID.keyID) { () throws(KeychainError) -> KeyInfo? in
                if kind == .reveal { return try keys.reveal.destroy(keyID: keyID.keyID, force: force) }
                return try keys.device.destroy(keyID: keyID.keyID, force: force)
            }
            KeyOutput.printListings(info.map { [(kind, $0)] } ?? [], json: output.json)
        }
    }

    struct Prune: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "prune",
            abstract: "Destroy every retired device and reveal key past its deadline (run it on a timer).")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws {
            let keys = try DeviceKeyGroup.keys(store, create: false)
            KeyOutput.printListings(try DeviceKeyGroup.run(store, kind: .device, .prune) { () throws(KeychainError) in try keys.prune() }, json: output.json)
        }
    }
}
