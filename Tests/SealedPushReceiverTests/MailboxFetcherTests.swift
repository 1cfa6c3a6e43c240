import SealedPushCrypto
import SealedPushReceiver
import SealedPushWire
import Testing

/// What a mailbox fetch answer means to the device (mailbox v1 §3, §5).
@Suite("Mailbox fetch results")
struct MailboxFetcherTests {
    static func body(_ pairs: [(String, JSONValue)]) -> [UInt8] { JSON.serialize(.object(JSONObject(pairs))) }

    @Test func eachAnswerMapsToItsOutcome() {
        let envelope: [UInt8] = [1, 2, 3]
        #expect(MailboxFetchResult.from(status: 200, body: Self.body([("envelope", .string(Base64.encode(envelope))), ("message_id", "m"),
                                                                       ("expires_at", "2026-12-01T00:00:00Z")])) == .envelope(envelope, messageID: "m"))
        #expect(MailboxFetchResult.from(status: 410, body: Self.body([("reason", "retracted")])) == .retracted)
        #expect(MailboxFetchResult.from(status: 410, body: Self.body([("reason", "collected")])) == .collected)
        #expect(MailboxFetchResult.from(status: 410, body: Self.body([("reason", "expired")])) == .expired)
        for (status, body) in [(410, Self.body([("reason", "later")])), (404, Self.body([("type", "x")])), (200, Self.body([("envelope", "!!")])),
                               (200, Array("not json".utf8)), (503, [])] {
            guard case .failed = MailboxFetchResult.from(status: status, body: body) else {
                Issue.record("\(status) was not a failure")
                continue
            }
        }
    }

    @Test func dlvMustNameTheHandlesDelivery() throws {
        let handle = try #require(MailboxHandle.make(deliveryID: "d_1"))
        #expect(mailboxBodyMatches(JSONObject([("dlv", "d_1")]), handle: handle))
        #expect(!mailboxBodyMatches(JSONObject([("dlv", "d_2")]), handle: handle))
        #expect(!mailboxBodyMatches(JSONObject([]), handle: handle))
    }
}
