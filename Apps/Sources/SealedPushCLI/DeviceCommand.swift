import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
package import Logging
package import SealedPushKeychain
package import SealedPushDevice
package import SealedPushReceiver
package import SealedPushWire
import SealedPushSender
import NIOConcurrencyHelpers
package import SealedPushDeviceHTTP
import SealedPushWebPush

/// `sealedpush device`: the simulated iPhone — its lock state, and push delivery to the extension.
struct DeviceCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device",
        abstract: "Simulate the device: deliver payloads to the notification service extension, change its lock state.",
        subcommands: [Push.self, Subscribe.self, Notifications.self, Expand.self, Reboot.self, Unlock.self, Lock.self, Status.self, Config.self, Flush.self,
                      Fetch.self]
    )

    struct Push: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliver an APNs payload file to the service extension, as `xcrun simctl push` does (or a Web Push body to the browser).",
            discussion: """
                Applies iOS's rules: payloads that are not a JSON object with an `aps` object, or over 4096 \
                bytes, are rejected (exit status 1); the extension runs only for `mutable-content: 1` with a \
                visible alert; it gets --time-limit, then `serviceExtensionTimeWillExpire()`, then the \
                original content is shown. Prints the notification as shown, or with --json one object:

                  {"outcome": "decrypted|held|fallback|timeout|original|suppressed|rejected",
                   "reason": CODE|null,
                   "notification": {title, subtitle, body, threadIdentifier,
                                    categoryIdentifier, badge, sound, userInfo}|null}

                (absent text fields are "", absent badge and sound null), and "request_id": the notification \
                request identifier it arrived under. An opened message that asks for a \
                receipt adds "receipt": "sent"|"queued"; a fallback reported to the device's report URL \
                (`device config --report-url`) adds "report": "sent"|"queued"|"suppressed".

                A reveal message (`seal --reveal`) is `held`: iOS is handed only its placeholder (`Press and hold \
                to read`), kept in the notification store (`device notifications`); `device expand REQUEST_ID` \
                presses and holds it. The device's preview setting (`device config --previews`) applies to \
                ordinary messages.

                Replays: a message opened before is `replayed`, unless it arrives again under the same \
                request identifier (iOS takes it from `apns-collapse-id`, else `apns-id`): then it is the same \
                notification and opens again. --request-id sets it; without it each push draws a new one.

                For an opened message with attachments, each is fetched over https from a public address (with \
                --allow-local-media, also http to loopback and https to private addresses), verified, decrypted, \
                written 0600 under a temporary name and renamed when whole, into --attachments-dir (default: \
                $TMPDIR/sealedpush-attachments; 0700 and yours, or refused); --json adds notification.attachments [{identifier, type, \
                size, file}] and attachmentFailures [{identifier, reason}].

                A fallback's reason is logged on standard error at `notice` for a person reading it; with \
                --json nothing is logged unless --log-level asks. The output of `seal --headers` (or a \
                `seal --batch` output line) wraps the payload: it is refused with the member to pass instead.

                --platform webpush: PAYLOAD_FILE is an RFC 8291 body (aes128gcm, binary), as a push service \
                delivers it to a browser. The device decrypts it with the Web Push keys `device subscribe` made, reads \
                {"ENCRYPTED_DATA": "…", "sealedpush": 1} and opens the envelope as an iPhone does, with the browser's \
                placeholder (`Secret Message!` / `(Encrypted)`) for a message it cannot open. Browsers have no service \
                extension, so notMutable, noAlert, extensionCrashed and timeout do not occur, and --time-limit, \
                --extension-delay, --extension-crash, --expiry-grace and --filtering are refused; everything else \
                (decrypted, fallback with its reasons, replays, receipts, attachments, --request-id) is the same. A body \
                over 4096 bytes is rejected (payloadTooLarge); one that does not decrypt with this device's keys, or \
                whose plaintext is not a JSON object, is rejected (invalidPayload): exit status 1, and why on stderr.

                --platform fcm: PAYLOAD_FILE is an FCM HTTP v1 message as the gateway sends it (platforms v1 §2): \
                {"message": {"token", "data": {"ENCRYPTED_DATA", "sealedpush": "1"}, "android": {…}}}. The Android \
                device reads `data` and opens ENCRYPTED_DATA as an iPhone does, posting the placeholder \
                (`Secret Message!` / `(Encrypted)`) for a message it cannot open. Android has no service extension, so \
                notMutable, noAlert, extensionCrashed and timeout do not occur, and the extension's options are refused \
                as for webpush; everything else is the same. The request identifier is --request-id, else \
                android.collapse_key, else a new one. Data over 4096 bytes (keys and values) is rejected \
                (payloadTooLarge); a file that is not such a message, has a notification block or a non-string data \
                value is rejected (invalidPayload): exit status 1, and why on stderr.

                Example: sealedpush seal --to device.json --title Hi --body Secret | sealedpush device push -
                         sealedpush device push --platform webpush --keychain ./browser --json body.bin
                         sealedpush device push --platform fcm --keychain ./android --json message.json
                """)

        @Option(help: ArgumentHelp("What the device is and what PAYLOAD_FILE holds: apns (an APNs payload, the default), webpush (an RFC 8291 body) or fcm (an FCM message).",
                                   valueName: "apns|webpush|fcm"))
        var platform: DevicePlatform = .apns

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
        @Option(name: .customLong("attachments-dir"), help: ArgumentHelp(
            "Where the extension writes attachment files (default: $TMPDIR/sealedpush-attachments).", valueName: "DIR"))
        var attachmentsDir: String?
        @Flag(name: .customLong("allow-local-media"), help: ArgumentHelp(
            "Development: let attachments come over http from loopback, and over https from private and loopback addresses (media serve on this machine)."))
        var allowLocalMedia = false
        @Option(name: .customLong("request-id"), help: ArgumentHelp(
            "The notification request identifier the push arrives under, as iOS takes it from apns-collapse-id (default: a new one).",
            valueName: "ID"))
        var requestID: String?
        @OptionGroup var logging: LoggingOptions
        @Argument(help: ArgumentHelp("The APNs payload file, or - for standard input.", valueName: "PAYLOAD_FILE|-"))
        var payload: String

        func validate() throws {
            if let requestID, requestID.isEmpty || requestID.utf8.count > 256 {
                throw ValidationError("--request-id must be 1 to 256 bytes (an apns-collapse-id is at most 64, an apns-id 36)")
            }
            if platform != .apns {
                let extensionOnly = [
                    ("--time-limit", timeLimit != DurationArgument(milliseconds: 30_000)), ("--extension-delay", extensionDelay.milliseconds != 0),
                    ("--extension-crash", extensionCrash), ("--expiry-grace", expiryGrace != DurationArgument(milliseconds: 1000)),
                    ("--filtering", filtering),
                ].filter(\.1).map(\.0)
                if let first = extensionOnly.first {
                    throw ValidationError("\(first) is about the iOS notification service extension; a \(platform.rawValue) device has none: "
                                          + "drop it, or use --platform apns")
                }
            }
        }

        func run() async throws {
            logging.apply(default: output.json ? .error : .notice)
            if platform == .webpush { return try await runWebPush() }
            if platform == .fcm { return try await runFCM() }
            let bytes = try readInput(payload, limit: 16 << 20, what: "the payload")
            if let wrapper = DeviceRun.sealOutputWrapper(bytes) { throw CLIError(wrapper) }
            let storeValue = try openStore(store, create: false, clock: clock?.wallClock ?? .system)
            let media = try DeviceRun.MediaFetching(directory: attachmentsDir, policy: allowLocalMedia ? .development : .production)
            let result = try await DeviceRun.withMailbox(storeValue) { mailbox in
                await ReceiptsTransportCLI.with { transport in
                    await DeviceRun.deliver(bytes, store: storeValue, requestIdentifier: requestID, options: .init(
                        timeLimit: timeLimit.duration, expiryGrace: expiryGrace.duration, extensionCrash: extensionCrash,
                        filtering: filtering), extensionDelay: extensionDelay.duration, attachments: media.pipeline,
                        receipts: SimulatedDevice(store: storeValue).receiptCourier(transport: transport), mailbox: mailbox)
                }
            }
            await media.shutdown()
            if output.json {
                print(String(decoding: JSON.serialize(.object(result.jsonObject)), as: UTF8.self))
            } else {
                print(Banner.render(result, style: .detect()))
            }
            if result.isRejection { throw ExitCode(1) }
        }

        /// `--platform webpush`: the body decrypted with the device's Web Push keys, then the envelope opened.
        func runWebPush() async throws {
            let bytes = try readInput(payload, limit: 16 << 20, what: "the Web Push body")
            let storeValue = try openStore(store, create: false, clock: clock?.wallClock ?? .system)
            let directory = store.directory.path
            guard let subscription = try keychain(store, { () throws(KeychainError) in try WebPushKeyStore(store: storeValue).load() }) else {
                throw CLIError("the device at \(directory) has no Web Push keys: run `sealedpush device subscribe --keychain \(directory) "
                               + "--endpoint URL` first and register the subscription it prints")
            }
            let media = try DeviceRun.MediaFetching(directory: attachmentsDir, policy: allowLocalMedia ? .development : .production)
            let delivery = try await DeviceRun.withMailbox(storeValue) { mailbox in
                await ReceiptsTransportCLI.with { transport in
                    await WebPushReceiving.deliver(body: bytes, store: storeValue, keys: subscription.keys, requestIdentifier: requestID,
                                                   attachments: media.pipeline,
                                                   receipts: SimulatedDevice(store: storeValue).receiptCourier(transport: transport), mailbox: mailbox)
                }
            }
            await media.shutdown()
            try report(delivery, platform: .webpush)
        }
    }

    struct Subscribe: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make the device's Web Push keys for a push service endpoint and print the PushSubscription to register.",
            discussion: """
                As a browser's `pushManager.subscribe()`: makes a P-256 key pair and a 16-byte auth secret (RFC 8291), \
                keeps them with the endpoint in the device's keychain store (one item, `sealedpush.webpush`, sealed by \
                the store key; readable in every lock state, as a push layer must be), and prints the subscription's \
                `toJSON()` on stdout, one line:

                  {"endpoint": URL, "expirationTime": null, "keys": {"p256dh": BASE64URL, "auth": BASE64URL}}

                Register it as the device's `webpush` member (gateway, platforms v1 §1), and give the push service \
                the same keychain (`sealedpush-server webpush serve --subscription ID=DIR`). The output holds the \
                auth secret and the endpoint, a capability URL: hand it only to the app's server.

                A device holds one subscription: subscribing again makes new keys and replaces the old ones (as a \
                browser's unsubscribe and subscribe do), says so on stderr, and bodies encrypted to the old keys no \
                longer decrypt. The endpoint must be an https URL; IP addresses and loopback are allowed here (the \
                local push service hands out https://127.0.0.1:PORT/push/ID).

                With --key-out FILE, also writes the device key record to register (`key_record`) to FILE, making \
                the store and the device key first when it has none: WITHOUT a reveal key unless --reveal. Reveal \
                messages are an iOS content-extension feature; a reveal key pads every ordinary message to its \
                reveal form's size, which leaves a browser's 4096-byte Web Push body far less room (docs/platforms.md, \
                the body budget). A device whose key has a reveal key gets a warning on stderr saying so.

                Example: sealedpush device subscribe --keychain ./browser --endpoint https://127.0.0.1:8444/push/browser-1 \
                --key-out device.json > subscription.json
                """)
        @OptionGroup var store: KeychainOptions
        @Option(help: ArgumentHelp("The push service's endpoint for this device (https).", valueName: "URL"))
        var endpoint: String
        @Option(name: .customLong("key-out"), help: ArgumentHelp(
            "Also write the device key record to FILE; a device without a key gets one first (without a reveal key unless --reveal).",
            valueName: "FILE"))
        var keyOut: String?
        @Flag(help: "With --key-out, give the new device key a reveal key too (for an iOS content extension; browsers have none).")
        var reveal = false

        func validate() throws {
            if reveal && keyOut == nil { throw ValidationError("--reveal makes a reveal key with the device key --key-out writes; give --key-out FILE") }
            do { _ = try WebPushEndpointPolicy(allowPorts: [], allowPrivateEndpoints: true).check(endpoint) } catch {
                let text = error.description
                let prefix = "webpush/endpoint "
                throw ValidationError("--endpoint " + (text.hasPrefix(prefix) ? String(text.dropFirst(prefix.count)) : text))
            }
        }

        func run() throws {
            let s = try openStore(store, create: keyOut != nil)
            let deviceKeys = SealedPushKeychain.DeviceKeys(store: s)
            var record: DeviceKeyRecord?
            if let keyOut {
                let hasKey = try keychain(store) { () throws(KeychainError) in try deviceKeys.device.list().contains { $0.state == .active } }
                if hasKey && reveal {
                    throw ValidationError("--reveal makes a reveal key only with a new device key, and this device has one; "
                                          + "run `sealedpush keys add-reveal --keychain \(store.directory.path)` instead")
                }
                let made = try hasKey
                    ? keychain(store) { () throws(KeychainError) in try deviceKeys.export() }
                    : DeviceKeyGroup.run(store, kind: reveal ? .reveal : .device, .generate) { () throws(KeychainError) in
                        try deviceKeys.generate(reveal: reveal)
                    }
                do { try Data(made.jsonBytes + [0x0A]).write(to: URL(fileURLWithPath: keyOut), options: .atomic) } catch {
                    throw ValidationError("cannot write the device key record to --key-out \(keyOut): \(error.localizedDescription)")
                }
                record = made
            } else {
                record = try? deviceKeys.export()  // none yet: the record comes later, from `keys generate --no-reveal`
            }
            let keys = WebPushUserAgentKeys.generate()
            let replaced = try keychain(store) { () throws(KeychainError) in try WebPushKeyStore(store: s).save(keys, endpoint: endpoint) }
            print(String(decoding: JSON.serialize(keys.subscriptionJSON(endpoint: endpoint)), as: UTF8.self))
            if replaced {
                printError("replaced this device's earlier Web Push subscription: register the new one; bodies encrypted to the old keys no longer decrypt")
            }
            if record?.reveal != nil {
                printError("warning: this device's key has a reveal key: every ordinary message to it is padded to its reveal form, which "
                           + "leaves a Web Push body far less room (docs/platforms.md, the body budget). Browsers have no content "
                           + "extension: make their keys without one (--key-out without --reveal, or `keys generate --no-reveal`)")
            }
        }
    }

    struct Reboot: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restart the device: it is locked and before first unlock (afterFirstUnlock items become unreadable).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try DeviceRun.setState(store) { (s: KeychainStore) throws(KeychainError) in try s.reboot() } }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Unlock the device (every item becomes readable) and open the messages that waited for it (the pending queue).",
            discussion: """
                A message that arrived before the first unlock since the device started could not be opened (its \
                notification shows `(Encrypted)`, reason keychainLocked) and was kept, still sealed, in the pending \
                queue (reveal v1 section 9). Unlocking processes the queue as the app does on launch: each message \
                is checked as on arrival (expiry judged at the time it arrived) and its notification is replaced in \
                the notification store under the current preview policy, or left alone if it was removed; a \
                message that fails a check is dropped and its notification keeps `(Encrypted)`. Receipts of the \
                messages opened are sent (or queued). Prints what was done when the queue was not empty.
                """)
        @OptionGroup var store: KeychainOptions
        @OptionGroup var logging: LoggingOptions
        func run() async throws {
            logging.apply(default: .notice)
            try DeviceRun.setState(store) { (s: KeychainStore) throws(KeychainError) in try s.unlock() }
            let s = try openStore(store, create: false)
            let device = SimulatedDevice(store: s)
            let waiting = try keychain { () throws(KeychainError) in try device.pendingQueue.status() }
            if waiting.pending > 0 {
                let summary = await ReceiptsTransportCLI.with { transport in
                    await device.processPendingQueue(receipts: device.receiptCourier(transport: transport))
                }
                print("pending queue: \(summary.replaced) opened and shown, \(summary.alreadyRemoved) opened (notification already removed), "
                      + "\(summary.failed) failed a check, \(summary.remaining) still waiting")
            }
            try await DeviceFetching.run(s, onlyWhenConfigured: true)
        }
    }

    struct Lock: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Lock the device (whenUnlocked items become unreadable; afterFirstUnlock items stay readable after a first unlock).")
        @OptionGroup var store: KeychainOptions
        func run() throws { try DeviceRun.setState(store) { (s: KeychainStore) throws(KeychainError) in try s.lock() } }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the device's lock state, report URL, preview policy, receipt outbox and pending queue.",
            discussion: """
                With --json one object: {"lock_state": "beforeFirstUnlock|locked|unlocked", "report_url": URL|null, \
                "previews": "full|title|none", "outbox": N, "outbox_dropped": N, "pending": N, "pending_dropped": N, \
                "signatures": "required|optional", "plaintext": "refuse|show", "mailbox_url": URL|null, \
                "handles_waiting": N}. `handles_waiting` counts the notifications that still hold a mailbox handle (mailbox \
                v1 §5: arrived before the first unlock, or their fetch failed), fetched by `device fetch` or `device unlock`. \
                `pending` counts the messages that arrived before the first unlock and wait, still sealed, to be \
                opened (`device unlock`); `pending_dropped` those dropped to keep the queue within 100 entries and 512 KiB.
                """)
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        func run() throws {
            let s = try openStore(store, create: false)
            let device = SimulatedDevice(store: s)
            let state = try keychain { () throws(KeychainError) in try s.deviceLockState() }
            let outbox = ReceiptOutboxStore(store: s)
            let url = try keychain { () throws(KeychainError) in try outbox.reportURL() }
            let waiting = try keychain { () throws(KeychainError) in try outbox.entries() }
            let previews = try keychain { () throws(KeychainError) in try device.previews() }
            let required = try keychain { () throws(KeychainError) in try TrustStore(store: s).requireSignature() }
            let plaintext = try keychain { () throws(KeychainError) in try device.plaintext() }
            let pending = try keychain { () throws(KeychainError) in try device.pendingQueue.status() }
            let mailboxURL = try keychain { () throws(KeychainError) in try device.mailboxURL() }
            let handles = try keychain { () throws(KeychainError) in try device.handlesWaiting() }
            if output.json {
                var object = JSONObject([
                    ("lock_state", .string(state.rawValue)), ("report_url", url.map { .string($0) } ?? .null),
                    ("previews", .string(previews.rawValue)), ("outbox", .int(Int64(waiting.entries.count))),
                    ("outbox_dropped", .int(Int64(waiting.dropped))), ("pending", .int(Int64(pending.pending))),
                    ("pending_dropped", .int(Int64(pending.dropped))),
                    ("signatures", .string(required ? "required" : "optional")), ("plaintext", .string(plaintext.rawValue)),
                ])
                object["mailbox_url"] = mailboxURL.map { JSONValue.string($0) } ?? .null
                object["handles_waiting"] = .int(Int64(handles))
                print(String(decoding: JSON.serialize(.object(object)), as: UTF8.self))
                return
            }
            print(state.rawValue)
            print("report URL: \(url ?? "none")")
            print("previews: \(previews.rawValue)")
            print("signatures: \(required ? "required" : "optional")")
            print("plaintext: \(plaintext.rawValue)")
            print("receipt outbox: \(waiting.entries.count) waiting, \(waiting.dropped) dropped")
            print("pending queue: \(pending.pending) waiting for the device key, \(pending.dropped) dropped")
            print("mailbox URL: \(mailboxURL ?? "none"); \(handles) handle\(handles == 1 ? "" : "s") waiting to be fetched")
        }
    }

    struct Config: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Set the device's failure-report URL (receipts v1 section 3) and preview policy (reveal v1 section 5), kept in its keychain store.",
            discussion: """
                With a report URL, a message that fails a check (except replayed) is reported there: reason, \
                envelope key id, time and count, at most once per reason and key id every 10 minutes.

                --previews says what the service extension hands iOS for an ordinary message: `full` (the \
                default: title, subtitle and body), `title` (title and subtitle; the body `Press and hold to \
                read`) or `none` (the placeholder only). Under `title` and `none` the text stays sealed in the \
                notification and `device expand` opens it. Reveal messages are held whatever the setting.

                --signatures required refuses every unsigned message (signatureRequired), and with no trusted \
                sender (`sealedpush trust add`) every message; optional (the default) accepts unsigned messages \
                until a sender is trusted. It is the setting `sealedpush trust require-signature on|off` sets.

                --plaintext refuse shows a push without ENCRYPTED_DATA as `(Encrypted)`, so that whoever can push \
                for the app cannot show text of their own (as SealedPushSettings' default does on iOS); show (the \
                simulator's default, kept for existing scripts) shows it as it came.

                --mailbox-url is the gateway's public_url (mailbox v1 §5): a push with SEALEDPUSH_FETCH fetches its \
                message from it (https; http only to loopback). --mailbox-app and --mailbox-device name the app and \
                the device id the device is registered under, so that `device unlock` and `device fetch` can ask for \
                the list of messages it never saw (mailbox v1 §7).

                Examples: sealedpush device config --report-url https://push.example.com/reports
                          sealedpush device config --no-report-url
                          sealedpush device config --previews none
                          sealedpush device config --signatures required --plaintext refuse
                          sealedpush device config --mailbox-url https://push.example.com --mailbox-app chat --mailbox-device phone-1
                """)
        @OptionGroup var store: KeychainOptions
        @Option(name: .customLong("report-url"), help: ArgumentHelp("Where failure reports go (https; http only to localhost/127.0.0.1).", valueName: "URL"))
        var reportURL: String?
        @Flag(name: .customLong("no-report-url"), help: "Send no failure reports (the default).")
        var noReportURL = false
        @Option(help: ArgumentHelp("What iOS is handed for an ordinary message: full (default), title or none.", valueName: "full|title|none"))
        var previews: PreviewsArgument?
        @Option(help: ArgumentHelp("Whether unsigned messages are refused: required or optional (default).", valueName: "required|optional"))
        var signatures: SignaturesArgument?
        @Option(name: .customLong("mailbox-url"), help: ArgumentHelp(
            "The gateway's public_url a mailbox push's message is fetched from (https; http only to localhost or 127.0.0.1).", valueName: "URL"))
        var mailboxURL: String?
        @Flag(name: .customLong("no-mailbox-url"), help: "Forget the mailbox URL (a mailbox push is then malformedPayload).")
        var noMailboxURL = false
        @Option(name: .customLong("mailbox-app"), help: ArgumentHelp("The gateway app id this device is registered under (for the list).", valueName: "APP"))
        var mailboxApp: String?
        @Option(name: .customLong("mailbox-device"), help: ArgumentHelp("The device id this device is registered under at the gateway (for the list).",
                                                                        valueName: "DEVICE_ID"))
        var mailboxDevice: String?
        @Option(help: ArgumentHelp("What a push without ENCRYPTED_DATA shows: refuse ((Encrypted)) or show (as it came; default).", valueName: "refuse|show"))
        var plaintext: PlaintextArgument?

        func validate() throws {
            if reportURL != nil && noReportURL { throw ValidationError("Give only one of --report-url URL and --no-report-url.") }
            if mailboxURL != nil && noMailboxURL { throw ValidationError("Give only one of --mailbox-url URL and --no-mailbox-url.") }
            guard reportURL != nil || noReportURL || previews != nil || signatures != nil || plaintext != nil || mailboxURL != nil || noMailboxURL
                    || mailboxApp != nil || mailboxDevice != nil else {
                throw ValidationError("Give --report-url URL, --no-report-url, --previews full|title|none, --signatures required|optional, "
                                      + "--plaintext refuse|show, --mailbox-url URL, --no-mailbox-url, --mailbox-app APP or --mailbox-device DEVICE_ID.")
            }
            if let mailboxURL, let problem = ReceiptRequest.urlProblem(mailboxURL) {
                throw ValidationError("--mailbox-url \(problem); give the gateway's https public_url (http only to localhost or 127.0.0.1).")
            }
            if let mailboxApp, mailboxApp.isEmpty || mailboxApp.utf8.count > 64 { throw ValidationError("--mailbox-app must be the gateway's app id (1 to 64 bytes).") }
            if let mailboxDevice, mailboxDevice.isEmpty || mailboxDevice.utf8.count > 128 {
                throw ValidationError("--mailbox-device must be the device id the gateway knows this device by (1 to 128 bytes).")
            }
            if let reportURL, let problem = ReceiptRequest.urlProblem(reportURL) {
                throw ValidationError("--report-url \(problem); give an https URL (http only to localhost or 127.0.0.1).")
            }
        }

        func run() throws {
            let s = try openStore(store, create: false)
            if reportURL != nil || noReportURL {
                try keychain { () throws(KeychainError) in try ReceiptOutboxStore(store: s).setReportURL(reportURL) }
                print("report URL: \(reportURL ?? "none")")
            }
            if let previews {
                try keychain { () throws(KeychainError) in try SimulatedDevice(store: s).setPreviews(previews.policy) }
                print("previews: \(previews.policy.rawValue)")
            }
            if let signatures {
                try keychain { () throws(KeychainError) in try TrustStore(store: s).setRequireSignature(signatures == .required) }
                print("signatures: \(signatures.rawValue)")
            }
            if let plaintext {
                try keychain { () throws(KeychainError) in try SimulatedDevice(store: s).setPlaintext(plaintext.setting) }
                print("plaintext: \(plaintext.setting.rawValue)")
            }
            if mailboxURL != nil || noMailboxURL {
                try keychain { () throws(KeychainError) in try SimulatedDevice(store: s).setMailboxURL(mailboxURL) }
                print("mailbox URL: \(mailboxURL ?? "none")")
            }
            if mailboxApp != nil || mailboxDevice != nil {
                try keychain { () throws(KeychainError) in try SimulatedDevice(store: s).setMailboxIdentity(app: mailboxApp, deviceID: mailboxDevice) }
                if let mailboxApp { print("mailbox app: \(mailboxApp)") }
                if let mailboxDevice { print("mailbox device: \(mailboxDevice)") }
            }
        }
    }

    struct Notifications: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print what iOS's notification store holds for this device (what a forensic extraction would read).",
            discussion: """
                iOS keeps what a service extension hands it, out of the app's control; the simulated device keeps \
                the same in its store directory (notifications.json, in the clear, at most 100, oldest first): \
                request id, delivery time, title, subtitle, body, category, thread, the userInfo key names and \
                attachment file names. A reveal message leaves only its placeholder there, and so does an ordinary \
                message under `device config --previews none`.

                With --json, an array of {"request_id", "delivered_at" (Unix seconds), "title", "subtitle", "body", \
                "category", "thread", "userInfo" (the whole object as stored), "attachments" [file names]}.
                """)
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions

        func run() throws {
            let s = try openStore(store, create: false)
            let entries: [StoredNotification]
            do { entries = try NotificationCenterStore(store: s).entries() } catch { throw CLIError(CLIErrors.message(ExpandError.storeUnreadable(error))) }
            if output.json {
                print(String(decoding: JSON.serialize(.array(entries.map { .object($0.jsonObject) })), as: UTF8.self))
                return
            }
            if entries.isEmpty {
                print("(the notification store is empty)")
                return
            }
            var lines: [String] = []
            for e in entries {
                lines.append("\(e.requestID)  \(Timestamp.format(Date(timeIntervalSince1970: TimeInterval(e.deliveredAt))))")
                for (name, value) in [("title", e.title), ("subtitle", e.subtitle), ("body", e.body), ("category", e.category),
                                      ("thread", e.thread)] where !value.isEmpty {
                    lines.append("  \(name): \(value)")
                }
                let keys = e.userInfo.map { $0.key }
                if !keys.isEmpty { lines.append("  userInfo: " + keys.joined(separator: ", ")) }
                if !e.attachments.isEmpty { lines.append("  attachments: " + e.attachments.joined(separator: ", ")) }
            }
            print(lines.joined(separator: "\n"))
        }
    }

    struct Expand: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Press and hold a stored notification: run the content extension on it under the current lock state.",
            discussion: """
                Runs the notification content extension (reveal v1 section 4) on the notification the store keeps \
                under REQUEST_ID (see `device notifications`, or "request_id" in `device push --json`), with this \
                device's keys, trust and replay cache, and prints what its view shows: the text when `revealed`; \
                `Unlock iPhone to read` when `locked` (the phone is locked: `sealedpush device unlock`, then expand \
                again; nothing is recorded); `(Encrypted)` and the reason when `fallback`. Nothing it shows is \
                written to the notification store; attachments are fetched into --attachments-dir and removed when \
                the view ends, before this command returns.

                With --json one object: {"outcome": "revealed|locked|fallback", "reason": CODE|null,
                                         "view": {"title", "subtitle", "body", "attachments": [{"identifier", "type", "size"}]}}

                A revealed message whose push asked for a receipt sends its `revealed` receipt, once per message \
                (queued in the outbox when the collector does not answer).

                An unknown request id, or a notification store that cannot be read, is an error (exit status 1).
                """)
        @OptionGroup var store: KeychainOptions
        @OptionGroup var output: JSONOutputOptions
        @Option(name: .customLong("attachments-dir"), help: ArgumentHelp(
            "Where the content extension writes attachment files while its view is shown (default: $TMPDIR/sealedpush-attachments).",
            valueName: "DIR"))
        var attachmentsDir: String?
        @Flag(name: .customLong("allow-local-media"), help: ArgumentHelp(
            "Development: let attachments come over http from loopback, and over https from private and loopback addresses."))
        var allowLocalMedia = false
        @OptionGroup var logging: LoggingOptions
        @Argument(help: ArgumentHelp("The notification's request identifier.", valueName: "REQUEST_ID"))
        var requestID: String

        func run() async throws {
            logging.apply(default: output.json ? .error : .notice)
            let s = try openStore(store, create: false)
            let media = try DeviceRun.MediaFetching(directory: attachmentsDir, policy: allowLocalMedia ? .development : .production)
            let device = SimulatedDevice(store: s)
            // A revealed message sends its `revealed` receipt (reveal v1 §6) from the ticket `device push` kept.
            let outcome: Result<RevealView, ExpandError> = await ReceiptsTransportCLI.with { transport in
                do throws(ExpandError) {
                    return .success(try await device.expand(requestID: requestID, attachments: media.pipeline,
                                                            receipts: device.receiptCourier(transport: transport)))
                } catch { return .failure(error) }
            }
            await media.shutdown()
            let view: RevealView
            switch outcome {
            case let .success(v): view = v
            case let .failure(error): throw CLIError(CLIErrors.message(error))
            }
            if output.json {
                print(String(decoding: JSON.serialize(.object(view.jsonObject)), as: UTF8.self))
            } else {
                print(Banner.render(view, style: .detect()))
            }
        }
    }

    struct Flush: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send the receipts and failure reports waiting in the device's outbox.",
            discussion: """
                Entries are queued per receipt origin (scheme://host:port) and each origin is flushed on its own, \
                oldest first, until one of its entries gets neither 2xx nor a final refusal (no answer, 3xx, 401, \
                5xx: that server is down, try again later); a failing origin never holds up another. Entries \
                answered 2xx are removed, and so are those refused for good (400, 403, 404, 410, 413). Deliveries \
                respect each origin's backoff (1 minute doubling to 1 hour; 2 seconds doubling after a refused \
                connection); this command tries every origin now \
                unless --respect-backoff. Prints `sent N, rejected N, remaining N` (exit 1 when some remain).
                """)
        @OptionGroup var store: KeychainOptions
        @Option(parsing: .unconditional, help: ArgumentHelp("The device clock: ISO 8601 (2026-11-21T12:00:00Z) or Unix seconds.", valueName: "TIME"))
        var clock: DeviceClock?
        @Flag(name: .customLong("respect-backoff"), help: "Skip origins still backing off after a failure, as a delivery's flush does.")
        var respectBackoff = false
        @OptionGroup var logging: LoggingOptions

        func run() async throws {
            logging.apply(default: .notice)
            let s = try openStore(store, create: false, clock: clock?.wallClock ?? .system)
            let summary = await ReceiptsTransportCLI.with { transport in
                await SimulatedDevice(store: s).flushReceipts(transport: transport, ignoringBackoff: !respectBackoff)
            }
            print("sent \(summary.sent), rejected \(summary.rejected), remaining \(summary.remaining)")
            if summary.remaining > 0 { throw ExitCode(1) }
        }
    }
}

