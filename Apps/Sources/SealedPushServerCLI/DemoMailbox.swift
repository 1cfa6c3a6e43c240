// The demo's mailbox act (issue #46): the push carries a handle, the phone fetches the sealed message from the
// gateway once; a message too large for a push, one before the first unlock, three while the phone is off (APNs
// keeps the last), and a retraction that replaces a shown notification.
import SealedPushCLI
import SealedPushDevice
import SealedPushDeviceHTTP
import SealedPushKeychain
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushAPNsServer
import SealedPushCrypto
import SealedPushReceiver
import SealedPushWire

extension Demo {
    /// The mailbox act: a gateway with app `chat` in mailbox mode, one phone configured with its mailbox URL.
    mutating func mailboxAct(senderStore: URL, senderRecord: SenderKeyRecord) async throws {
        let mailbox = JSONObject([("mailbox", .object(JSONObject([("enabled", .bool(true)), ("fetch_grace", .int(60)),
                                                                  ("max_message_bytes", .int(32768))])))])
        guard let g = await DemoGateway.start(in: base.appendingPathComponent("mailbox"), senderStore: senderStore, extraApp: mailbox,
                                              logger: quietLogger) else {
            note("(the gateway could not start here; skipped)")
            return
        }
        let fetcher: HTTPMailboxFetcher
        do { fetcher = try HTTPMailboxFetcher(mailboxURL: g.base) } catch {
            await g.stop()
            throw CLIError("demo step failed (mailbox URL): \(error.description)")
        }
        do { try await mailboxScenes(g, fetcher: fetcher, senderRecord: senderRecord) } catch {
            await fetcher.shutdown()
            await g.stop()
            throw error
        }
        await fetcher.shutdown()
        await g.stop()
    }

