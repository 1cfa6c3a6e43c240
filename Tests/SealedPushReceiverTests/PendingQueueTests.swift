import Testing
import Synchronization
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushKeychain
import SealedPushDevice
import SealedPushReceiver
import SealedPushSender
import SealedPushTestSupport

/// Reveal v1 §9: what arrives before the first unlock waits, still sealed, and replaces its placeholder once the
/// device key reads.
@Suite("Reveal: the pending queue before first unlock (§9)", .timeLimit(.minutes(10)))
struct PendingQueueTests {
    @Test("before first unlock: (Encrypted) without ENCRYPTED_DATA, SEALEDPUSH_PENDING set, the payload kept; unlock replaces it under the preview policy",
          arguments: PreviewPolicy.allCases)
    func waitsThenReplaces(_ policy: PreviewPolicy) async throws {
        let phone = try RevealPhone()
        try phone.device.setPreviews(policy)
        let payload = try phone.payload(reveal: false, id: "msg-p1")
        _ = try phone.store.reboot()
        let result = await phone.device.deliver(payload, requestIdentifier: "REQ-P1")
        #expect(result.outcome == .fallback && result.reason == .keychainLocked)
        let shown = try #require(result.notification)
        #expect(shown.body == "(Encrypted)")
        #expect(shown.userInfo[WireFormat.encryptedDataKey] == nil)
        #expect(shown.userInfo[RevealFormat.pendingUserInfoKey] == .string("REQ-P1"))
        #expect(try phone.device.pendingQueue.status() == PendingQueueStatus(pending: 1, dropped: 0))
        let entry = try #require(try phone.device.pendingQueue.entries().first)
        #expect(entry.requestID == "REQ-P1" && entry.receivedAt == phone.now)
        // Revision 3: the whole entry sealed again to the reveal public key; nothing of it (thread included) in clear.
        #expect(entry.payload[WireFormat.encryptedDataKey] == nil && entry.payload[SealedPendingEntry.payloadKey] != nil && entry.thread == "",
                "the queue keeps the entry sealed to the reveal key")
        phone.expectNoSecretStored()

        // Still before first unlock: processing keeps everything.
        let early = await phone.device.processPendingQueue()
        #expect(early.remaining == 1 && early.replaced == 0)

