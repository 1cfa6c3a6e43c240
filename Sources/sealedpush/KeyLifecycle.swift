import ArgumentParser
import Foundation
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire

/// What the `keys` and `sender` command groups need from a keyring; both keyrings conform below.
protocol LifecycleKeyring {
    /// `device key` or `sender key`, for messages.
    static var noun: String { get }
    func generateRecord() throws(KeychainError) -> [UInt8]
    func rotateRecord(grace: Duration) throws(KeychainError) -> [UInt8]
    func exportRecord(keyID: KeyID?) throws(KeychainError) -> [UInt8]
    func list() throws(KeychainError) -> [KeyInfo]
    func retire(keyID: KeyID, grace: Duration) throws(KeychainError) -> KeyInfo
    func destroy(keyID: KeyID, force: Bool) throws(KeychainError) -> KeyInfo?
    func prune() throws(KeychainError) -> [KeyInfo]
}

extension DeviceKeyring: LifecycleKeyring {
    static var noun: String { "device key" }
    func generateRecord() throws(KeychainError) -> [UInt8] { try generate().jsonBytes }
    func rotateRecord(grace: Duration) throws(KeychainError) -> [UInt8] { try rotate(grace: grace).jsonBytes }
    func exportRecord(keyID: KeyID?) throws(KeychainError) -> [UInt8] { try export(keyID: keyID).jsonBytes }
}

extension SenderKeyring: LifecycleKeyring {
    static var noun: String { "sender key" }
    func generateRecord() throws(KeychainError) -> [UInt8] { try generate().jsonBytes }
    func rotateRecord(grace: Duration) throws(KeychainError) -> [UInt8] { try rotate(grace: grace).jsonBytes }
    func exportRecord(keyID: KeyID?) throws(KeychainError) -> [UInt8] { try export(keyID: keyID).jsonBytes }
}

/// Parses a 16-hex-digit key id argument.
struct KeyIDArgument: ExpressibleByArgument {
    let keyID: KeyID
    init?(argument: String) {
        guard let id = KeyID(hex: argument) else { return nil }
        keyID = id
    }
    static var defaultValueDescription: String { "16 lowercase hex digits" }
}

/// Output of the lifecycle commands.
enum KeyOutput {
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

    static func printInfos(_ infos: [KeyInfo], json: Bool) {
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

    static func table(header: [String], rows: [[String]]) -> String {
        var widths = header.map(\.count)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { $0.element.padding(toLength: widths[$0.offset], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces)
        }
        return ([line(header)] + rows.map(line)).joined(separator: "\n")
    }
}

/// Opens a keychain directory as a store, turning keychain errors into CLI errors.
func openStore(_ options: KeychainOptions, create: Bool, now: @escaping @Sendable () -> Date = { Date() }) throws -> KeychainStore {
    do { return try KeychainStore(url: options.directory, create: create, now: now) } catch { throw CLIError(error.description) }
}

/// Runs a keychain operation, turning its typed error into a CLI error (message already says what to do).
func keychain<R>(_ body: () throws(KeychainError) -> R) throws -> R {
    do { return try body() } catch { throw CLIError(error.description) }
}