    private mutating func mailboxScenes(_ g: DemoGateway, fetcher: HTTPMailboxFetcher, senderRecord: SenderKeyRecord) async throws {
        heading("Mailbox mode: the push carries only a handle; the phone fetches the sealed message once")
        let store = try opened("mailbox phone store") { () throws(KeychainError) in try KeychainStore(url: base.appendingPathComponent("mailbox/phone")) }
        let record = try opened("mailbox phone keys") { () throws(KeychainError) in try DeviceKeys(store: store).generate() }
        try opened("mailbox phone settings") { () throws(KeychainError) in
            try TrustStore(store: store).add(senderRecord)
            try TrustStore(store: store).setRequireSignature(true)
            try SimulatedDevice(store: store).setMailboxURL(g.base)
            try SimulatedDevice(store: store).setMailboxIdentity(app: "chat", deviceID: "phone-m")
        }
        let token = Hex.encode(CryptoLibrary.randomBytes(count: 32))
        let (registered, _) = try await g.call(.PUT, "/v1/apps/chat/devices/phone-m", JSONObject([
            ("user_id", "u-7"), ("apns_token", .string(token)), ("environment", "production"), ("key_record", .object(record.jsonObject)),
        ]))
        note("app \"chat\" with \"mailbox\": {\"enabled\": true}; PUT …/devices/phone-m  →  " + style.bold("\(registered)"))
        note("sealedpush device config --mailbox-url \(g.base) --mailbox-app chat --mailbox-device phone-m")
        let device = SimulatedDevice(store: store)
        let courier = device.receiptCourier(transport: g.transport)

        /// Sends `body` to the phone (and `delivery` when given); the status, the message id and the answer.
        func send(_ title: String, _ body: String, delivery: String? = nil, receipt: Bool = true) async throws -> (Int, String, JSONObject) {
            var message = JSONObject([("to", .object(JSONObject([("device_ids", .array(["phone-m"]))]))), ("title", .string(title)), ("body", .string(body))])
            if let delivery { message["delivery"] = .string(delivery) }
            if !receipt { message["receipt"] = .bool(false) }
            let (status, answer) = try await g.call(.POST, "/v1/apps/chat/messages", message)
            return (status, answer["message_id"]?.stringValue ?? "", answer)
        }
        /// The pushes the local APNs accepted for the phone.
        func pushes() -> [AcceptedPush] { g.received.withLockedValue { $0.filter { $0.deviceToken == token } } }
        /// Waits (up to 30 s) until the phone has `count` pushes; the last.
        func waitForPush(_ count: Int) async throws -> AcceptedPush {
            let deadline = ContinuousClock.now + .seconds(30)
            while pushes().count < count, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(20)) }
            guard pushes().count >= count, let last = pushes().last else { throw CLIError("demo step failed: the mailbox push did not reach the local APNs") }
            return last
        }
        func deliver(_ push: AcceptedPush) async -> DeliveryResult {
            await device.deliver(push.payload, requestIdentifier: push.requestIdentifier, logger: quietLogger, receipts: courier, mailbox: fetcher)
        }

        var count = 0
        let (status, _, _) = try await send("Agent K", "The handover is at the old mill.")
        count += 1
        note("POST …/messages  →  " + style.bold("\(status)") + "; APNs gets a handle, the phone fetches and opens the envelope:")
        let firstPush = try await waitForPush(count)
        sideBySide(firstPush.payload, await deliver(firstPush))

        heading("A 20 KB message: push mode refuses it, mailbox mode delivers it")
        let long = "Full dossier: " + String(repeating: "The eagle lands at noon; bring the blue folder. ", count: 420)
        let (refused, _, refusal) = try await send("Agent K", long, delivery: "push")
        note("\"delivery\": \"push\", a \(long.utf8.count)-byte body  →  " + style.bold("\(refused)")
             + " " + style.dim(refusal["detail"]?.stringValue.map { String($0.prefix(90)) } ?? ""))
        let (accepted, _, _) = try await send("Agent K", long, delivery: "mailbox")
        count += 1
        let bigPush = try await waitForPush(count)
        let bigResult = await deliver(bigPush)
        note("\"delivery\": \"mailbox\"  →  " + style.bold("\(accepted)") + "; the push is \(bigPush.payload.count) bytes, the phone shows "
             + "\(bigResult.notification?.body.utf8.count ?? 0) bytes of text (" + Banner.outcomeLine(bigResult, style: style) + ")")
        if refused < 400 || bigResult.outcome != .decrypted || bigResult.notification?.body != long {
            throw CLIError("demo check failed: the 20 KB message was not refused in push mode and delivered in mailbox mode")
        }

        heading("Before the first unlock the phone does not fetch: the message waits at the gateway, not on the phone")
        _ = try opened("device reboot") { () throws(KeychainError) in try store.reboot() }
        _ = try await send("Agent K", "Arrived while the phone was still starting.")
        count += 1
        let bfuPush = try await waitForPush(count)
        let locked = await deliver(bfuPush)
        note("sealedpush device reboot; a mailbox push arrives  →  nothing fetched, nothing written; the notification keeps the handle:")
        sideBySide(bfuPush.payload, locked)
        _ = try opened("device unlock") { () throws(KeychainError) in try store.unlock() }
        let afterUnlock = await device.processMailbox(fetcher: fetcher, lister: fetcher, receipts: courier, logger: quietLogger)
        note("sealedpush device unlock  →  \(afterUnlock.kept.replaced) fetched and shown; the notification becomes:")
        if let shown = try? NotificationCenterStore(store: store).entry(requestID: bfuPush.requestIdentifier) {
            note("   " + style.bold(shown.title) + " — " + shown.body + style.dim("  (request \(bfuPush.requestIdentifier), replaced in place)"))
        }
        if afterUnlock.kept.replaced != 1 { throw CLIError("demo check failed: the message that arrived before the first unlock was not shown after unlock") }

        heading("Three messages while the phone is off: APNs keeps only the last, the list gives back all three")
        let offTexts = ["Off 1: the meeting moved to Tuesday.", "Off 2: bring the second key.", "Off 3: burn this after reading."]
        g.apns.rules.switchOff(token)
        for text in offTexts {
            let (_, id, _) = try await send("Agent K", text)
            _ = try await g.waitFor(id) { $0.allSatisfy { $0 != "queued" } }
        }
        guard let kept = g.apns.rules.switchOn(token) else { throw CLIError("demo step failed: the local APNs kept no push for the phone that was off") }
        note("three pushes accepted while the phone is off; it comes back on and APNs hands it only the last (one push kept per app):")
        sideBySide(kept.payload, await deliver(kept))
        let listed = await device.processMailbox(fetcher: fetcher, lister: fetcher, receipts: courier, logger: quietLogger)
        note("sealedpush device fetch  →  challenge sealed to the device key, list: " + style.bold("\(listed.recovered) never seen")
             + ", \(listed.alreadyShown) already shown" + (listed.listFailure.map { " (\($0))" } ?? ""))
        let bodies = (try? NotificationCenterStore(store: store).entries().map(\.body)) ?? []
        for text in offTexts { note("   " + (bodies.contains(text) ? style.green("shown") : "missing") + "  " + text) }
        if !offTexts.allSatisfy({ bodies.contains($0) }) { throw CLIError("demo check failed: the list did not recover all three messages") }

        heading("A retraction replaces a notification already shown")
        // Mailbox v1 §6 retracts only deliveries not yet collected, and a receipt collects one: this message asks for none,
        // so it stays `fetched` (for the app's fetch_grace, 60 s) after the phone showed it.
        let (_, retractID, _) = try await send("Agent K", "Wrong address, ignore: 12 Harbour Street.", receipt: false)
        note("\"receipt\": false (a receipt would collect it at once, and only what is not yet collected can be retracted):")
        count += 1
        let shownPush = try await waitForPush(count)
        sideBySide(shownPush.payload, await deliver(shownPush))
        let (retracted, answer) = try await g.call(.DELETE, "/v1/apps/chat/messages/\(retractID)?retract=shown")
        let retractions = (answer["deliveries"]?.arrayValue ?? []).compactMap { $0.objectValue?["retraction"]?.stringValue }
        note("curl -X DELETE …/messages/\(retractID.prefix(8))…?retract=shown  →  " + style.bold("\(retracted)") + " retraction: "
             + retractions.joined(separator: ", "))
        count += 1
        let retractionPush = try await waitForPush(count)
        note("the retraction push has the same apns-collapse-id, so it replaces the notification (request \(retractionPush.requestIdentifier)):")
        let replaced = await deliver(retractionPush)
        sideBySide(retractionPush.payload, replaced)
        let now = try? NotificationCenterStore(store: store).entry(requestID: shownPush.requestIdentifier)
        if retractionPush.requestIdentifier != shownPush.requestIdentifier || now?.body != "(Deleted)" {
            throw CLIError("demo check failed: the retraction did not replace the shown notification")
        }
    }
}
