import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// A device with a device key and a reveal key, and its record.
func makeRevealDevice() -> (pair: BoxKeyPair, reveal: BoxKeyPair, record: DeviceKeyRecord) {
    let pair = BoxKeyPair.generate()
    let reveal = BoxKeyPair.generate()
    return (pair, reveal, DeviceKeyRecord(publicKey: pair.publicKey, createdAt: nil, reveal: RevealKeyRecord(publicKey: reveal.publicKey)))
}

/// Sealing a reveal message (reveal v1 §2), checked byte by byte against the spec's structure.
@Suite("Sender: reveal messages")
struct RevealSenderTests {
    static let text = SecretMessage(title: "Agent K", subtitle: "Field report", body: "The eagle lands at noon.", threadID: "ops-7",
                                    category: "SECRET_REPLY", badge: 3, sound: "chime.caf", data: JSONObject([("conversation", .string("c-42"))]))

    static func revealMessage(_ base: SecretMessage = text) -> SecretMessage {
        var m = base
        m.reveal = .standard
        return m
    }

    @Test("to Apple an ordinary payload; the device-key body carries the placeholder alert and the reveal envelope, nothing secret")
    func structure() throws {
        let device = makeRevealDevice()
        let sender = try makeSender()
        var message = Self.revealMessage()
        message.receiptURL = "https://receipts.example.com/r"
        let sealed = try sender.seal(message, to: device.record)
        #expect(sealed.revealKeyID == device.record.reveal?.keyID)
        #expect(sealed.keyID == device.record.keyID)

        // The payload: exactly the shape of an ordinary message, the usual placeholder, mutable-content 1.
        let ordinary = try sender.seal(Self.text, to: device.record)
        let prefix = #"{"aps":{"alert":{"title":"Secret Message!","body":"(Encrypted)"},"mutable-content":1,"category":"SECRET"},"ENCRYPTED_DATA":""#
        #expect(sealed.payloadString.hasPrefix(prefix))
        #expect(ordinary.payloadString.hasPrefix(prefix))
        #expect(try payloadObject(sealed).members.map(\.key) == ["aps", "ENCRYPTED_DATA"])
        #expect(sealed.payload.count <= WireFormat.maxPayloadBytes)
        #expect(WireFormat.paddingBuckets.contains(sealed.paddedLength), "bucket padding as for any message")

        // The outer body, sealed to the device key.
        let outer = try openSealed(sealed, with: [device.pair])
        #expect(outer.keyID == device.record.keyID)
        #expect(outer.rawBody.members.map(\.key) == ["kid", "id", "iat", "exp", "alert", "thread-id", "category", "sound", "badge",
                                                     "receipt", "reveal"])
        #expect(outer.body.alert == MessageBody.Alert(title: "Secret Message!", body: "Press and hold to read"))
        #expect(outer.body.threadID == "ops-7")
        #expect(outer.body.category == "SECRET_REPLY")
        #expect(outer.body.sound == "chime.caf")
        #expect(outer.body.badge == 3)
        #expect(outer.body.receipt?.url == "https://receipts.example.com/r")
        #expect(outer.body.data == nil && outer.body.attachments == nil)
        let outerText = String(decoding: JSON.serialize(.object(outer.rawBody)), as: UTF8.self)
        for secret in ["Agent K", "Field report", "eagle", "c-42", "conversation"] {
            #expect(!outerText.contains(secret), "\(secret) is in the body sealed to the device key")
        }

        // The reveal envelope, byte by byte: 0x01 || reveal key id || sealed box of the padded inner message.
        let envelopeBytes = try Base64.decodePublic(try #require(outer.body.reveal))
        #expect(envelopeBytes[0] == 0x01)
        #expect(Array(envelopeBytes[1..<9]) == device.record.reveal!.keyID.bytes)
        let box = Array(envelopeBytes[9...])
        #expect(throws: (any Error).self) { try SealedBox.open(bytes: box, with: device.pair) }
        let padded = try SealedBox.open(bytes: box, with: device.reveal).unsafeCopyToArray()
        #expect(padded.count == box.count - SealedBox.overhead)
        #expect(padded.count == 256, "padded as wire v1 pads: the smallest bucket above the inner message (reveal v1 §2, revision 2)")
        #expect(padded[0] == 0x00, "unsigned, as the outer message")
        let length = Int(padded[1]) << 8 | Int(padded[2])
        #expect(padded[3 + length] == 0x80 && padded[(3 + length + 1)...].allSatisfy { $0 == 0 }, "ISO/IEC 7816-4 padding after the inner message")
        let inner = try #require(try JSON.parse(Array(padded[3..<(3 + length)])).objectValue)
        #expect(inner.members.map(\.key) == ["kid", "id", "iat", "exp", "alert", "data"])
        #expect(inner["kid"]?.stringValue == device.record.reveal!.keyID.hex)
        #expect(inner["id"] == outer.rawBody["id"])
        #expect(inner["iat"] == outer.rawBody["iat"])
        #expect(inner["exp"] == outer.rawBody["exp"])
        #expect(inner["alert"] == .object(JSONObject([("title", .string("Agent K")), ("subtitle", .string("Field report")),
                                                      ("body", .string("The eagle lands at noon."))])))
        #expect(inner["data"] == .object(JSONObject([("conversation", .string("c-42"))])))

        // The receiver's ordered checks open it with the reveal key, and not with the device key.
        let revealed = try MessageOpener(keys: InMemoryKeys([device.reveal])).open(encryptedData: outer.body.reveal!, now: testNow)
        #expect(revealed.body.alert.body == "The eagle lands at noon.")
        #expect(revealed.keyID == device.record.reveal!.keyID)
        #expect(throws: OpenFailure.self) { try MessageOpener(keys: InMemoryKeys([device.pair])).open(encryptedData: outer.body.reveal!, now: testNow) }
    }

    @Test("a signed reveal message is signed twice: the outer body to the device key, the inner to the reveal key")
    func signed() throws {
        let device = makeRevealDevice()
        let signer = SigningKeyPair.generate()
        let sealed = try makeSender(signer: signer).seal(Self.revealMessage(), to: device.record)
        let outer = try openSealed(sealed, with: [device.pair], trusting: [signer.publicKey], requireSignature: true)
        #expect(outer.signedBy == signer.keyID)
        let policy = ReceiverPolicy(trustedSenders: [signer.publicKey], requireSignature: true)
        let inner = try MessageOpener(keys: InMemoryKeys([device.reveal]), policy: policy).open(encryptedData: outer.body.reveal!, now: testNow)
        #expect(inner.signedBy == signer.keyID)
        #expect(inner.rawBody.members.map(\.key) == ["kid", "id", "iat", "exp", "alert", "data", "sender"])
    }

    @Test("a remote signer signs both bodies through sealAsync")
    func remoteSigner() async throws {
        let device = makeRevealDevice()
        let signer = RemoteSigner()
        let sender = try makeSender(signer: signer)
        let sealed = try await sender.sealAsync(Self.revealMessage(), to: device.record)
        #expect(await signer.requests == 2)
        let outer = try openSealed(sealed, with: [device.pair], trusting: [signer.publicKey], requireSignature: true)
        let policy = ReceiverPolicy(trustedSenders: [signer.publicKey], requireSignature: true)
        let inner = try MessageOpener(keys: InMemoryKeys([device.reveal]), policy: policy).open(encryptedData: outer.body.reveal!, now: testNow)
        #expect(inner.body.alert.title == "Agent K")
        let plain = makeDevice()
        await #expect(throws: SenderError.noRevealKey(deviceKeyID: plain.record.keyID.hex)) {
            try await sender.sealAsync(Self.revealMessage(), to: plain.record)
        }
    }

    @Test("a record without a reveal key is refused, saying so; the text is never sealed to the device key")
    func noRevealKey() throws {
        let plain = makeDevice()
        let sender = try makeSender()
        let error = SenderError.noRevealKey(deviceKeyID: plain.record.keyID.hex)
        #expect(throws: error) { try sender.seal(Self.revealMessage(), to: plain.record) }
        #expect(throws: error) { try sender.seal(Self.revealMessage(), to: plain.record.publicKey) }
        #expect(error.description.contains("has no reveal key"))
        // A fan-out seals to the devices that can receive it and refuses the others.
        let capable = makeRevealDevice()
        let results = sender.seal(Self.revealMessage(), toEach: [capable.record, plain.record])
        #expect((try? results[0].result.get())?.revealKeyID == capable.record.reveal?.keyID)
        #expect(throws: error) { try results[1].result.get() }
    }

    @Test("too large: the error states the largest text that fits, and a text of exactly that size seals")
    func largestText() throws {
        let device = makeRevealDevice()
        for signer in [nil, SigningKeyPair.generate()] {
            let sender = try makeSender(signer: signer)
            var message = Self.revealMessage(SecretMessage(body: String(repeating: "x", count: 3000), threadID: "t"))
            let error = try #require(throws: SenderError.self) { try sender.seal(message, to: device.record) }
            guard case let .revealTooLarge(size, limit, largest) = error else { Issue.record("got \(error)"); continue }
            #expect(limit == 4096 && size > 4096)
            #expect(largest == sender.largestRevealText(message))
            #expect(error.description.contains("at most \(largest) bytes"))
            message.body = String(repeating: "x", count: largest)
            let fits = try sender.seal(message, to: device.record)
            #expect(fits.payload.count <= 4096)
            message.body = String(repeating: "x", count: largest + 1)
            #expect(throws: SenderError.self) { try sender.seal(message, to: device.record) }
            // The nesting costs room: the same text fits in an ordinary message.
            message.reveal = nil
            #expect(try sender.seal(message, to: device.record).payload.count <= 4096)
        }
    }

    @Test("custom reveal alerts are carried; an alert without text is refused")
    func customAlert() throws {
        let device = makeRevealDevice()
        var message = Self.text
        message.reveal = SecretMessage.Reveal(alert: .init(title: "New message", body: "Hold to read"))
        let outer = try openSealed(try makeSender().seal(message, to: device.record), with: [device.pair])
        #expect(outer.body.alert == MessageBody.Alert(title: "New message", body: "Hold to read"))
        message.reveal = SecretMessage.Reveal(alert: .init(title: ""))
        #expect {
            try makeSender().seal(message, to: device.record)
        } throws: { error in
            guard case .invalidReveal? = error as? SenderError else { return false }
            return true
        }
    }
}

