import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Random strings over a pool that exercises JSON escaping and multi-byte UTF-8.
func randomText(_ rng: inout SeededGenerator, maxPieces: Int) -> String {
    let pool = ["a", "Z", "7", " ", "é", "ß", "日本語", "🔐", "👩‍👩‍👧", "e\u{301}", "שלום", "\"", "\\", "\n", "\t", "\u{1}", "\u{0}", "/", "\u{2028}", "{}"]
    let count = Int.random(in: 0...maxPieces, using: &rng)
    return (0..<count).map { _ in pool.randomElement(using: &rng)! }.joined()
}

@Suite("Sender: properties")
struct PropertyTests {
    @Test(arguments: [UInt64(0x5EED_0001), 0x5EED_0002, 0x5EED_0003])
    func randomMessagesRoundTrip(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        let devices = (0..<3).map { _ in makeDevice() }
        let signer = SigningKeyPair.generate()
        for iteration in 0..<120 {
            let policy = PaddingPolicy.allCases.randomElement(using: &rng)!
            let signed = Bool.random(using: &rng)
            let sender = try makeSender(padding: policy, signer: signed ? signer : nil)
            let device = devices.randomElement(using: &rng)!
            let long = Int.random(in: 0..<10, using: &rng) == 0
            var message = SecretMessage(
                title: Bool.random(using: &rng) ? randomText(&rng, maxPieces: 12) : nil,
                subtitle: [nil, "", randomText(&rng, maxPieces: 6)].randomElement(using: &rng)!,
                body: "b" + randomText(&rng, maxPieces: long ? 600 : 40))
            if Bool.random(using: &rng) { message.threadID = randomText(&rng, maxPieces: 4) }
            if Bool.random(using: &rng) { message.category = "CAT_" + randomText(&rng, maxPieces: 3) }
            if Bool.random(using: &rng) { message.badge = Int64.random(in: -5...Int64.max, using: &rng) }
            if Bool.random(using: &rng) { message.sound = randomText(&rng, maxPieces: 3) }
            if Bool.random(using: &rng) {
                message.data = JSONObject([("k", .string(randomText(&rng, maxPieces: 5))), ("n", .int(Int64.random(in: .min ... .max, using: &rng))),
                                           ("nested", .object(JSONObject([("a", .array([.bool(true), .null]))])))])
            }
            if Bool.random(using: &rng) { message.expiry = .after(seconds: Int64.random(in: 0...86_400 * 30, using: &rng)) }
            if Bool.random(using: &rng) { message.messageID = String(repeating: "i", count: Int.random(in: 1...64, using: &rng)) }

            let sealed: SealedNotification
            do {
                sealed = try sender.seal(message, to: device.record)
            } catch {
                // Only a message genuinely too large may be refused, and the refusal must name a size over the limit.
                guard case let .payloadTooLarge(size, limit)? = error.sealError else {
                    Issue.record("seed \(seed) iteration \(iteration): unexpected \(error)")
                    continue
                }
                #expect(size > limit && limit == 4096)
                continue
            }
            #expect(sealed.payload.count <= 4096, "seed \(seed) iteration \(iteration)")
            let opened = try openSealed(sealed, with: devices.map(\.pair), trusting: [signer.publicKey])
            #expect(opened.body.alert.title == message.title)
            #expect(opened.body.alert.subtitle == message.subtitle)
            #expect(opened.body.alert.body == message.body)
            #expect(opened.body.threadID == message.threadID)
            #expect(opened.body.category == message.category)
            #expect(opened.body.badge == message.badge)
            #expect(opened.body.sound == message.sound)
            #expect(opened.body.data == message.data)
            #expect(opened.body.expiresAt == (message.expiry ?? .defaultLifetime).resolved(issuedAt: testNow))
            if let id = message.messageID { #expect(opened.body.id == id) }
            #expect(opened.body.kid == device.record.keyID)
            #expect(opened.signedBy == (signed ? signer.keyID : nil))
            // P is what the policy picks for this inner length and this payload overhead.
            let expected = policy.paddedLength(innerLength: innerLength(of: opened), payloadOverhead: sender.payloadOverhead)
            #expect(opened.paddedLength == expected, "seed \(seed) iteration \(iteration) policy \(policy)")
            #expect(sealed.paddedLength == opened.paddedLength)
        }
    }
}

@Suite("Sender: padding and size limits")
struct SizeTests {
    /// Inner length of a message with title "t" and a body of `n` ASCII bytes (fixed id and clock, no expiry:
    /// the size tests seal with `.deliverOnce`).
    static func innerLength(bodyBytes n: Int, sender: NotificationSender, record: DeviceKeyRecord) throws -> Int {
        let body = MessageBody(kid: record.keyID, id: "m", issuedAt: testNow, alert: .init(title: "t", body: String(repeating: "a", count: n)))
        return 3 + JSON.serialize(.object(body.jsonObject)).count + (sender.signer == nil ? 0 : 64)
    }

