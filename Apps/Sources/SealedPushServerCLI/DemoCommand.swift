import SealedPushCLI
import ArgumentParser
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import SealedPushCrypto
import SealedPushKeychain
import SealedPushDevice
import SealedPushReceiver
import SealedPushSender
import SealedPushWire

/// `sealedpush-server demo`: the whole story with the real components, in a throwaway directory.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Play the whole story: keys, trust, sealing, delivery, rotation, tampering, a locked device, reveal on demand, a stalled extension, the gateway and its mailbox mode.",
        discussion: "Runs in a throwaway directory (removed afterwards unless --keep). Colour on a terminal, plain text when piped.")

    @Flag(help: "Keep the throwaway device and server stores and print where they are.")
    var keep = false

    func run() async throws {
        let style = Banner.Style.detect()
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-demo-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: base, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        defer { if !keep { try? FileManager.default.removeItem(at: base) } }
        let started = ContinuousClock.now
        var demo = Demo(base: base, style: style)
        do { try await demo.play() } catch {
            // A failed step still shuts the demo's HTTP clients down (an AsyncHTTPClient dropped unshut traps in a debug
            // build, which hid the step's error).
            await demo.apns?.stop()
            await demo.receipts?.stop()
            throw error
        }
        let elapsed = ContinuousClock.now - started
        let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        print(style.dim("\nDone in \(milliseconds / 1000).\(String(milliseconds % 1000 + 1000).dropFirst()) s."
            + (keep ? " Stores kept in \(base.path)." : "")))
    }
}

/// The demo's steps.
struct Demo {
    let base: URL
    let style: Banner.Style
    var step = 0
    /// The receipt collector and the device's courier (issue #14), when this build has them.
    var receipts: DemoReceipts?
    var apns: DemoAPNs?

    init(base: URL, style: Banner.Style) {
        self.base = base
        self.style = style
    }

    var quietLogger: Logger {
        var logger = Logger(label: "sealedpush.demo")
        logger.logLevel = .critical
        return logger
    }

    mutating func heading(_ text: String) {
        step += 1
        print("\n" + style.bold(style.cyan("\(step). \(text)")))
    }

    func note(_ text: String) { print("   " + text) }

    func opened<R>(_ what: String, _ body: () throws(KeychainError) -> R) throws -> R {
        do { return try body() } catch { throw CLIError("demo step failed (\(what)): \(error.description)") }
    }