@Suite("Sender: batch lines with \"reveal\": true")
struct RevealBatchTests {
    func line(_ record: DeviceKeyRecord, _ extra: String) -> [UInt8] {
        Array(#"{"to":\#(String(decoding: record.jsonBytes, as: UTF8.self)),"body":"The eagle lands."\#(extra)}"#.utf8)
    }

    @Test("a reveal line seals a reveal message; a record without a reveal key fails with the reason; a non-boolean is refused")
    func revealLines() throws {
        let device = makeRevealDevice()
        let sealer = JSONLSealer(sender: try makeSender())
        var out: [UInt8] = []
        #expect(sealer.process(line: line(device.record, #","reveal":true"#).span, number: 1, into: &out) == .sealed)
        let result = try #require(try JSON.parse(Array(out.dropLast())).objectValue)
        let payload = try #require(result["payload"]?.objectValue)
        let encrypted = try #require(payload[WireFormat.encryptedDataKey]?.stringValue)
        let outer = try MessageOpener(keys: InMemoryKeys([device.pair])).open(encryptedData: encrypted, now: testNow)
        #expect(outer.body.reveal != nil && outer.body.alert.body == "Press and hold to read")
        #expect(!String(decoding: JSON.serialize(.object(outer.rawBody)), as: UTF8.self).contains("eagle"))

        let plain = makeDevice()
        out = []
        #expect(sealer.process(line: line(plain.record, #","reveal":true"#).span, number: 2, into: &out) == .failed)
        #expect(String(decoding: out, as: UTF8.self).contains("has no reveal key"))
        #expect(try JSONLSealer.request(from: try #require(try JSON.parse(line(plain.record, #","reveal":false"#)).objectValue)).message.reveal == nil)
        #expect(throws: SenderError.invalidRequest("member 'reveal' must be true or false")) {
            try JSONLSealer.request(from: try #require(try JSON.parse(line(device.record, #","reveal":1"#)).objectValue))
        }
    }
}

/// Reveal v1 revision 2, §2: size must not tell a reveal message apart. The `reveal` envelope is padded as wire v1
/// pads, and an ordinary message to a record with `reveal` takes the bucket of its reveal form.
@Suite("Sender: reveal sizes (reveal v1 §2, revision 2)")
struct RevealSizeTests {
    static let receiptURL = "https://receipts.example.com/r"
    static let data = JSONObject([("conversation", .string("c-42"))])