    @Test func bucketSelection() throws {
        let device = makeDevice()
        let sender = try makeSender(padding: .bucket)
        let base = try Self.innerLength(bodyBytes: 0, sender: sender, record: device.record)
        let largest = sender.largestPaddedLength
        let cases: [(inner: Int, p: Int)] = [
            (base, 256), (255, 256), (256, 512), (511, 512), (512, 1024), (1023, 1024), (1024, 2048), (2047, 2048),
            (2048, largest), (2500, largest), (largest - 1, largest),
        ]
        for (inner, p) in cases {
            let n = inner - base
            #expect(try Self.innerLength(bodyBytes: n, sender: sender, record: device.record) == inner)
            let sealed = try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: n), expiry: .deliverOnce, messageID: "m"), to: device.record)
            #expect(sealed.paddedLength == p, "inner \(inner)")
            let opened = try openSealed(sealed, with: [device.pair])
            #expect(opened.paddedLength == p)
            #expect(sealed.payload.count <= 4096)
        }
        // The smallest message gets the 256 bucket under every overhead that leaves room for it.
        #expect(PaddingPolicy.bucket.paddedLength(innerLength: 10, payloadOverhead: sender.payloadOverhead) == 256)
        #expect(PaddingPolicy.none.paddedLength(innerLength: 10, payloadOverhead: sender.payloadOverhead) == 11)
        #expect(PaddingPolicy.max.paddedLength(innerLength: 10, payloadOverhead: sender.payloadOverhead) == largest)
    }

    /// The largest ASCII body (bytes) that seals, found by bisection.
    static func largestFittingBody(_ sender: NotificationSender, _ record: DeviceKeyRecord) -> Int {
        var lo = 0, hi = 8192  // lo fits, hi does not
        while hi - lo > 1 {
            let mid = (lo + hi) / 2
            if (try? sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: mid), expiry: .deliverOnce, messageID: "m"), to: record)) != nil {
                lo = mid
            } else {
                hi = mid
            }
        }
        return lo
    }

    @Test(arguments: [PaddingPolicy.none, .max, .bucket])
    func payloadOfExactly4096FitsAndOneMoreByteIsRefused(policy: PaddingPolicy) throws {
        let device = makeDevice()
        // Pick a placeholder title that makes the overhead a multiple of 4, so a payload can be exactly 4096 bytes.
        var title = "Secret Message!"
        while try makeSender(placeholder: Placeholder(title: title)).payloadOverhead % 4 != 0 { title += "!" }
        let sender = try makeSender(placeholder: Placeholder(title: title), padding: policy)
        let n = Self.largestFittingBody(sender, device.record)
        let fits = try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: n), expiry: .deliverOnce, messageID: "m"), to: device.record)
        #expect(fits.payload.count == 4096)
        #expect(try openSealed(fits, with: [device.pair]).body.alert.body?.utf8.count == n)
        do {
            _ = try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: n + 1), expiry: .deliverOnce, messageID: "m"), to: device.record)
            Issue.record("one more byte should not fit")
        } catch {
            #expect(error == .sealing(.payloadTooLarge(size: 4100, limit: 4096)))
            #expect(error.description.contains("4100 bytes"))
            #expect(error.description.contains("4096 bytes"))
        }
    }

    @Test func defaultPlaceholderLimit() throws {
        let device = makeDevice()
        for policy in PaddingPolicy.allCases {
            let sender = try makeSender(padding: policy)
            let n = Self.largestFittingBody(sender, device.record)
            let fits = try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: n), expiry: .deliverOnce, messageID: "m"), to: device.record)
            #expect(fits.payload.count <= 4096 && fits.payload.count > 4092)
            #expect(throws: SenderError.self) {
                try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: n + 1), expiry: .deliverOnce, messageID: "m"), to: device.record)
            }
            // Every policy has the same limit: it is set by the minimal envelope.
            #expect(n == Self.largestFittingBody(try makeSender(padding: .none), device.record))
        }
    }
}

