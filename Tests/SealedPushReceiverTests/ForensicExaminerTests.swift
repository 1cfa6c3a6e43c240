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
            guard text.count >= 64, let envelope = try? Envelope(base64: text) else { return }
            for key in keys {
                guard let plaintext = try? SealedBox.open(bytes: envelope.sealedBox, with: key) else { continue }
                let bytes = plaintext.unsafeCopyToArray()
                corpus.append(String(decoding: bytes, as: UTF8.self))
                // The inner body is JSON after the 3-byte header: look inside it for nested envelopes (a reveal member).
                if bytes.count > 3, let length = try? ISO7816Padding.unpaddedLength(of: plaintext),
                   let parts = try? InnerMessage.split(plaintext, length: length),
                   let body = try? parts.body.withSpan({ span throws(JSONError) in try JSON.parse(span) }) {
                    open(body, keys, into: &corpus, depth: depth + 1)
                }
            }
        default: return
        }
    }
}

@Suite("Reveal: a forensic examiner with the after-first-unlock keys recovers nothing hidden (revision 2)", .timeLimit(.minutes(10)))
struct ForensicExaminerTests {
    /// What each case hides from iOS's store: the hidden strings, and an attachment's key.
    static func hidden(_ policy: PreviewPolicy, reveal: Bool) -> [String] {
        if reveal || policy == .hidden { return ["Agent K", "Field report", "eagle", "c-42"] }
        if policy == .title { return ["eagle", "c-42"] }
        return []  // full: the user chose to show the text; only the attachment key is hidden
    }

    func message(_ phone: RevealPhone, reveal: Bool, id: String) throws -> ([UInt8], String) {
        var message = RevealRig.text
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
        let (third, key3) = try message(phone, reveal: reveal, id: "m-bfu")
        let bfu = await phone.device.deliver(third, requestIdentifier: "REQ-3", receipts: courier)
        #expect(bfu.reason == .keychainLocked)
        _ = try phone.store.unlock()
        #expect(await phone.device.processPendingQueue(receipts: courier).replaced == 1)
        _ = try phone.store.lock()

        let examiner = ForensicExaminer(store: phone.store, directory: phone.directory)
        let keys = try examiner.readableKeys()
        #expect(!keys.device.isEmpty, "the device key is readable after first unlock")
        #expect(keys.reveal.isEmpty, "no reveal key reads on a locked phone")
        let recovered = try examiner.recoverable(with: keys.device)
        for secret in Self.hidden(policy, reveal: reveal) + [key1, key2, key3] {
            #expect(!recovered.contains(secret), "recovered a hidden string (policy \(policy.rawValue), reveal \(reveal))")
        }
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