    /// The message of one size-test case: `text` as the body, with a receipt and data when asked.
    static func message(_ text: String, receipt: Bool, data: Bool) -> SecretMessage {
        var m = SecretMessage(body: text, threadID: "ops-7")
        if receipt { m.receiptURL = receiptURL }
        if data { m.data = Self.data }
        return m
    }

    /// The same message in reveal form (the default reveal alert).
    static func revealForm(_ message: SecretMessage) -> SecretMessage {
        var m = message
        m.reveal = .standard
        return m
    }

    /// Text lengths from 1 to 40 bytes past the largest reveal text, for a sender and a message shape: a reveal message
    /// and its ordinary form to the same record reach Apple at the same size (or, when the reveal form does not fit, the
    /// ordinary message is padded as to a record without `reveal`). Every 16th length is sealed, and every length in
    /// between wherever either size or the `reveal` envelope's padded length changed (the bucket edges of both
    /// envelopes, the limit). Returns how many lengths had a reveal form, and the mismatches found.
    static func sweep(_ sender: NotificationSender, trusting: [SigningPublicKey] = [], receipt: Bool, data: Bool,
                      text: (Int) -> String = { String(repeating: "x", count: $0) }) throws -> (checked: Int, mismatches: [String]) {
        let device = makeRevealDevice()
        let plain = makeDevice()
        let largest = sender.largestRevealText(Self.revealForm(Self.message("x", receipt: receipt, data: data)))
        #expect(largest > 0)
        var mismatches: [String] = []
        var checked = 0
        /// Seals both forms of the text of length `n`, compares them, and returns what changes at an edge.
        func sample(_ n: Int) throws -> [Int] {
            let message = Self.message(text(n), receipt: receipt, data: data)
            let ordinary = try sender.seal(message, to: device.record)
            guard let reveal = try? sender.seal(Self.revealForm(message), to: device.record) else {
                if n <= largest { mismatches.append("text \(n): no reveal form, yet the largest reveal text is \(largest)") }
                let toPlain = try sender.seal(message, to: plain.record)
                if ordinary.paddedLength != toPlain.paddedLength {
                    mismatches.append("text \(n) (no reveal form): P \(ordinary.paddedLength), to a record without reveal \(toPlain.paddedLength)")
                }
                return [ordinary.paddedLength]
            }
            checked += 1
            if ordinary.payload.count != reveal.payload.count || ordinary.paddedLength != reveal.paddedLength {
                mismatches.append("text \(n): ordinary \(ordinary.payload.count) (P \(ordinary.paddedLength)), reveal \(reveal.payload.count) (P \(reveal.paddedLength))")
            }
            let outer = try openSealed(reveal, with: [device.pair], trusting: trusting)
            return [ordinary.paddedLength, reveal.paddedLength, try Self.revealPaddedLength(outer)]
        }
        let end = largest + 40
        var n = 1
        var previous = try sample(n)
        while n < end {
            let next = min(n + 16, end)
            let current = try sample(next)
            if current != previous { for m in (n + 1)..<next { _ = try sample(m) } }
            (n, previous) = (next, current)
        }
        return (checked, mismatches)
    }