@Suite("Sealed box: no aliasing, fast ephemeral keys")
struct SealedBoxTests {
    @Test func sealingNeverAliasesItsInput() throws {
        let pair = BoxKeyPair.generate()
        var rng = SeededGenerator(seed: 42)
        for length in [1, 2, 31, 32, 48, 255, 256, 1000] {
            let original = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let plaintext = SecureBytes(original)
            for reference in [false, true] {
                var box = reference ? try SealedBox.sealReference(plaintext, to: pair.publicKey)
                                    : try SealedBox.seal(plaintext, to: pair.publicKey)
                #expect(box.count == length + SealedBox.overhead)
                #expect(plaintext.unsafeCopyToArray() == original, "the plaintext changed while sealing")
                // A short ciphertext equals its plaintext by chance (1 in 256 for one byte, with fresh
                // random keys each run): only lengths where that chance is nil say anything.
                if length >= 16 { #expect(Array(box[SealedBox.overhead...]) != original, "the ciphertext equals the plaintext") }
                #expect(try SealedBox.open(bytes: box, with: pair) == plaintext)
                // Writing to the output leaves the input alone: they are distinct buffers.
                for i in box.indices { box[i] ^= 0xff }
                #expect(plaintext.unsafeCopyToArray() == original)
                #expect(throws: CryptoError.self) { try SealedBox.open(bytes: box, with: pair) }
            }
            // Fresh ephemeral keys every time.
            #expect(try SealedBox.seal(plaintext, to: pair.publicKey) != SealedBox.seal(plaintext, to: pair.publicKey))
        }
    }

    @Test func senderDoesNotChangeTheMessage() throws {
        let device = makeDevice()
        let message = SecretMessage(title: "T", body: "B", data: JSONObject([("x", .int(1))]))
        let copy = message
        let first = try makeSender().seal(message, to: device.record)
        let second = try makeSender().seal(message, to: device.record)
        #expect(message == copy)
        #expect(first.payload != second.payload)
    }

    @Test func fastEphemeralPathAlwaysOpensWithStockSealOpen() throws {
        var rng = SeededGenerator(seed: 7)
        for i in 0..<1500 {
            let pair = BoxKeyPair.generate()
            let length = Int.random(in: 1...300, using: &rng)
            let message = SecureBytes((0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) })
            let box = try SealedBox.seal(message, to: pair.publicKey)
            let opened = try SealedBox.open(bytes: box, with: pair)
            #expect(opened == message, "key \(i)")
            // The reference sealer agrees on format: its boxes open the same way.
            if i % 50 == 0 { #expect(try SealedBox.open(bytes: try SealedBox.sealReference(message, to: pair.publicKey), with: pair) == message) }
        }
    }
}
