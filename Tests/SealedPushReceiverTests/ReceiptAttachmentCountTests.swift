import Testing
import SealedPushWire
@testable import SealedPushReceiver

/// The receipt's `attachments` member comes from the delivery's attachment results (receipts v1 §2).
@Suite("Receipt attachment counts")
struct ReceiptAttachmentCountTests {
    @Test("present exactly when the delivery carries attachment results: attached count and failures by reason")
    func counts() {
        var delivery = ExtensionDelivery(content: NotificationContent(title: "t"), outcome: .decrypted)
        #expect(SecretMessageExtension.receiptAttachmentCounts(delivery) == nil)
        delivery.attachmentFailures = []
        #expect(SecretMessageExtension.receiptAttachmentCounts(delivery) == ReceiptAttachmentCounts(attached: 0, failed: [:]))
        delivery.content.attachments = [NotificationAttachment(identifier: "a1", url: "/tmp/a1.png")]
        delivery.attachmentFailures = [
            AttachmentFailure(identifier: "a2", reason: .attachmentUnavailable, detail: "x"),
            AttachmentFailure(identifier: "a3", reason: .attachmentUnavailable, detail: "x"),
            AttachmentFailure(identifier: "a4", reason: .attachmentCorrupt, detail: "x"),
        ]
        let counts = SecretMessageExtension.receiptAttachmentCounts(delivery)
        #expect(counts == ReceiptAttachmentCounts(attached: 1, failed: ["attachmentUnavailable": 2, "attachmentCorrupt": 1]))
        // As sent: {"attached":1,"failed":{"attachmentCorrupt":1,"attachmentUnavailable":2}}, accepted by a collector's parser.
        let message = ReceiptMessage.delivered(id: "m", token: ReceiptRequest.makeToken(), at: 1, attachments: counts)
        #expect(ReceiptMessage.parse(JSON.serialize(.object(message.jsonObject())))?.message == message)
    }
}
