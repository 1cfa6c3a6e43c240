import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushCrypto
package import SealedPushKeychain
package import SealedPushWire

/// What differs between the `keys` and `sender` command groups: the kind of key and the words.
protocol LifecycleKind {
    /// Whose keys the group manages.
    static var role: StoreRole { get }
    /// The key pair kind the group's keyring holds.
    associatedtype Material: KeyringMaterial where Material.Record: JSONKeyRecord
    static var generateAbstract: String { get }
    static var rotateAbstract: String { get }
    static var rotateGraceHelp: String { get }
    static var exportAbstract: String { get }
    static var retireAbstract: String { get }
    static var retireGraceHelp: String { get }
    static var destroyDiscussion: String { get }
    static var destroyForceHelp: String { get }
}

/// A key record the lifecycle commands print as JSON.
protocol JSONKeyRecord {
    var jsonBytes: [UInt8] { get }
}

extension DeviceKeyRecord: JSONKeyRecord {}
extension SenderKeyRecord: JSONKeyRecord {}

/// The lifecycle subcommands of one keyring, generic over its kind: `Lifecycle<SenderKeys>` is
/// `sender …` (the `keys` group, two keyrings at once, is `DeviceKeyGroup`).
enum Lifecycle<Kind: LifecycleKind> {
    static var subcommands: [any ParsableCommand.Type] {
        [Generate.self, Rotate.self, List.self, Export.self, Retire.self, Destroy.self, Prune.self]
    }

    static func ring(_ options: KeychainOptions, create: Bool) throws -> Keyring<Kind.Material> {
        Keyring(store: try openStore(options, create: create, role: Kind.role))
    }

    struct Generate: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(commandName: "generate", abstract: Kind.generateAbstract,
                                 discussion: "Refuses when the store already has an active key (use `rotate`).")
        }
        @OptionGroup var store: KeychainOptions
        func run() throws {
            let ring = try Lifecycle.ring(store, create: true)
            KeyOutput.printRecord(try keychain(store, role: Kind.role) { () throws(KeychainError) in try ring.generate().jsonBytes })
        }
    }

    struct Rotate: ParsableCommand {
        static var configuration: CommandConfiguration { CommandConfiguration(commandName: "rotate", abstract: Kind.rotateAbstract) }
        @OptionGroup var store: KeychainOptions
        @Option(parsing: .unconditional, help: ArgumentHelp(Kind.rotateGraceHelp, valueName: "DURATION"))
        var grace = DurationArgument(milliseconds: 7 * 86_400_000)
        func run() throws {
            let ring = try Lifecycle.ring(store, create: false)
            KeyOutput.printRecord(try keychain(store, role: Kind.role) { () throws(KeychainError) in try ring.rotate(grace: grace.duration).jsonBytes })
        }
    }

    struct List: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(commandName: "list", abstract: "List keys: id, state, created, retire-by, destroyed-at (never a secret).")
        }
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws {
            let ring = try Lifecycle.ring(store, create: false)
            KeyOutput.printInfos(try keychain(store, role: Kind.role) { () throws(KeychainError) in try ring.list() }, json: output.json)
        }
    }

    struct Export: ParsableCommand {
        static var configuration: CommandConfiguration { CommandConfiguration(commandName: "export", abstract: Kind.exportAbstract) }
        @OptionGroup var store: KeychainOptions
        @Option(name: .customLong("key-id"), help: "A usable key to export instead of the active one.")
        var keyID: KeyIDArgument?
        func run() throws {
            let ring = try Lifecycle.ring(store, create: false)
            KeyOutput.printRecord(try keychain(store, role: Kind.role) { () throws(KeychainError) in try ring.export(keyID: keyID?.keyID).jsonBytes })
        }
    }

    struct Retire: ParsableCommand {
        static var configuration: CommandConfiguration { CommandConfiguration(commandName: "retire", abstract: Kind.retireAbstract) }
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to retire (16 lowercase hex digits).", transform: KeyIDArgument.parse) var keyID: KeyIDArgument
        @Option(parsing: .unconditional, help: ArgumentHelp(Kind.retireGraceHelp, valueName: "DURATION")) var grace = DurationArgument(milliseconds: 0)
        func run() throws {
            let ring = try Lifecycle.ring(store, create: false)
            let info: KeyInfo
            do { info = try ring.retire(keyID: keyID.keyID, grace: grace.duration) } catch .activeKeyRefused {
                throw CLIError("key \(keyID.keyID.hex) is the active \(Kind.role.noun) and cannot be retired directly: "
                               + "`sealedpush \(Kind.role.group) rotate --keychain \(store.directory.path)` makes a new active key and retires it")
            } catch .itemNotFound {
                throw unknownKey(keyID.keyID, directory: store.directory.path, role: Kind.role)
            } catch { throw cliError(error, directory: store.directory.path, role: Kind.role) }
            KeyOutput.printInfos([info], json: output.json)
        }
    }

    struct Destroy: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(
                commandName: "destroy",
                abstract: "Destroy a key now: its secret is wiped and its item deleted; a tombstone stays for the audit trail.",
                discussion: Kind.destroyDiscussion)
        }
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Argument(help: "The key id to destroy (16 lowercase hex digits).", transform: KeyIDArgument.parse) var keyID: KeyIDArgument
        @Flag(help: ArgumentHelp(Kind.destroyForceHelp)) var force = false
        func run() throws {
            let ring = try Lifecycle.ring(store, create: false)
            let info: KeyInfo?
            do { info = try ring.destroy(keyID: keyID.keyID, force: force) } catch .activeKeyRefused {
                throw CLIError("key \(keyID.keyID.hex) is the active \(Kind.role.noun): destroying it would leave none to use; run "
                               + "`sealedpush \(Kind.role.group) rotate --keychain \(store.directory.path)` first, or pass --force")
            } catch .itemNotFound {
                throw unknownKey(keyID.keyID, directory: store.directory.path, role: Kind.role)
            } catch { throw cliError(error, directory: store.directory.path, role: Kind.role) }
            KeyOutput.printInfos(info.map { [$0] } ?? [], json: output.json)
        }
    }

    struct Prune: ParsableCommand {
        static var configuration: CommandConfiguration {
            CommandConfiguration(commandName: "prune", abstract: "Destroy every retired key past its deadline (run it on a timer).")
        }
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws {
            let ring = try Lifecycle.ring(store, create: false)
            KeyOutput.printInfos(try keychain(store, role: Kind.role) { () throws(KeychainError) in try ring.prune() }, json: output.json)
        }
    }
}

