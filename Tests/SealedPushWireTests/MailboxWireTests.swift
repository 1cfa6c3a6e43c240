import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Mailbox v1's wire pieces: the handle (§2), the body's `dlv` and the padding up to `max_message_bytes` (§4),
/// and the list's challenge (§7).
@Suite("Mailbox wire")
struct MailboxWireTests {
    @Test func aHandleRoundTripsAndEveryMalformedOneIsRefused() throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_019abc0f1d2e-x"))
        #expect(handle.token.utf8.count == 43)
        #expect(MailboxHandle(handle.description) == handle)
        #expect(!handle.redacted.contains(handle.token))
        let text = handle.description
        let longID = String(repeating: "a", count: 64)
        #expect(MailboxHandle("1.\(longID).\(handle.token)") != nil)
        for bad in ["", "1.", "1..", String(text.dropLast()), text + "A", "2" + String(text.dropFirst()), "1.\(longID)a.\(handle.token)",
                    "1.d.x.\(handle.token)", "1.d!.\(handle.token)", "1.d.\(String(repeating: "/", count: 43))",
                    "1.d.\(String(handle.token.dropLast()))=", String(repeating: "1", count: 200), "1.d.\(handle.token)\n"] {
            #expect(MailboxHandle(bad) == nil, "accepted: \(bad)")
        }
        // 43 characters whose last encodes bits past 32 bytes are not a token.
        #expect(!MailboxHandle.isToken(String(repeating: "A", count: 42) + "B"))
        #expect(MailboxHandle.isToken(String(repeating: "A", count: 43)))
    }

    @Test func paddingGrowsByPowersOfTwoUpToTheLimit() {
        #expect(MailboxSealing.paddedLength(innerLength: 0, maxMessageBytes: 4096) == 256)
        #expect(MailboxSealing.paddedLength(innerLength: 255, maxMessageBytes: 4096) == 256)
        #expect(MailboxSealing.paddedLength(innerLength: 256, maxMessageBytes: 4096) == 512)
        #expect(MailboxSealing.paddedLength(innerLength: 3000, maxMessageBytes: 4096) == 4096)
        #expect(MailboxSealing.paddedLength(innerLength: 4095, maxMessageBytes: 4096) == 4096)
        #expect(MailboxSealing.paddedLength(innerLength: 4096, maxMessageBytes: 4096) == nil)
        #expect(MailboxSealing.paddedLength(innerLength: 5000, maxMessageBytes: 6000) == 6000)
        #expect(MailboxSealing.paddedLength(innerLength: 4097, maxMessageBytes: 4096) == nil)
        #expect(MailboxSealing.paddedLength(innerLength: 40_000, maxMessageBytes: 65536) == 65536)
        #expect(MailboxSealing.paddedLength(innerLength: 20_000, maxMessageBytes: 32768) == 32768)
    }

    @Test func aMailboxEnvelopeOpensWithDlvAndTooLargeNamesTheLimit() throws {
        let device = BoxKeyPair.generate()
        let body = MessageBody(kid: device.keyID, id: "m-1", issuedAt: 1_795_000_000, alert: .init(title: "t", body: String(repeating: "x", count: 10_000)))
        let bytes = try MailboxSealing.bodyBytes(body, deliveryID: "d_1")
        let inner = InnerMessage.frame(body: bytes, recipient: device.keyID, signer: nil)
        let envelope = try MailboxSealing.seal(inner: inner, to: device.publicKey, maxMessageBytes: 16384)
        #expect(envelope.count == 1 + 8 + SealedBox.overhead + 16384)
        let opened = try MessageOpener(keys: InMemoryKeys([device]))
            .open(encryptedData: Base64.encode(envelope), now: 1_795_000_000)
        #expect(opened.rawBody["dlv"]?.stringValue == "d_1")
        #expect(mailboxBodyMatchesForTest(opened.rawBody, "d_1"))
        #expect(throws: MailboxSealError.tooLarge(size: inner.count, limit: 4096)) {
            try MailboxSealing.seal(inner: inner, to: device.publicKey, maxMessageBytes: 4096)
        }
    }

    @Test func theChallengeOpensOnlyWithTheDeviceKey() throws {
        let device = BoxKeyPair.generate()
        let secret = CryptoLibrary.randomBytes(count: 32)
        let sealed = Base64.encode(try SealedBox.seal(SecureBytes(secret), to: device.publicKey))
        #expect(MailboxChallenge.answer(sealed: sealed, with: device) == Base64.encodeURLSafeNoPadding(secret))
        #expect(MailboxChallenge.answer(sealed: sealed, with: BoxKeyPair.generate()) == nil)
        #expect(MailboxChallenge.answer(sealed: "not base64!", with: device) == nil)
        let short = Base64.encode(try SealedBox.seal(SecureBytes(secret.prefix(31)), to: device.publicKey))
        #expect(MailboxChallenge.answer(sealed: short, with: device) == nil)
    }
}

private func mailboxBodyMatchesForTest(_ body: JSONObject, _ id: String) -> Bool { body[MailboxHandle.bodyMember]?.stringValue == id }