    @Test("every text length, signed and unsigned, with and without receipt and data: a message and its reveal form have the same payload size",
          arguments: [false, true])
    func sameSize(signed: Bool) throws {
        let signer = signed ? SigningKeyPair.generate() : nil
        let sender = try makeSender(signer: signer)
        for (receipt, data) in [(false, false), (true, false), (false, true), (true, true)] {
            let (checked, mismatches) = try Self.sweep(sender, trusting: signer.map { [$0.publicKey] } ?? [], receipt: receipt, data: data)
            #expect(checked > 100, "the sweep covers the bucket edges and the limit")
            #expect(mismatches.isEmpty, "signed \(signed), receipt \(receipt), data \(data): \(mismatches.count) sizes differ, first: \(mismatches.prefix(5))")
        }
    }

    @Test("texts that JSON escapes (quotes, newlines, non-ASCII) make the same sizes too")
    func escapedText() throws {
        let sender = try makeSender()
        let unit = Array("é\"\n✓a".unicodeScalars)
        let (checked, mismatches) = try Self.sweep(sender, receipt: true, data: true) { n in
            var s = String.UnicodeScalarView()
            for i in 0..<(n / 3 + 1) { s.append(unit[i % unit.count]) }
            return String(s)
        }
        #expect(checked > 50)
        #expect(mismatches.isEmpty, "\(mismatches.count) sizes differ, first: \(mismatches.prefix(5))")
    }