/// Parses a 16-hex-digit key id argument.
struct KeyIDArgument: ExpressibleByArgument {
    let keyID: KeyID
    init?(argument: String) {
        guard let id = KeyID(hex: argument) else { return nil }
        keyID = id
    }
    static var defaultValueDescription: String { "16 lowercase hex digits" }

    /// The `transform` of key id arguments: says what a key id looks like when `text` is not one.
    static func parse(_ text: String) throws -> KeyIDArgument {
        guard let parsed = KeyIDArgument(argument: text) else {
            throw ValidationError("'\(text)' is not a key id: a key id is 16 lowercase hex digits, as `list` prints them")
        }
        return parsed
    }
}

/// Output of the lifecycle commands.
package enum KeyOutput {
    static func printRecord(_ bytes: [UInt8]) {
        print(String(decoding: bytes, as: UTF8.self))
    }

    static func json(_ info: KeyInfo) -> JSONValue {
        .object(JSONObject([
            ("key_id", .string(info.keyID.hex)), ("state", .string(info.state.rawValue)),
            ("created_at", .string(Timestamp.format(info.createdAt))),
            ("retire_after", info.retireAfter.map { .string(Timestamp.format($0)) } ?? .null),
            ("destroyed_at", info.destroyedAt.map { .string(Timestamp.format($0)) } ?? .null),
        ]))
    }

    package static func printInfos(_ infos: [KeyInfo], json: Bool) {
        if json {
            print(String(decoding: JSON.serialize(.array(infos.map(Self.json))), as: UTF8.self))
            return
        }
        let header = ["KEY ID", "STATE", "CREATED", "RETIRE BY", "DESTROYED"]
        let rows = infos.map { info in
            [info.keyID.hex, info.state.rawValue, Timestamp.format(info.createdAt),
             info.retireAfter.map(Timestamp.format) ?? "-", info.destroyedAt.map(Timestamp.format) ?? "-"]
        }
        print(table(header: header, rows: rows))
    }

    /// One listed key of a device, with its kind, as `keys list --json` prints it: `key_id`, `kind`
    /// (`device` or `reveal`), then the members of `json(_:)`.
    static func json(_ kind: DeviceKeyKind, _ info: KeyInfo) -> JSONValue {
        guard case let .object(o) = json(info) else { return json(info) }
        var out = JSONObject([("key_id", .string(info.keyID.hex)), ("kind", .string(kind.rawValue))])
        for (name, value) in o where name != "key_id" { out[name] = value }
        return .object(out)
    }

    /// Prints a device's keys of both kinds (`keys list`, `retire`, `destroy`, `prune`): a table with a
    /// KIND column, or with `json` an array of `json(_:_:)` objects.
    package static func printListings(_ listings: [DeviceKeyListing], json: Bool) {
        printListings(listings.map { ($0.kind, $0.info) }, json: json)
    }

    /// Prints `(kind, info)` pairs as `printListings(_:json:)` does.
    static func printListings(_ listings: [(DeviceKeyKind, KeyInfo)], json: Bool) {
        if json {
            print(String(decoding: JSON.serialize(.array(listings.map { Self.json($0.0, $0.1) })), as: UTF8.self))
            return
        }
        let header = ["KEY ID", "KIND", "STATE", "CREATED", "RETIRE BY", "DESTROYED"]
        let rows = listings.map { kind, info in
            [info.keyID.hex, kind.rawValue, info.state.rawValue, Timestamp.format(info.createdAt),
             info.retireAfter.map(Timestamp.format) ?? "-", info.destroyedAt.map(Timestamp.format) ?? "-"]
        }
        print(table(header: header, rows: rows))
    }

    static func table(header: [String], rows: [[String]]) -> String {
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            var text = cells.enumerated().map { $0.element + String(repeating: " ", count: max(0, widths[$0.offset] - $0.element.count)) }
                .joined(separator: "  ")
            while text.last == " " { text.removeLast() }
            return text
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n")
    }
}