/// `--previews full|title|none`: the receiver's preview policy.
struct PreviewsArgument: ExpressibleByArgument {
    let policy: PreviewPolicy
    init?(argument: String) {
        guard let policy = PreviewPolicy(rawValue: argument) else { return nil }
        self.policy = policy
    }
    static var allValueStrings: [String] { PreviewPolicy.allCases.map(\.rawValue) }
}

/// `--signatures required|optional`: whether the device refuses unsigned messages.
enum SignaturesArgument: String, ExpressibleByArgument, CaseIterable {
    /// Unsigned messages fail `signatureRequired` (and every message while no sender is trusted).
    case required
    /// Unsigned messages are accepted until a sender is trusted.
    case optional
}

/// `--plaintext refuse|show`: the simulated device's plaintext setting.
struct PlaintextArgument: ExpressibleByArgument {
    let setting: SimulatedDevice.PlaintextSetting
    init?(argument: String) {
        guard let setting = SimulatedDevice.PlaintextSetting(rawValue: argument) else { return nil }
        self.setting = setting
    }
    static var allValueStrings: [String] { SimulatedDevice.PlaintextSetting.allCases.map(\.rawValue) }
}

/// The device clock given on the command line.
struct DeviceClock: ExpressibleByArgument, Sendable {
    let date: Date
    /// A wall clock stopped at this instant.
    var wallClock: WallClock { .fixed(date) }
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
package enum DeviceRun {
    /// What to say when `bytes` is not an APNs payload but `seal` output around one (the sender
    /// library recognises it); `nil` otherwise.
    static func sealOutputWrapper(_ bytes: [UInt8]) -> String? {
        switch SealOutputWrapper.detect(bytes) {
        case .headersOutput?:
            "this is `seal --headers` output, not an APNs payload; pass its `payload`, e.g. "
                + "`jq -c .payload FILE | sealedpush device push -` (or seal without --headers)"
        case .batchLine?:
            "this is a `seal --batch` output line, not an APNs payload; pass its `payload`, e.g. "
                + "`jq -c .payload FILE | sealedpush device push -`"
        case .batchError?:
            "this is a `seal --batch` error line (the message on that input line was not sealed), not an APNs payload: "
                + "fix the input line its `error` names and seal it again"
        case nil: nil
        }
    }

    static func setState(_ options: KeychainOptions, _ change: (KeychainStore) throws(KeychainError) -> DeviceLockState) throws {
        let s = try openStore(options, create: false)
        let state = try keychain { () throws(KeychainError) in try change(s) }
        print("device is now \(state.rawValue)")
    }

    /// Delivers `bytes` to the simulated device over `store` (its keys, trust and replay cache), under the
    /// notification request identifier `requestIdentifier` (`nil`: a new one).
    package static func deliver(_ bytes: [UInt8], store: KeychainStore, requestIdentifier: String? = nil, options: DeviceSimulator.Options,
                        extensionDelay: Duration = .zero, logger: Logger = Logger(label: "sealedpush.extension"),
                        attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil,
                        mailbox: (any MailboxFetcher)? = nil) async -> DeliveryResult {
        await SimulatedDevice(store: store).deliver(bytes, requestIdentifier: requestIdentifier, options: options, extensionDelay: extensionDelay,
                                                    logger: logger, attachments: attachments, receipts: receipts, mailbox: mailbox)
    }

    /// Runs `body` with the fetcher of the device's mailbox URL (`device config --mailbox-url`; `nil` when none is
    /// set), shut down afterwards. A stored URL that is no longer usable is refused as the option would be.
    package static func withMailbox<R>(_ store: KeychainStore, _ body: (HTTPMailboxFetcher?) async throws -> R) async throws -> R {
        let url: String?
        do { url = try SimulatedDevice(store: store).mailboxURL() } catch { throw CLIError("the device's mailbox URL cannot be read: \(error.description)") }
        guard let url else { return try await body(nil) }
        let fetcher: HTTPMailboxFetcher
        do { fetcher = try HTTPMailboxFetcher(mailboxURL: url) } catch {
            throw CLIError("--mailbox-url " + error.problem + "; set it again with `sealedpush device config --mailbox-url https://…`")
        }
        do {
            let result = try await body(fetcher)
            await fetcher.shutdown()
            return result
        } catch {
            await fetcher.shutdown()
            throw error
        }
    }

    /// The attachment pipeline of one `device push`: an HTTP fetcher, made only when a message has
    /// attachments (so plain deliveries start no HTTP client), and the attachments directory.
    package struct MediaFetching {
        package let pipeline: AttachmentPipeline?
        let fetcher: LazyHTTPFetcher?

        /// The pipeline over `directory`, or the default one (`$TMPDIR/sealedpush-attachments`): made 0700 when
        /// missing, refused when it is a link, another user's, or open to group or others; `policy` says whether
        /// media may come from loopback and private addresses (`--allow-local-media`).
        package init(directory: String?, policy: AttachmentURLPolicy = .production) throws {
            let path = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-attachments").path
            let fetcher = LazyHTTPFetcher()
            do { pipeline = try AttachmentPipeline(fetcher: fetcher, directory: path, policy: policy) } catch {
                throw CLIError(directory == nil ? error.description : "--attachments-dir: \(error.description)")
            }
            self.fetcher = fetcher
        }

        /// Closes the fetcher's connections, if it was made.
        package func shutdown() async {
            await fetcher?.shutdown()
        }
    }
}

/// An `HTTPAttachmentFetcher` made on the first request.
final class LazyHTTPFetcher: AttachmentFetcher {
    private let made = NIOLockedValueBox<HTTPAttachmentFetcher?>(nil)

    func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        let fetcher = made.withLockedValue { made in
            if let made { return made }
            let fetcher = HTTPAttachmentFetcher()
            made = fetcher
            return fetcher
        }
        return try await fetcher.get(url, maximumBytes: maximumBytes)
    }

    func shutdown() async {
        if let fetcher = made.withLockedValue({ $0 }) { try? await fetcher.shutdown() }
    }
}