    mutating func play() async throws {
        let deviceStore = try opened("open device store") { () throws(KeychainError) in
            try KeychainStore(url: base.appendingPathComponent("device"))
        }
        let serverStore = try opened("open server store") { () throws(KeychainError) in
            try KeychainStore(url: base.appendingPathComponent("server"))
        }
        let keys = DeviceKeys(store: deviceStore)
        let senderKeys = SenderKeyring(store: serverStore)
        let trust = TrustStore(store: deviceStore)

        heading("The device makes its key pair and registers the public half with the server")
        let record = try opened("keys generate") { () throws(KeychainError) in try keys.generate() }
        note("sealedpush keys generate  →  " + style.dim(String(decoding: record.jsonBytes, as: UTF8.self)))
        note("The private keys stay in the device's keychain (encrypted at rest): the device key afterFirstUnlockThisDeviceOnly,")
        note("the reveal key (the record's `reveal`) whenUnlockedThisDeviceOnly.")

        heading("The server makes a signing key; the device trusts it and requires signatures")
        let senderRecord = try opened("sender generate") { () throws(KeychainError) in try senderKeys.generate() }
        try opened("trust add") { () throws(KeychainError) in
            try trust.add(senderRecord)
            try trust.setRequireSignature(true)
        }
        note("sealedpush sender generate; sealedpush trust add sender.json; sealedpush trust require-signature on")
        note("sender key id " + style.bold(senderRecord.keyID.hex))

        receipts = await startReceipts(deviceStore)
        let signer = try opened("active sender key") { () throws(KeychainError) in try senderKeys.activeSigningKey() }
        let sender = try NotificationSender(signer: signer)

        apns = await DemoAPNs.start(logger: quietLogger)
        heading("The server seals three secret messages and sends them through APNs to the phone")
        if apns != nil {
            note("sealedpush-server apns serve (a local APNs: HTTP/2, TLS, token auth) with the phone's token; sealedpush send …")
        }
        let messages = [
            SecretMessage(title: "Agent K", subtitle: "Field report", body: "The eagle lands at noon.", threadID: "ops-7", expiry: .after(seconds: 3600)),
            SecretMessage(title: "Bank", body: "Your one-time code is 481 516.", expiry: .after(seconds: 300)),
            SecretMessage(title: "Dr. Lee", body: "Your results are back: all clear. 🎉", expiry: .after(seconds: 86_400)),
        ]
        for message in messages {
            let payload = try await receipts?.seal(sender, message, record) ?? sealOrFail(sender, message, record)
            let expiration = message.expiry?.resolved(issuedAt: Int64(Date().timeIntervalSince1970)) ?? 0
            sideBySide(payload, try await deliverThroughAPNs(payload, expiration: expiration, store: deviceStore))
        }
        if let receipts { note("Receipts at the collector: " + style.bold(await receipts.summary())) }

        heading("Rotation with a message in flight")
        let inFlight = try sealOrFail(sender, SecretMessage(title: "Agent K", body: "Sealed to the old key just before the rotation."), record)
        let newRecord = try opened("keys rotate") { () throws(KeychainError) in try keys.rotateDevice(grace: .seconds(7 * 86_400)) }
        note("sealedpush keys rotate --grace 7d  →  new active key " + style.bold(newRecord.keyID.hex)
             + ", old key \(record.keyID.hex) retired for 7 days")
        let lateResult = await deliver(inFlight, store: deviceStore)
        note("The in-flight message, sealed to the retired key:")
        sideBySide(inFlight, lateResult)
        let fresh = try sealOrFail(sender, SecretMessage(title: "Agent K", body: "Sealed to the new key after registration."), newRecord)
        note("The server seals to the newly registered record:")
        sideBySide(fresh, await deliver(fresh, store: deviceStore))

        heading("A payload tampered with in transit falls back to (Encrypted)")
        let original = try sealOrFail(sender, SecretMessage(title: "Agent K", body: "Meet at the usual place."), newRecord)
        let tampered = tamper(original)
        note("One byte of ENCRYPTED_DATA changed:")
        sideBySide(tampered, await deliver(tampered, store: deviceStore))

        try await photoMessage(sender: sender, record: newRecord, store: deviceStore)

        heading("The device reboots and is still locked: the key cannot be read")
        let waiting = try sealOrFail(sender, SecretMessage(title: "Agent K", body: "Delivered while the phone was locked."), newRecord)
        _ = try opened("device reboot") { () throws(KeychainError) in try deviceStore.reboot() }
        note("sealedpush device reboot  →  beforeFirstUnlock")
        let locked = await deliver(waiting, store: deviceStore)
        sideBySide(waiting, locked)
        if let receipts {
            note("Failure report received by the server: " + style.bold(await receipts.reports(.keychainLocked))
                 + " (key id \(newRecord.keyID.hex): the key cannot be read in this lock state)")
        }
        note("The message waits, still sealed, in the pending queue (reveal v1 §9); iOS keeps no ENCRYPTED_DATA for it.")
        _ = try opened("device unlock") { () throws(KeychainError) in try deviceStore.unlock() }
        let device = SimulatedDevice(store: deviceStore)
        let processed = await device.processPendingQueue(receipts: receipts?.courier(deviceStore), logger: quietLogger)
        note("sealedpush device unlock  →  the pending queue opens it (\(processed.replaced) replaced) and its notification becomes:")
        if let requestID = locked.requestID,
           let shown = try? NotificationCenterStore(store: deviceStore).entry(requestID: requestID) {
            note("   " + style.bold(shown.title) + " — " + shown.body + style.dim("  (request \(requestID), replaced in place)"))
        }

        try await revealAct(sender: sender, record: newRecord, store: deviceStore)

        heading("A stalled extension runs out of time")
        let slow = try sealOrFail(sender, SecretMessage(title: "Agent K", body: "The network is slow today."), newRecord)
        note("--time-limit 300ms --extension-delay 2s (iOS gives about 30 s, then calls serviceExtensionTimeWillExpire())")
        sideBySide(slow, await deliver(slow, store: deviceStore,
                                       options: .init(timeLimit: .milliseconds(300), expiryGrace: .milliseconds(500)),
                                       extensionDelay: .seconds(2)))

        await unregisteredToken(slow)
        await apns?.stop()
        apns = nil

        try await gatewayAct(senderStore: base.appendingPathComponent("server"), senderRecord: senderRecord)
        try await mailboxAct(senderStore: base.appendingPathComponent("server"), senderRecord: senderRecord)
        try await platformsAct(senderStore: base.appendingPathComponent("server"), senderRecord: senderRecord)

        heading("The device's keys now")
        KeyOutput.printListings(try opened("keys list") { () throws(KeychainError) in try keys.list() }, json: false)
        await receipts?.stop()
    }

    func sealOrFail(_ sender: NotificationSender, _ message: SecretMessage, _ record: DeviceKeyRecord) throws -> [UInt8] {
        do { return try sender.seal(message, to: record).payload } catch { throw CLIError("demo could not seal: \(error.description)") }
    }


    func deliver(_ payload: [UInt8], store: KeychainStore, requestIdentifier: String? = nil, options: DeviceSimulator.Options = .init(),
                 extensionDelay: Duration = .zero, attachments: AttachmentPipeline? = nil) async -> DeliveryResult {
        await DeviceRun.deliver(payload, store: store, requestIdentifier: requestIdentifier, options: options, extensionDelay: extensionDelay,
                                logger: quietLogger, attachments: attachments, receipts: receipts?.courier(store))
    }