/// Whose keys a store holds: the command group whose `generate` makes its first key, for advice.
package enum StoreRole {
    case device, sender

    /// `keys` or `sender`.
    var group: String { self == .device ? "keys" : "sender" }
    /// `device key` or `signing key`.
    var noun: String { self == .device ? "device key" : "signing key" }
}

/// A keychain error in the CLI's terms: the commands and flags that fix it, the store directory named.
func cliError(_ error: KeychainError, directory: String, role: StoreRole) -> CLIError {
    switch error {
    case .storeNotFound:
        return CLIError("no key store at \(directory): create one with `sealedpush \(role.group) generate --keychain \(directory)`")
    case .noActiveKey:
        return CLIError("the store at \(directory) has no active \(role.noun): create one with "
                        + "`sealedpush \(role.group) generate --keychain \(directory)`")
    case let .nextKeyExists(keyID):
        return CLIError("\(role.noun) \(keyID) is already staged as the next key: export it with "
                        + "`sealedpush \(role.group) export --key-id \(keyID) --keychain \(directory)` and activate it with "
                        + "`sealedpush \(role.group) activate \(keyID) --keychain \(directory)`, or drop it with "
                        + "`sealedpush \(role.group) retire \(keyID) --keychain \(directory)`")
    case let .notNextKey(keyID, state) where state == KeyState.active.rawValue:
        return CLIError("key \(keyID) is already the active \(role.noun): nothing to activate "
                        + "(`sealedpush \(role.group) rotate --stage --keychain \(directory)` stages a new one)")
    case let .notNextKey(keyID, state):
        return CLIError("key \(keyID) is \(state), not the staged next key: stage one with "
                        + "`sealedpush \(role.group) rotate --stage --keychain \(directory)` and activate the id it prints "
                        + "(see `sealedpush \(role.group) list --keychain \(directory)`)")
    case let .nextKeyNotExported(keyID):
        return CLIError("next \(role.noun) \(keyID) was never exported, so no device trusts it yet: run "
                        + "`sealedpush \(role.group) export --key-id \(keyID) --keychain \(directory) > sender-next.json`, "
                        + "have every device run `sealedpush trust add sender-next.json`, then activate it; "
                        + "--force activates it anyway (devices that do not trust it answer untrustedSender)")
    default:
        return CLIError(error.description)
    }
}

/// A key id the store has never held, in the CLI's terms.
func unknownKey(_ keyID: KeyID, directory: String, role: StoreRole) -> CLIError {
    CLIError("no \(role.noun) \(keyID.hex) in \(directory) (see `sealedpush \(role.group) list --keychain \(directory)`)")
}

/// A key record refusal in the CLI's terms: what was wrong, and for a file that is not a record at
/// all, the command whose output it should be (`keys export` or `sender export`).
func recordAdvice(_ error: KeyRecordError, export command: String) -> String {
    guard case .notJSON = error else { return error.description }
    return error.description + " — the file `sealedpush \(command)` prints"
}

/// Opens a keychain directory as a store, turning keychain errors into CLI errors.
package func openStore(_ options: KeychainOptions, create: Bool, role: StoreRole = .device,
               clock: WallClock = .system) throws -> KeychainStore {
    do { return try KeychainStore(url: options.directory, create: create, clock: clock) } catch {
        throw cliError(error, directory: options.directory.path, role: role)
    }
}

/// Runs a keychain operation on the store in `options`, turning its typed error into a CLI error.
func keychain<R>(_ options: KeychainOptions, role: StoreRole = .device, _ body: () throws(KeychainError) -> R) throws -> R {
    do { return try body() } catch { throw cliError(error, directory: options.directory.path, role: role) }
}

/// Runs a keychain operation, turning its typed error into a CLI error (message already says what to do).
func keychain<R>(_ body: () throws(KeychainError) -> R) throws -> R {
    try body()
}

