import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushKeychain
import SealedPushDevice
import SealedPushReceiver
import SealedPushSender
import SealedPushTestSupport

/// The usual seizure (reveal v1 revision 2): a phone unlocked once since it started, now locked. A forensic extraction
/// reads every file of the device and every keychain item readable after first unlock; it tries every such key on
/// every sealed box it can find, nested ones included. It must recover nothing the device chose not to show.
struct ForensicExaminer {
    let store: KeychainStore
    let directory: URL

    /// The X25519 keys an after-first-unlock extraction reads: every device key, and every reveal key that reads (none may).
    func readableKeys() throws -> (device: [BoxKeyPair], reveal: [BoxKeyPair]) {
        #expect(try store.deviceLockState() == .locked, "the examiner works on a locked phone unlocked once since it started")
        func found(_ ids: [KeyID], _ provider: any DeviceKeyProvider) -> [BoxKeyPair] {
            ids.compactMap { if case let .found(pair) = provider.lookUpKey(id: $0) { return pair } else { return nil } }
        }
        let device = found(try DeviceKeyring(store: store).list().map(\.keyID), DeviceKeyring(store: store))
        let reveal = found(try RevealKeyring(store: store).list().map(\.keyID), RevealKeyring(store: store))
        return (device, reveal)
    }

    /// Every file of the device (the notification store, the pending queue, the replay cache, the outbox, keychain
    /// items as files), as text, with every sealed box found in them opened with `keys`, recursively.
    func recoverable(with keys: [BoxKeyPair]) throws -> String {
        var corpus: [String] = []
        let files = FileManager.default.enumerator(at: directory, includingPropertiesForKeys: nil)?.compactMap { $0 as? URL } ?? []
        for file in files where (try? file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile) == true {
            let bytes = try [UInt8](Data(contentsOf: file))
            corpus.append(String(decoding: bytes, as: UTF8.self))
            if let value = try? JSON.parse(bytes) { open(value, keys, into: &corpus, depth: 0) }
        }
        return corpus.joined(separator: "\n")
    }

    private func open(_ value: JSONValue, _ keys: [BoxKeyPair], into corpus: inout [String], depth: Int) {
        guard depth < 8 else { return }
        switch value {
        case let .object(o): for (_, v) in o { open(v, keys, into: &corpus, depth: depth) }
        case let .array(a): for v in a { open(v, keys, into: &corpus, depth: depth) }
        case let .string(text):
            // Every string long enough to hold a sealed box (48 bytes: 64 base64 characters), as an envelope and as a
            // bare box in either base64 alphabet.
            guard text.count >= 64 else { return }
            var boxes: [[UInt8]] = []
            if let envelope = try? Envelope(base64: text) { boxes.append(envelope.sealedBox) }
            if let raw = Data(base64Encoded: text) { boxes.append([UInt8](raw)) }
            let urlSafe = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            if let raw = Data(base64Encoded: urlSafe + String(repeating: "=", count: (4 - urlSafe.count % 4) % 4)) { boxes.append([UInt8](raw)) }
            for key in keys {
                for box in boxes {
                guard let plaintext = try? SealedBox.open(bytes: box, with: key) else { continue }
                let bytes = plaintext.unsafeCopyToArray()
                corpus.append(String(decoding: bytes, as: UTF8.self))
                // The inner body is JSON after the 3-byte header: look inside it for nested envelopes (a reveal member).
                if bytes.count > 3, let length = try? ISO7816Padding.unpaddedLength(of: plaintext),
                   let parts = try? InnerMessage.split(plaintext, length: length),
                   let body = try? parts.body.withSpan({ span throws(JSONError) in try JSON.parse(span) }) {
                    open(body, keys, into: &corpus, depth: depth + 1)
                } else if let value = try? JSON.parse(bytes) {
                    open(value, keys, into: &corpus, depth: depth + 1)   // a sealed pending entry: JSON itself
                }
                }
            }
        default: return
        }
    }
}

@Suite("Reveal: a forensic examiner with the after-first-unlock keys recovers nothing hidden (revision 2)", .timeLimit(.minutes(10)))
struct ForensicExaminerTests {
    /// What each case hides from iOS's store: the hidden strings, and an attachment's key.
    /// Title, subtitle, body, the thread, the `data` key and value (and the attachment keys, added by the test).
    static func hidden(_ policy: PreviewPolicy, reveal: Bool) -> [String] {
        if policy == .hidden { return ["Agent K", "Field report", "eagle", "ops-7", "conversation", "c-42"] }
        if reveal { return ["Agent K", "Field report", "eagle", "conversation", "c-42"] }   // the held alert keeps its thread (§3)
        if policy == .title { return ["eagle", "conversation", "c-42"] }   // the thread goes with the title
        return []  // full: the user chose to show the text; only the attachment key is hidden
    }

