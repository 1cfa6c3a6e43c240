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
        #expect(padded.last == 0x80, "padded to the inner length + 1: the outer envelope's padding hides the size")
        #expect(padded[0] == 0x00, "unsigned, as the outer message")
        let length = Int(padded[1]) << 8 | Int(padded[2])
        #expect(3 + length + 1 == padded.count)
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