        _ = try phone.store.unlock()
        let summary = await phone.device.processPendingQueue()
        #expect(summary.replaced == 1 && summary.failed == 0 && summary.remaining == 0)
        #expect(try phone.device.pendingQueue.status() == PendingQueueStatus(pending: 0, dropped: 0))
        let stored = try NotificationCenterStore(store: phone.store).entries()
        #expect(stored.filter { $0.requestID == "REQ-P1" }.count == 1, "the notification is shown once, under its request identifier")
        let replaced = try #require(stored.last)
        #expect(replaced.requestID == "REQ-P1")
        #expect(replaced.userInfo[WireFormat.encryptedDataKey] == nil && replaced.userInfo[RevealFormat.pendingUserInfoKey] == nil)
        switch policy {
        case .full:
            #expect(replaced.title == "Agent K" && replaced.body == "The eagle lands at noon.")
        case .title:
            #expect(replaced.title == "Agent K" && replaced.body == "Press and hold to read")
            #expect(replaced.userInfo[RevealFormat.localUserInfoKey] != nil)
        case .hidden:
            #expect(replaced.title != "Agent K" && replaced.body == "Press and hold to read")
            #expect(replaced.userInfo[RevealFormat.localUserInfoKey] != nil)
            phone.expectNoSecretStored()
        }
        if policy != .full {
            #expect(try await phone.device.expand(requestID: "REQ-P1").body == "The eagle lands at noon.")
        }
    }

    @Test("a later push processes the queue only while the phone is unlocked (revision 3: entries sealed to the reveal key)")
    func nextExtensionRun() async throws {
        let phone = try RevealPhone()
        _ = try phone.store.reboot()
        _ = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-a"), requestIdentifier: "REQ-A")
        _ = await phone.device.deliver(try phone.payload(reveal: true, id: "msg-b"), requestIdentifier: "REQ-B")
        #expect(try phone.device.pendingQueue.status().pending == 2)
        _ = try phone.store.unlock()
        _ = try phone.store.lock()  // unlocked once: the device key reads while locked, the reveal key does not
        let locked = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-c"), requestIdentifier: "REQ-C")
        #expect(locked.outcome == .decrypted)
        #expect(try phone.device.pendingQueue.status().pending == 2, "the queue opened with after-first-unlock keys")
        _ = try phone.store.unlock()
        let result = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-d"), requestIdentifier: "REQ-D")
        #expect(result.outcome == .decrypted)
        #expect(try phone.device.pendingQueue.status().pending == 0)
        let stored = try NotificationCenterStore(store: phone.store).entries()
        #expect(stored.first { $0.requestID == "REQ-A" }?.body == "The eagle lands at noon.")
        let held = try #require(stored.first { $0.requestID == "REQ-B" })
        #expect(held.body == "Press and hold to read" && held.userInfo[RevealFormat.userInfoKey] != nil, "a reveal message is held")
    }

    @Test("more than three notifications replaced in one pass: the replacer is asked for one summary; three or fewer: none")
    func summaryPastThree() async throws {
        /// Replaces everything and records the summaries asked for.
        final class Recording: DeliveredNotificationReplacer {
            let summaries = Mutex<[Int]>([])
            func replaceDelivered(_ request: NotificationRequest) async -> Bool { true }
            func summarize(replaced count: Int) async { summaries.withLock { $0.append(count) } }
        }
        for (count, expected) in [(4, [4]), (3, [])] {
            let phone = try RevealPhone()
            _ = try phone.store.reboot()
            for n in 0..<count {
                _ = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-s\(n)"), requestIdentifier: "REQ-S\(n)")
            }
            _ = try phone.store.unlock()
            let replacer = Recording()
            let summary = await SecretMessageExtension(configuration: phone.device.extensionConfiguration()).processPendingQueue(replacer: replacer)
            #expect(summary.replaced == count)
            #expect(replacer.summaries.withLock { $0 } == expected)
        }
    }

    @Test("an entry that waited longer than any message can be opened (the 30-day replay window) is dropped unopened")
    func staleEntriesDroppedUnopened() async throws {
        let phone = try RevealPhone()
        _ = try phone.store.reboot()
        _ = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-old"), requestIdentifier: "REQ-OLD")
        #expect(try phone.device.pendingQueue.status().pending == 1)
        phone.time.value.withLock { $0 += ReceiverPolicy.defaultReplayWindowSeconds + 60 }
        _ = try phone.store.unlock()
        let summary = await phone.device.processPendingQueue()
        #expect(summary.expired == 1 && summary.replaced == 0 && summary.remaining == 0)
        #expect(try phone.device.pendingQueue.status().pending == 0)
        let stored = try NotificationCenterStore(store: phone.store).entries()
        #expect(stored.first { $0.requestID == "REQ-OLD" }?.body == "(Encrypted)")
    }

    @Test("expiry is judged when the message arrived; a message that fails a check is dropped and keeps (Encrypted)")
    func checksAtArrival() async throws {
        let phone = try RevealPhone()
        _ = try phone.store.reboot()
        _ = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-e1", expiry: .after(seconds: 600)), requestIdentifier: "REQ-E1")
        // A message the sender addressed to a key this device never had: unknownKey at processing time.
        var stranger = RevealRig.text
        stranger.messageID = "msg-e2"
        let now = phone.now
        let other = try NotificationSender(clock: { now }).seal(stranger, to: DeviceKeyRecord(publicKey: BoxKeyPair.generate().publicKey, createdAt: nil))
        _ = await phone.device.deliver(other.payload, requestIdentifier: "REQ-E2")
        #expect(try phone.device.pendingQueue.status().pending == 1, "an unknown key is not worth keeping: it is no lock state")
        phone.time.value.withLock { $0 += 3600 }  // an hour later, past exp: still opens (judged at arrival)
        _ = try phone.store.unlock()
        let summary = await phone.device.processPendingQueue()
        #expect(summary.replaced == 1)
        let stored = try NotificationCenterStore(store: phone.store).entries()
        #expect(stored.first { $0.requestID == "REQ-E1" }?.body == "The eagle lands at noon.")
        #expect(stored.first { $0.requestID == "REQ-E2" }?.body == "(Encrypted)")
    }

    @Test("a replay of a message already shown under another notification is dropped; one the user removed is left alone")
    func replayAndRemoved() async throws {
        let phone = try RevealPhone()
        let payload = try phone.payload(reveal: false, id: "msg-r")
        _ = try phone.store.reboot()
        _ = await phone.device.deliver(payload, requestIdentifier: "REQ-R1")
        _ = await phone.device.deliver(payload, requestIdentifier: "REQ-R2")
        _ = await phone.device.deliver(try phone.payload(reveal: false, id: "msg-gone"), requestIdentifier: "REQ-GONE")
        #expect(try NotificationCenterStore(store: phone.store).remove(requestID: "REQ-GONE"))
        _ = try phone.store.unlock()
        let summary = await phone.device.processPendingQueue()
        #expect(summary == { var s = PendingQueueSummary(); s.replaced = 1; s.failed = 1; s.alreadyRemoved = 1; return s }())
        let stored = try NotificationCenterStore(store: phone.store).entries()
        #expect(stored.first { $0.requestID == "REQ-R1" }?.body == "The eagle lands at noon.")
        #expect(stored.first { $0.requestID == "REQ-R2" }?.body == "(Encrypted)")
        #expect(!stored.contains { $0.requestID == "REQ-GONE" }, "a removed notification is not brought back")
    }

    @Test("bounded: at most 100 entries and 512 KiB, the oldest dropped first and counted; a request identifier appears once")
    func bounds() throws {
        let payload = JSONObject([("aps", .object(JSONObject())), ("ENCRYPTED_DATA", .string(String(repeating: "A", count: 3000)))])
        var entries: [PendingMessage] = []
        var dropped = 0
        for i in 0..<150 {
            let r = PendingQueueBounds.appending(PendingMessage(requestID: "R\(i)", thread: "", receivedAt: Int64(i), payload: payload), to: entries)
            entries = r.kept
            dropped += r.dropped
        }
        let total = entries.reduce(0) { $0 + $1.encodedSize }
        #expect(entries.count <= 100 && total <= 512 * 1024)
        #expect(entries.count + dropped == 150)
        #expect(entries.last?.requestID == "R149" && entries.first?.requestID == "R\(150 - entries.count)")
        let again = PendingQueueBounds.appending(PendingMessage(requestID: "R149", thread: "t", receivedAt: 1, payload: payload), to: entries)
        #expect(again.kept.filter { $0.requestID == "R149" }.count == 1 && again.dropped == 0)
        let small = JSONObject([("aps", .object(JSONObject()))])
        var many: [PendingMessage] = []
        var droppedSmall = 0
        for i in 0..<130 {
            let r = PendingQueueBounds.appending(PendingMessage(requestID: "S\(i)", thread: "", receivedAt: 0, payload: small), to: many)
            many = r.kept
            droppedSmall += r.dropped
        }
        #expect(many.count == 100 && droppedSmall == 30)
    }

    @Test("the file queue counts what it dropped; a damaged file is a decode error naming it, never a crash")
    func fileQueue() throws {
        let phone = try RevealPhone()
        let queue = FilePendingQueue(store: phone.store, maxEntries: 3)
        for i in 0..<5 {
            try queue.append(PendingMessage(requestID: "F\(i)", thread: "th", receivedAt: Int64(i), payload: JSONObject([("aps", .object(JSONObject()))])))
        }
        #expect(try queue.status() == PendingQueueStatus(pending: 3, dropped: 2))
        #expect(try queue.entries().map(\.requestID) == ["F2", "F3", "F4"])
        try queue.remove(requestIDs: ["F3", "nope"])
        #expect(try queue.entries().map(\.requestID) == ["F2", "F4"])
        let mode = try FileManager.default.attributesOfItem(atPath: queue.path.string)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        try Data("{\"dropped\": 1, \"entries\": [{\"request_id\": 5}]}".utf8).write(to: URL(fileURLWithPath: queue.path.string))
        let error = #expect(throws: KeychainError.self) { try queue.entries() }
        #expect(error?.description.contains(FilePendingQueue.fileName) == true)
    }
}
