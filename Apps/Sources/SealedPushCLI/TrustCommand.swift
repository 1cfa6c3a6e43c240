import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire

/// `sealedpush trust`: which sender keys the device accepts signatures from, and whether it requires them.
struct TrustCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "trust",
        abstract: "Manage the device's trusted sender keys and its signature policy.",
        subcommands: [Add.self, List.self, Remove.self, RequireSignature.self]
    )

    static func trustStore(_ options: KeychainOptions, create: Bool) throws -> TrustStore {
        TrustStore(store: try openStore(options, create: create))
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Trust a sender key record (the JSON `sealedpush sender export` prints).",
            discussion: "After the server rotates its sender key, add the new record and keep the old one until messages signed with it have been delivered.")
        @OptionGroup var store: KeychainOptions
        @Argument(help: ArgumentHelp("The sender key record file, or - for standard input.", valueName: "RECORD.json"))
        var record: String
        func run() throws {
            let bytes = try readInput(record, limit: 64 << 10, what: "the sender key record")
            let parsed: SenderKeyRecord
            do { parsed = try SenderKeyRecord(jsonBytes: bytes) } catch { throw CLIError(recordAdvice(error, export: "sender export")) }
            let trust = try TrustCommand.trustStore(store, create: false)
            let added = try keychain { () throws(KeychainError) in try trust.add(parsed) }
            print(added ? "trusted sender key \(parsed.keyID.hex)" : "sender key \(parsed.keyID.hex) was already trusted")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List trusted sender keys and the signature policy.")
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws {
            let trust = try TrustCommand.trustStore(store, create: false)
            let records = try keychain { () throws(KeychainError) in try trust.list() }
            let required = try keychain { () throws(KeychainError) in try trust.requireSignature() }
            if output.json {
                let o = JSONObject([("require_signature", .bool(required)), ("trusted", .array(records.map { .object($0.jsonObject) }))])
                print(String(decoding: JSON.serialize(.object(o)), as: UTF8.self))
                return
            }
            print("require signature: \(required ? "on" : "off")")
            print(KeyOutput.table(header: ["SENDER KEY ID", "PUBLIC KEY"],
                                  rows: records.map { [$0.keyID.hex, Base64.encode($0.publicKey.bytes)] }))
        }
    }

    struct Remove: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop trusting a sender key.")
        @OptionGroup var store: KeychainOptions
        @Argument(help: "The sender key id (16 lowercase hex digits).", transform: KeyIDArgument.parse) var keyID: KeyIDArgument
        func run() throws {
            let trust = try TrustCommand.trustStore(store, create: false)
            do { try trust.remove(keyID.keyID) } catch .itemNotFound {
                throw CLIError("no trusted sender key \(keyID.keyID.hex) (see `sealedpush trust list --keychain \(store.directory.path)`)")
            } catch { throw cliError(error, directory: store.directory.path, role: .device) }
            print("removed sender key \(keyID.keyID.hex)")
        }
    }

    struct RequireSignature: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "require-signature", abstract: "Turn the signature requirement on or off (unsigned messages then fall back with signatureRequired).")
        enum Setting: String, ExpressibleByArgument, CaseIterable { case on, off }
        @OptionGroup var store: KeychainOptions
        @Argument(help: "on or off") var setting: Setting
        func run() throws {
            let trust = try TrustCommand.trustStore(store, create: false)
            try keychain { () throws(KeychainError) in try trust.setRequireSignature(setting == .on) }
            print("require signature: \(setting.rawValue)")
        }
    }
}
