import ArgumentParser
import Foundation
import Logging
import SealedPushKeychain
import SealedPushReceiver
import SealedPushWire

/// `sealedpush device`: the simulated iPhone — its lock state, and push delivery to the extension.
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Simulate the device: deliver payloads to the notification service extension, change its lock state.",
        subcommands: [Push.self, Reboot.self, Unlock.self, Lock.self, Status.self]
    )

    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliver an APNs payload file to the service extension, as `xcrun simctl push` does.",
            discussion: """
                Applies iOS's rules: payloads that are not a JSON object with an `aps` object, or over 4096
                bytes, are rejected (exit status 1); the extension runs only for `mutable-content: 1` with a
                visible alert; it gets --time-limit, then `serviceExtensionTimeWillExpire()`, then the
                original content is shown. Prints the notification as shown, or with --json one object:
                {"outcome": "decrypted|fallback|timeout|original|suppressed|rejected", "reason": CODE|null,
                 "notification": {title, subtitle, body, threadIdentifier, categoryIdentifier, badge, sound,
                 userInfo}|null} (absent text fields are "", absent badge and sound null).

                Example: sealedpush seal --to device.json --title Hi --body Secret | sealedpush device push -
                """)

        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Option(name: .customLong("time-limit"), parsing: .unconditional, help: "The extension's time budget.")
        var timeLimit = DurationArgument(milliseconds: 30_000)
        @Option(parsing: .unconditional, help: ArgumentHelp("The device clock: ISO 8601 (2026-11-21T12:00:00Z) or Unix seconds.", valueName: "TIME"))
        var clock: DeviceClock?
        @Option(name: .customLong("extension-delay"), parsing: .unconditional, help: "The extension stalls this long before it starts work.")
        var extensionDelay = DurationArgument(milliseconds: 0)
        @Flag(name: .customLong("extension-crash"), help: "The extension dies without the expiry callback.")
        var extensionCrash = false
        @Flag(help: "The app has the notification filtering entitlement (empty content is not shown at all).")
        var filtering = false
        @Option(name: .customLong("expiry-grace"), parsing: .unconditional, help: "How long the device waits after the expiry callback.")
        var expiryGrace = DurationArgument(milliseconds: 1000)
        @Argument(help: ArgumentHelp("The APNs payload file, or - for standard input.", valueName: "PAYLOAD_FILE|-"))
        var payload: String

        func run() async throws {
            let bytes = try readInput(payload, limit: 16 << 20, what: "the payload")
            let now: @Sendable () -> Date = { [clock] in clock?.date ?? Date() }
            let storeValue = try openStore(store, create: false, now: now)
            let result = await DeviceRun.deliver(bytes, store: storeValue, now: now, options: .init(
                timeLimit: timeLimit.duration, expiryGrace: expiryGrace.duration, extensionCrash: extensionCrash,
                filtering: filtering), startDelay: extensionDelay.duration)
            if output.json {
                print(String(decoding: JSON.serialize(.object(result.jsonObject)), as: UTF8.self))
            } else {
                print(Banner.render(result, style: .detect()))
            }
            if result.isRejection { throw ExitCode(1) }
        }
    }

    struct Reboot: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restart the device: it is locked and before first unlock (afterFirstUnlock items become unreadable).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try DeviceRun.setState(store) { (s: KeychainStore) throws(KeychainError) in try s.reboot() } }
    }

    struct Unlock: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Unlock the device (every item becomes readable).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try DeviceRun.setState(store) { (s: KeychainStore) throws(KeychainError) in try s.unlock() } }
    }

    struct Lock: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Lock the device (whenUnlocked items become unreadable; afterFirstUnlock items stay readable after a first unlock).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try DeviceRun.setState(store) { (s: KeychainStore) throws(KeychainError) in try s.lock() } }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the device's lock state.")
        @OptionGroup var store: KeychainOptions
        func run() throws {
            let s = try openStore(store, create: false)
            print(try keychain { () throws(KeychainError) in try s.deviceLockState() }.rawValue)
        }
    }
}

/// The device clock given on the command line.
struct DeviceClock: ExpressibleByArgument, Sendable {
    let date: Date
    init?(argument: String) {
        if let seconds = Int64(argument), seconds >= 0, seconds < 253_402_300_800 {
            date = Date(timeIntervalSince1970: TimeInterval(seconds))
        } else if let parsed = Timestamp.parse(argument) {
            date = parsed
        } else {
            return nil
        }
    }
    static var defaultValueDescription: String { "ISO 8601 like 2026-11-21T12:00:00Z, or Unix seconds" }
}

/// The device side, shared by `device push` and the demo.
enum DeviceRun {
    static func setState(_ options: KeychainOptions, _ change: (KeychainStore) throws(KeychainError) -> DeviceLockState) throws {
        let s = try openStore(options, create: false)
        let state = try keychain { () throws(KeychainError) in try change(s) }
        print("device is now \(state.rawValue)")
    }

    /// Delivers `bytes` to a `SecretMessageExtension` reading keys, trust and the replay cache from `store`.
    static func deliver(_ bytes: [UInt8], store: KeychainStore, now: @escaping @Sendable () -> Date,
                        options: DeviceSimulator.Options, startDelay: Duration = .zero,
                        logger: Logger = Logger(label: "sealedpush.extension")) async -> DeliveryResult {
        // One delivery per process: a cache (CachedDeviceKeyring) would never be hit here.
        let keys = DeviceKeyring(store: store)
        let trust = TrustStore(store: store)
        let replay = ReplayCache(store: store)
        let configuration = SecretMessageExtension.Configuration(
            keys: keys,
            policy: { () throws(OpenFailure) -> ReceiverPolicy in
                do { return try trust.receiverPolicy() } catch {
                    throw OpenFailure(.keychainLocked, "the trust settings cannot be read: \(error)")
                }
            },
            replayGuard: replay,
            now: { Int64(now().timeIntervalSince1970.rounded(.down)) },
            startDelay: startDelay, logger: logger)
        return await DeviceSimulator(options: options) { SecretMessageExtension(configuration: configuration) }.deliver(payload: bytes)
    }
}
