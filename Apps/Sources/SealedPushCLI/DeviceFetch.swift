import ArgumentParser
import SealedPushDevice
import SealedPushKeychain
import SealedPushReceiver
import SealedPushWire

extension DeviceCommand {
    /// `sealedpush device fetch`: the app's launch in mailbox mode (mailbox v1 §5 "Later" and §7).
    struct Fetch: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch the mailbox messages this device's notifications still hold handles for, then ask for the list of those it never saw.",
            discussion: """
                As the app does on launch and in background refresh (mailbox v1 §5): each stored notification that \
                still holds a SEALEDPUSH_FETCH handle (it arrived before the first unlock, or its fetch failed) is \
                fetched from the mailbox URL (`device config --mailbox-url`) and replaced under its request id with \
                the message (under the preview policy), `(Deleted)` when the sender retracted it, or `(Encrypted)` \
                without the handle when it is gone; a fetch that fails leaves it for next time. Then, when \
                `device config --mailbox-app APP --mailbox-device ID` are set, the device proves it holds its key \
                (a challenge sealed to it) and asks for the list of its waiting messages (mailbox v1 §7): each one \
                never shown before (APNs keeps only the last push for a phone that is off) is fetched and shown, \
                once, under the request id `mailbox-<delivery id>`. `device unlock` does the same.

                Prints what was done; with --json one object: {"kept": {"replaced", "retracted", "failed", \
                "remaining"}, "listed": true|false, "list_failure": TEXT|null, "recovered": N, "already_shown": N, \
                "failed": N, "handles_waiting": N}. Exit status 1 when no mailbox URL is set, the device has not \
                been unlocked since it started, or the list was asked for and could not be had.
                """)
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            logging.apply(default: output.json ? .error : .notice)
            let s = try openStore(store, create: false)
            if try keychain({ () throws(KeychainError) in try s.deviceLockState() }) == .beforeFirstUnlock {
                throw CLIError("the device has not been unlocked since it started: its key cannot be read, so nothing is fetched "
                               + "(the messages wait at the gateway); run `sealedpush device unlock`, which fetches them")
            }
            try await DeviceFetching.run(s, onlyWhenConfigured: false, json: output.json)
        }
    }
}

/// The mailbox pass `device fetch` and `device unlock` share.
enum DeviceFetching {
    /// Fetches the kept handles and asks for the list; `onlyWhenConfigured`: a device without a mailbox URL does
    /// nothing (`device unlock`), else it is an error (`device fetch`).
    static func run(_ s: KeychainStore, onlyWhenConfigured: Bool, json: Bool = false) async throws {
        let device = SimulatedDevice(store: s)
        let summary: MailboxProcessingSummary? = try await DeviceRun.withMailbox(s) { fetcher in
            guard let fetcher else { return nil }
            return await ReceiptsTransportCLI.with { transport in
                await device.processMailbox(fetcher: fetcher, lister: fetcher, receipts: device.receiptCourier(transport: transport))
            }
        }
        guard let summary else {
            if onlyWhenConfigured { return }
            throw CLIError("the device has no mailbox URL: set it with `sealedpush device config --mailbox-url URL` (the gateway's public_url)")
        }
        let waiting = try keychain { () throws(KeychainError) in try device.handlesWaiting() }
        if json {
            let kept = JSONObject([("replaced", .int(Int64(summary.kept.replaced))), ("retracted", .int(Int64(summary.kept.retracted))),
                                   ("failed", .int(Int64(summary.kept.failed))), ("remaining", .int(Int64(summary.kept.remaining)))])
            print(String(decoding: JSON.serialize(.object(JSONObject([
                ("kept", .object(kept)), ("listed", .bool(summary.listed)), ("list_failure", summary.listFailure.map { .string($0) } ?? .null),
                ("recovered", .int(Int64(summary.recovered))), ("already_shown", .int(Int64(summary.alreadyShown))),
                ("failed", .int(Int64(summary.failed))), ("handles_waiting", .int(Int64(waiting))),
            ]))), as: UTF8.self))
        } else {
            print("mailbox: \(summary.kept.replaced) fetched and shown, \(summary.kept.retracted) retracted, \(summary.kept.failed) gone or failed a check, "
                  + "\(summary.kept.remaining) still waiting")
            if summary.listed {
                if let failure = summary.listFailure {
                    print("list: not had (\(failure))")
                } else {
                    print("list: \(summary.recovered) never seen before, fetched and shown; \(summary.alreadyShown) already shown; \(summary.failed) failed")
                }
            }
        }
        if summary.listFailure != nil && !onlyWhenConfigured { throw ExitCode(1) }
    }
}