    /// Examines the locked phone: nothing hidden may be recovered with the after-first-unlock keys.
    func examine(_ phone: RevealPhone, hidden: [String], state: String) throws {
        let examiner = ForensicExaminer(store: phone.store, directory: phone.directory)
        let keys = try examiner.readableKeys()
        #expect(!keys.device.isEmpty, "the device key is readable after first unlock")
        #expect(keys.reveal.isEmpty, "no reveal key reads on a locked phone")
        let recovered = try examiner.recoverable(with: keys.device)
        for secret in hidden {
            let found = recovered.contains(secret)
            #expect(!found, "recovered the hidden string \(secret.count > 12 ? "(attachment key)" : secret) (\(state))")
        }
    }

    /// The message that arrives before the first unlock: every string its own, so that the examiner can tell it apart.
    static let beforeFirstUnlock = SecretMessage(title: "Night courier", subtitle: "Dispatch nine", body: "The owl flies at dawn.",
                                                 threadID: "night-thread", badge: 4, data: JSONObject([("night-key", .string("night-value"))]))

    func message(_ phone: RevealPhone, reveal: Bool, id: String, text: SecretMessage = RevealRig.text) throws -> ([UInt8], String) {
        var message = text
        message.messageID = id
        message.receiptURL = "https://push.example.com/r"
        let (_, descriptor) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 300), type: "image/png",
                                              url: "https://cdn.example/\(id)")
        message.attachments = [descriptor]
        if reveal { message.reveal = .standard }
        let now = phone.now
        let key = Base64.encodePublic(descriptor.key.unsafeCopyToArray())
        return (try NotificationSender(clock: { now }).seal(message, to: phone.record).payload, key)
    }

    @Test("every preview policy, reveal and ordinary messages, on arrival and from before first unlock",
          arguments: PreviewPolicy.allCases, [false, true])
    func nothingHiddenRecovered(_ policy: PreviewPolicy, _ reveal: Bool) async throws {
        let phone = try RevealPhone()
        try phone.device.setPreviews(policy)
        let courier = phone.device.receiptCourier(transport: nil)
        // One message while the phone is unlocked, one while locked after first unlock, one before first unlock.
        let (first, key1) = try message(phone, reveal: reveal, id: "m-unlocked")
        _ = await phone.device.deliver(first, requestIdentifier: "REQ-1", receipts: courier)
        _ = try phone.store.lock()
        let (second, key2) = try message(phone, reveal: reveal, id: "m-locked")
        _ = await phone.device.deliver(second, requestIdentifier: "REQ-2", receipts: courier)
        _ = try phone.store.reboot()
        let (third, key3) = try message(phone, reveal: reveal, id: "m-bfu", text: Self.beforeFirstUnlock)
        let bfu = await phone.device.deliver(third, requestIdentifier: "REQ-3", receipts: courier)
        #expect(bfu.reason == .keychainLocked)
        // Unlocked, locked again, seized before anything processed the queue (revision 3): the queued message is sealed
        // to the reveal key, so every one of its strings is hidden whatever the policy.
        _ = try phone.store.unlock()
        _ = try phone.store.lock()
        #expect(try phone.device.pendingQueue.status().pending == 1)
        let everything = ["Night courier", "Dispatch nine", "owl flies", "night-thread", "night-key", "night-value", key3]
        try examine(phone, hidden: Self.hidden(policy, reveal: reveal) + [key1, key2] + everything,
                    state: "queue not processed, policy \(policy.rawValue), reveal \(reveal)")
        // The control: with the reveal key (an unlocked phone) the examiner opens the queued entry.
        _ = try phone.store.unlock()
        #expect(try ForensicExaminer(store: phone.store, directory: phone.directory).recoverableUnlocked().contains("owl flies"),
                "the control: the reveal key opens the pending entry")
        _ = try phone.store.lock()

        _ = try phone.store.unlock()
        #expect(await phone.device.processPendingQueue(receipts: courier).replaced == 1)
        _ = try phone.store.lock()
        try examine(phone, hidden: Self.hidden(policy, reveal: reveal) + [key1, key2, key3],
                    state: "queue processed, policy \(policy.rawValue), reveal \(reveal)")
        let examiner = ForensicExaminer(store: phone.store, directory: phone.directory)
        // Every notification in the store is there (the examiner's failure is not an empty store).
        #expect(try NotificationCenterStore(store: phone.store).entries().map(\.requestID).sorted() == ["REQ-1", "REQ-2", "REQ-3"])
        // And with the reveal key (an unlocked phone) the hidden text is there to read: the examiner's method works.
        if policy != .full || reveal {
            _ = try phone.store.unlock()
            let all = try examiner.recoverableUnlocked()
            #expect(all.contains("eagle"), "the control: the reveal key opens what the store holds")
        }
    }
}

extension ForensicExaminer {
    /// The control: what an extraction of an unlocked phone (reveal keys too) recovers.
    func recoverableUnlocked() throws -> String {
        func found(_ ids: [KeyID], _ provider: any DeviceKeyProvider) -> [BoxKeyPair] {
            ids.compactMap { if case let .found(pair) = provider.lookUpKey(id: $0) { return pair } else { return nil } }
        }
        let keys = found(try DeviceKeyring(store: store).list().map(\.keyID), DeviceKeyring(store: store))
            + found(try RevealKeyring(store: store).list().map(\.keyID), RevealKeyring(store: store))
        return try recoverable(with: keys)
    }
}
