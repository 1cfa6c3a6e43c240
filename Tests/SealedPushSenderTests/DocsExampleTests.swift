import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// The worked example of docs/wire-format.md §8 (keys made for that page only) stays true.
@Suite("docs/wire-format.md worked example")
struct DocsExampleTests {
    static let deviceSecretHex = "0b96256a12e1ae91d3ccacd4bf352f9d29f83b06128b07e746e24a6838d4c688"
    static let payload = #"{"aps":{"alert":{"title":"Secret Message!","body":"(Encrypted)"},"mutable-content":1,"category":"SECRET"},"ENCRYPTED_DATA":"AUkahI0L0bgaxClpTUytNglXyea7+fprhzRo0t3uMNym2DM5iEs3UDvRGApdIgMEbOu0HtFtKFzjXF0d62Dam+x7HjEO908DKKHpqheYFmMTPPJv1voG13pMnnu8C8nXTaL7heb3qNlb+B5SNcTx9KY4b78d/J6hAvd4LYVI3T3vtYrPQQOmR1qoXISFAHk2icmRGRshBwOnzHmOqTnLDEzSakL7UydpMHo0b/zzSEeDWTlS1aLY+zSby/GXYwRzZmu/PXQ4eeMnEUg9x8LqxSzKjYqayv6f8GgOpGjW87yP5pKnnQxKg4UroXqv4FF3G1Ey4w15uIBdt77Hne+rehdlBuIWydK308SKuro/2R+0JJhVA3eKjmv1jFqvoIrqJPdFpntahIWphgc8p7ide52oqnKBvFGTgw=="}"#

    @Test func examplePayloadOpens() throws {
        let pair = try BoxKeyPair(secretKey: SecureBytes(try Hex.decode(Self.deviceSecretHex)))
        #expect(Base64.encode(pair.publicKey.bytes) == "SPOotGwGzZ+t8MoOFvHQQZeKB1XTNK4r+31dKyZNkkc=")
        #expect(pair.keyID.hex == "491a848d0bd1b81a")
        #expect(Self.payload.utf8.count == 546)
        let sender = try NotificationSender()
        #expect(sender.payloadOverhead == 126)
        #expect(sender.largestPaddedLength == 2919)
        let root = try #require(try JSON.parse(Array(Self.payload.utf8)).objectValue)
        let data = try #require(root["ENCRYPTED_DATA"]?.stringValue)
        let opened = try MessageOpener(keys: InMemoryKeys([pair])).open(encryptedData: data, now: 1_795_000_000)
        #expect(opened.paddedLength == 256)
        #expect(String(decoding: JSON.serialize(.object(opened.rawBody)), as: UTF8.self)
            == #"{"kid":"491a848d0bd1b81a","id":"example-0001","iat":1795000000,"exp":1795003600,"alert":{"title":"Agent K","body":"The eagle lands at noon."},"thread-id":"ops-7"}"#)
    }

    @Test func exampleSignatureVerifies() throws {
        let signer = try SigningKeyPair(seed: SecureBytes(try Hex.decode("3f56273d9720925b9e2308ecb4869c8430190357ce5bec9c8c2fb6f0a9957cb2")))
        #expect(Base64.encode(signer.publicKey.bytes) == "bn5dfP6U5YOPzvo/7wl4NGa9fW8/uE/daIo71d4wB+4=")
        #expect(signer.keyID.hex == "de40c142a8a923a3")
        let body = #"{"kid":"491a848d0bd1b81a","id":"example-0001","iat":1795000000,"exp":1795003600,"alert":{"title":"Agent K","body":"The eagle lands at noon."},"thread-id":"ops-7","sender":"de40c142a8a923a3"}"#
        #expect(body.utf8.count == 190)
        let signed = InnerMessage.signedBytes(recipient: try #require(KeyID(hex: "491a848d0bd1b81a")), body: SecureBytes(Array(body.utf8)))
        let signature = try Hex.decode("82dc10f1cb7806375bdb4f93b83e4ccdcf8d04bfe02bb4a6d1784e8d6f6b289c9f119fa861e1573cb45ca4e64a4f6dc4a36d0695bcbcf4aef36a08c52d84530d")
        #expect(signer.publicKey.isValidSignature(signature, for: signed))
        #expect(signer.signature(for: signed) == signature)  // Ed25519 is deterministic
    }

    /// The largest body stated in the docs: 2805 bytes unsigned, 2713 signed with the default 7-day `exp`;
    /// 2822 and 2730 with `--deliver-once` (no `exp`) (body-only message, 22-character id, 10-digit iat,
    /// default placeholder).
    @Test func largestBodyWithDefaultPlaceholder() throws {
        let record = DeviceKeyRecord(publicKey: BoxKeyPair.generate().publicKey, createdAt: nil)
        let id = String(repeating: "x", count: 22)
        let cases: [(SigningKeyPair?, Expiry?, Int)] = [
            (nil, nil, 2805), (SigningKeyPair.generate(), nil, 2713), (nil, .deliverOnce, 2822), (SigningKeyPair.generate(), .deliverOnce, 2730),
        ]
        for (signer, expiry, limit) in cases {
            let sender = try NotificationSender(signer: signer, clock: { 1_795_000_000 })
            let fits = try sender.seal(SecretMessage(body: String(repeating: "a", count: limit), expiry: expiry, messageID: id), to: record)
            #expect(fits.payload.count <= 4096)
            #expect(throws: SenderError.self) {
                try sender.seal(SecretMessage(body: String(repeating: "a", count: limit + 1), expiry: expiry, messageID: id), to: record)
            }
        }
    }
}