    /// Reveal on demand (reveal v1, issue #24): a reveal message is held with its placeholder, the notification
    /// store is shown and checked for the text, and the press and hold opens it only once the phone is unlocked.
    mutating func revealAct(sender: NotificationSender, record: DeviceKeyRecord, store: KeychainStore) async throws {
        heading("Reveal on demand: the text never enters iOS's notification store")
        let text = "The safe house moved to the harbour."
        var message = SecretMessage(title: "Agent K", body: text, expiry: .after(seconds: 3600))
        message.reveal = .standard
        let payload = try sealOrFail(sender, message, record)
        note("sealedpush seal --reveal  →  the text is sealed again, to reveal key " + style.bold(record.reveal?.keyID.hex ?? "-"))
        let requestID = "reveal-demo-1"
        sideBySide(payload, await deliver(payload, store: store, requestIdentifier: requestID))
        let entries: [StoredNotification]
        do { entries = try NotificationCenterStore(store: store).entries() } catch {
            throw CLIError("demo step failed (device notifications): \(error.description)")
        }
        note("sealedpush device notifications  →  what iOS keeps of it (a forensic extraction reads this):")
        for entry in entries where entry.requestID == requestID {
            note(style.dim("  \(entry.requestID): title \"\(entry.title)\", body \"\(entry.body)\", category \(entry.category), "
                           + "userInfo \(entry.userInfo.map { $0.key }.joined(separator: ", "))"))
        }
        let leaked = entries.contains { entry in
            String(decoding: JSON.serialize(.object(entry.jsonObject)), as: UTF8.self).contains(text)
        }
        if leaked { throw CLIError("demo check failed: the reveal message's text is in the notification store") }
        note("Searched all \(entries.count) stored notifications: " + style.green("the secret text is in none of them") + ".")

        _ = try opened("device lock") { () throws(KeychainError) in try store.lock() }
        note("sealedpush device lock; sealedpush device expand \(requestID)  →  the reveal key cannot be read while locked:")
        try await expand(requestID, store: store)
        _ = try opened("device unlock") { () throws(KeychainError) in try store.unlock() }
        note("sealedpush device unlock; the user presses and holds the notification (sealedpush device expand \(requestID)):")
        try await expand(requestID, store: store)
    }

    /// Presses and holds `requestID` and prints the content extension's view, indented.
    func expand(_ requestID: String, store: KeychainStore) async throws {
        let view: RevealView
        do { view = try await SimulatedDevice(store: store).expand(requestID: requestID, logger: quietLogger) } catch {
            throw CLIError("demo step failed (device expand): \(error.description)")
        }
        for line in Banner.render(view, style: style).split(separator: "\n", omittingEmptySubsequences: false) { note(String(line)) }
    }

    /// Flips one bit in the middle of the sealed box, keeping the base64 valid.
    func tamper(_ payload: [UInt8]) -> [UInt8] {
        guard case var .object(root)? = try? JSON.parse(payload), let text = root["ENCRYPTED_DATA"]?.stringValue,
              var bytes = try? Base64.decode(text) else { return payload }
        bytes[bytes.count / 2] ^= 0x01
        root["ENCRYPTED_DATA"] = .string(Base64.encode(bytes))
        return JSON.serialize(.object(root))
    }

    /// What Apple sees (the placeholder and an opaque blob) next to what the user sees.
    func sideBySide(_ payload: [UInt8], _ result: DeliveryResult) {
        var left = [style.dim("what Apple sees (\(payload.count) bytes)")]
        if case let .object(root)? = try? JSON.parse(payload), let aps = root["aps"]?.objectValue {
            let alert = aps["alert"]?.objectValue
            left.append("alert.title: \(alert?["title"]?.stringValue ?? "")")
            left.append("alert.body:  \(alert?["body"]?.stringValue ?? "")")
            if let handle = root[MailboxHandle.apnsKey]?.stringValue {
                // Mailbox mode: only a handle (the delivery id and a token), never the message.
                left.append("SEALEDPUSH_FETCH (a handle):")
                left.append(style.dim(MailboxHandle(handle)?.redacted ?? String(handle.prefix(20)) + "…"))
            } else {
                let blob = root["ENCRYPTED_DATA"]?.stringValue ?? ""
                left.append("ENCRYPTED_DATA:")
                left.append(style.dim(String(blob.prefix(34)) + "…"))
            }
        }
        var right = [style.dim("what the user sees")]
        if let n = result.notification {
            right += Banner.box(title: n.title, subtitle: n.subtitle, body: n.body, style: style)
        } else {
            right.append("(nothing shown)")
        }
        right.append(Banner.outcomeLine(result, style: style))
        if result.attachmentFailures != nil {
            right += Banner.attachmentLines(result, style: style)
        }
        let leftWidth = 38
        for i in 0..<max(left.count, right.count) {
            let l = i < left.count ? left[i] : ""
            let visible = Banner.visibleWidth(l)
            let pad = String(repeating: " ", count: max(1, leftWidth - visible))
            print("   " + l + pad + (i < right.count ? right[i] : ""))
        }
    }
}