    @Test("a remote signer (sealAsync) makes the same sizes")
    func remoteSigner() async throws {
        let device = makeRevealDevice()
        let sender = try makeSender(signer: RemoteSigner())
        for n in [1, 24, 200, 400, 700, 1000, 1500, sender.largestRevealText(Self.revealForm(Self.message("x", receipt: true, data: true)))] {
            let message = Self.message(String(repeating: "x", count: n), receipt: true, data: true)
            let ordinary = try await sender.sealAsync(message, to: device.record)
            let reveal = try await sender.sealAsync(Self.revealForm(message), to: device.record)
            #expect(ordinary.payload.count == reveal.payload.count, "text \(n)")
        }
    }

    @Test("the gap of revision 1 is gone: a short signed message with a receipt and its reveal form both reach Apple at 1570 bytes")
    func shortMessage() throws {
        let signer = SigningKeyPair.generate()
        let sender = try makeSender(signer: signer)
        let device = makeRevealDevice()
        var message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        message.receiptURL = Self.receiptURL
        let ordinary = try sender.seal(message, to: device.record)
        let reveal = try sender.seal(Self.revealForm(message), to: device.record)
        // Revision 1: the reveal message 1570 bytes, the same text sent ordinarily 886.
        #expect(reveal.payload.count == 1570 && reveal.paddedLength == 1024)
        #expect(ordinary.payload.count == 1570 && ordinary.paddedLength == 1024)
        // To a record without `reveal` nothing changes: the smallest bucket above the message.
        let plain = try sender.seal(message, to: makeDevice().record)
        #expect(plain.payload.count == 886 && plain.paddedLength == 512)
        // The ordinary message still opens with the device key, unchanged.
        let opened = try openSealed(ordinary, with: [device.pair], trusting: [signer.publicKey], requireSignature: true)
        #expect(opened.body.alert == MessageBody.Alert(title: "Agent K", body: "The eagle lands at noon."))
        #expect(opened.body.reveal == nil)
    }
}

extension RevealSizeTests {
    /// The padded length P of the `reveal` envelope in `outer` (its sealed box less the box overhead).
    static func revealPaddedLength(_ outer: OpenedMessage) throws -> Int {
        let bytes = try Base64.decodePublic(try #require(outer.body.reveal))
        return bytes.count - WireFormat.envelopeHeaderBytes - SealedBox.overhead
    }

    @Test("the reveal envelope is padded as wire v1 pads (a bucket, else the largest that fits the outer body) and opens and unpads with the reveal key",
          arguments: [false, true])
    func revealEnvelopePadding(signed: Bool) throws {
        let signer = signed ? SigningKeyPair.generate() : nil
        let sender = try makeSender(signer: signer)
        let device = makeRevealDevice()
        let trust = signer.map { [$0.publicKey] } ?? []
        let policy = ReceiverPolicy(trustedSenders: trust, requireSignature: signed)
        let largest = sender.largestRevealText(Self.revealForm(Self.message("x", receipt: true, data: true)))
        var seen = Set<Int>()
        for n in [1, 24, 100, 150, 180, 200, 400, 430, 460, 700, 900, 940, 980, 1200, 1500, 1800, 1900, 2000, largest - 1, largest] where n <= largest {
            let text = String(repeating: "x", count: n)
            let sealed = try sender.seal(Self.revealForm(Self.message(text, receipt: true, data: true)), to: device.record)
            let outer = try openSealed(sealed, with: [device.pair], trusting: trust, requireSignature: signed)
            let revealed = try MessageOpener(keys: InMemoryKeys([device.reveal]), policy: policy).open(encryptedData: outer.body.reveal!, now: testNow)
            #expect(revealed.body.alert.body == text)
            #expect(revealed.body.data == Self.data)
            #expect(revealed.signedBy == signer?.keyID)
            let innerCount = innerLength(of: revealed)
            let padded = try Self.revealPaddedLength(outer)
            seen.insert(padded)
            #expect(padded > innerCount)
            if WireFormat.paddingBuckets.contains(padded) {
                #expect(padded == WireFormat.paddingBuckets.first { $0 > innerCount }, "text \(n): the smallest bucket above \(innerCount)")
            } else {
                // No bucket above the inner message fits: the largest P that fits, so 3 bytes more (4 of base64) would not.
                #expect(padded < WireFormat.paddingBuckets.first { $0 > innerCount } ?? .max, "text \(n)")
                #expect(innerLength(of: outer) + 1 + 4 > sender.largestPaddedLength, "text \(n): P \(padded) is not the largest that fits")
                #expect(sealed.payload.count > WireFormat.maxPayloadBytes - 8, "text \(n)")
            }
            #expect(sealed.payload.count <= WireFormat.maxPayloadBytes)
        }
        // 2048 never fits: its base64 (2808 characters) and the outer body's other members exceed the largest outer P.
        #expect(seen.isSuperset(of: [256, 512, 1024]), "the sweep reached every bucket that can fit: \(seen.sorted())")
        #expect(seen.contains { !WireFormat.paddingBuckets.contains($0) }, "and the largest-that-fits fallback: \(seen.sorted())")
    }

    @Test("padding .none keeps its meaning (the reveal envelope and an ordinary message to a record with reveal: inner length + 1); .max pads both to the largest")
    func otherPolicies() throws {
        let device = makeRevealDevice()
        let message = SecretMessage(title: "Agent K", body: "The eagle lands at noon.")
        let none = try makeSender(padding: .none)
        let ordinary = try none.seal(message, to: device.record)
        #expect(ordinary.paddedLength == innerLength(of: try openSealed(ordinary, with: [device.pair])) + 1)
        let reveal = try openSealed(try none.seal(Self.revealForm(message), to: device.record), with: [device.pair])
        let revealed = try MessageOpener(keys: InMemoryKeys([device.reveal])).open(encryptedData: reveal.body.reveal!, now: testNow)
        #expect(try Self.revealPaddedLength(reveal) == innerLength(of: revealed) + 1)

        let max = try makeSender(padding: .max)
        let ordinaryMax = try max.seal(message, to: device.record)
        let revealMax = try max.seal(Self.revealForm(message), to: device.record)
        #expect(ordinaryMax.paddedLength == max.largestPaddedLength && revealMax.paddedLength == max.largestPaddedLength)
        #expect(ordinaryMax.payload.count == revealMax.payload.count)
    }

    @Test("a record without reveal pads an ordinary message to its own smallest bucket, as before")
    func noRevealRecordUnchanged() throws {
        let sender = try makeSender()
        let plain = makeDevice()
        for n in [1, 100, 300, 500, 800, 1000, 1500, 2000, 2500] {
            let sealed = try sender.seal(Self.message(String(repeating: "x", count: n), receipt: true, data: true), to: plain.record)
            let length = innerLength(of: try openSealed(sealed, with: [plain.pair]))
            #expect(sealed.paddedLength == PaddingPolicy.bucket.paddedLength(innerLength: length, payloadOverhead: sender.payloadOverhead), "text \(n)")
        }
    }
}
