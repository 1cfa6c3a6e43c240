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

@Suite("Attachment write buffers follow the file's size")
struct AttachmentWriteBufferTests {
    @Test("a small file gets buffers of its size in whole 4 KiB pages; a large one 512 KiB")
    func sizes() {
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 0) == 4096)
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 1) == 4096)
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 4096) == 4096)
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 100_000) == 102_400)
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 524_288) == 524_288)
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 2_500_000) == 524_288)
        #expect(AttachmentPipeline.writeBufferSize(forFileOf: 10_000_000) == AttachmentPipeline.writeBufferSize)
    }
}
