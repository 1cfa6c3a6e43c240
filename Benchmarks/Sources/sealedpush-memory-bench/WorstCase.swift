import Foundation
import Logging
import SealedPushCrypto
import SealedPushDevice
import SealedPushKeychain
import SealedPushReceiver
import SealedPushSender
import SealedPushWire
import Synchronization
import SystemPackage

/// The worst case of issue #45 item 6: two requests at once in one extension process (two
/// `SecretMessageExtension` instances, as iOS runs them), one with a 10 MB image as 4 attachments of 2.5 MB fetched
/// in parallel and one text message, on a device whose receipt outbox and reveal v1 §9 pending queue are full.
///
/// The device is the simulated one (`SimulatedDevice` over a `KeychainStore`): its outbox (`ReceiptOutboxStore`) and
/// pending queue (`FilePendingQueue`) keep the same state types, bounds and JSON (`ReceiptOutboxState`,
/// `PendingQueueBounds`) as the App Group files `SealedPushApple` uses on iOS. Each instance runs the maintenance
/// the Apple base class runs before its content handler (`maintenanceBudget`, 2 s): the outbox flush and the pending
/// queue's pass, so both instances read the full files. The receipt transport accepts every POST without a network
/// (URLSession's own memory on iOS is not in the figure; the stores' reads, the JSON and the sealing are).
enum WorstCase {
    /// The store's directory under the fixtures.
    static let storeDirectory = "worst-store"
    /// The two request sets: cold (the first run of a process) and warm (the second; the replay cache would refuse
    /// the same messages twice).
    static let sets = ["cold", "warm"]
    /// The receipt origins the full outbox spreads over.
    static let origins = ["https://r1.example", "https://r2.example", "https://r3.example", "https://r4.example"]
    /// What the maintenance of one instance may take before its content handler (the Apple base class's value).
    static let maintenanceBudget = Duration.seconds(2)

    /// Makes the device, fills its outbox and pending queue to their bounds, and seals the two request sets to it.
    static func make(_ fixtures: Fixtures, quick: Bool, say: (String) -> Void) async throws {
        let root = fixtures.directory + "/" + storeDirectory
        let store = try KeychainStore(root: FilePath(root))
        let record = try DeviceKeys(store: store).generate()
        let sender = try NotificationSender()
        let device = SimulatedDevice(store: store)

        // A full pending queue: messages that came before the first unlock, each a payload near APNs's 4 KB, until
        // the queue drops its oldest (reveal v1 §9 bounds: 100 entries, 512 KiB).
        try store.reboot()
        let queue = FilePendingQueue(store: store)
        var n = 0
        let filler = String(repeating: "The courier wears a red scarf and asks for the weather in Lisbon. ", count: quick ? 4 : 40)
        while try queue.status().dropped == 0, n < 400 {
            n += 1
            var message = SecretMessage(title: "Agent \(n)", body: String(filler.prefix(quick ? 200 : 2_400)), threadID: "ops")
            message.expiry = .after(seconds: 86_400)
            let payload = try sender.seal(message, to: record).payload
            let result = await device.deliver(payload, requestIdentifier: "pending-\(n)", logger: quietLogger())
            guard result.reason == .keychainLocked else {
                throw MemoryBenchFailure("a message before the first unlock was \(result.outcome) (\(result.reason?.rawValue ?? "-")), not queued")
            }
            if quick, n == 12 { break }
        }
        let pending = try queue.status()
        say("worst case: pending queue \(pending.pending) entries (\(pending.dropped) dropped) after \(n) messages")
        try store.unlock()

        // A full outbox: receipts that could not be sent, with the longest URLs a body may carry, over four origins,
        // until the outbox drops its oldest (1000 entries or 512 KiB encoded).
        let outbox = ReceiptOutboxStore(store: store)
        var r = 0
        let now = store.clock.unixSeconds
        while try outbox.pending(now: now).dropped == 0, r < 1_000 {
            r += 1
            let origin = origins[r % origins.count]
            let url = origin + "/r/" + String(repeating: "a", count: ReceiptRequest.maximumURLLength - origin.utf8.count - 3)
            let token = Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 32))
            try outbox.enqueue(url: url, message: .delivered(id: "m-\(r)", token: token, at: now, attachments: nil), now: now)
            if quick, r == 20 { break }
        }
        let waiting = try outbox.pending(now: now)
        say("worst case: outbox \(waiting.entries.count) entries (\(waiting.dropped) dropped) after \(r) receipts")

        // The two requests of each set: the image in 4 attachments, and a text message; both ask for a receipt.
        let media = try DirectoryMediaStore(directory: fixtures.objects, baseURL: Fixtures.mediaBaseURL)
        for set in sets {
            var image = SecretMessage(title: "Agent K", body: "The photographs.", threadID: "ops")
            image.receiptURL = origins[0] + "/receipts"
            image.expiry = .after(seconds: 86_400)
            for (index, size) in attachmentSizes(quick: quick).enumerated() {
                try image.attach(MediaAttachment(source: .stream(size: size, label: "\(set)-\(index + 1).jpg", next: RandomJPEG(size: size).next),
                                                 type: "image/jpeg"), to: media)
            }
            try fixtures.write("worst-\(set)-image.json", try sender.seal(image, to: record).payload)
            var text = SecretMessage(title: "Agent K", body: "The eagle lands at noon (\(set)).", threadID: "ops")
            text.receiptURL = origins[1] + "/receipts"
            text.expiry = .after(seconds: 86_400)
            try fixtures.write("worst-\(set)-text.json", try sender.seal(text, to: record).payload)
        }
    }

    /// The attachments of the image request (bytes each).
    static func attachmentSizes(quick: Bool) -> [Int] {
        quick ? [100_000, 100_000, 100_000, 100_000] : [2_500_000, 2_500_000, 2_500_000, 2_500_000]
    }

    /// The operation measured: both requests of `set` delivered at once, each by its own instance; returns the
    /// outcomes ("decrypted" twice when all went well) and how many attachments the image got.
    static func operation(_ fixtures: Fixtures, fetcher: FileFetcher, output: String, quick: Bool)
        throws -> (_ set: String) async throws -> (outcomes: [String], attached: Int, maintenance: String) {
        let store = try KeychainStore(root: FilePath(fixtures.directory + "/" + storeDirectory), create: false)
        let device = SimulatedDevice(store: store)
        let sizes = attachmentSizes(quick: quick)
        return { set in
            let image = try fixtures.request("worst-\(set)-image.json", identifier: "worst-\(set)-image")
            let text = try fixtures.request("worst-\(set)-text.json", identifier: "worst-\(set)-text")
            let transport = AcceptingTransport()
            func configuration(_ attachments: AttachmentPipeline?) -> SecretMessageExtension.Configuration {
                var c = device.extensionConfiguration(logger: quietLogger(), attachments: attachments)
                var courier = ReceiptCourier(transport: transport, outbox: ReceiptOutboxStore(store: store))
                courier.flushGate = .forOutbox(at: store.root.string)   // as SealedPushSettings does: one per outbox
                c.receipts = courier
                c.maintenanceBudget = maintenanceBudget
                return c
            }
            let imageExtension = SecretMessageExtension(configuration: configuration(try AttachmentPipeline(fetcher: fetcher, directory: output)))
            let textExtension = SecretMessageExtension(configuration: configuration(nil))
            async let first = deliver(imageExtension, image)
            async let second = deliver(textExtension, text)
            let (a, b) = await (first, second)
            await imageExtension.finishBackgroundWork()
            await textExtension.finishBackgroundWork()
            let got = a.content.attachments.compactMap(\.size).map(Int.init)
            guard got == sizes else { throw MemoryBenchFailure("worst case: attached \(got) of \(sizes): \(a.attachmentFailures ?? [])") }
            let outcomes = [a, b].map { $0.outcome == .decrypted ? "decrypted" : "\($0.outcome)" }
            let left = (try? FilePendingQueue(store: store).status().pending) ?? -1
            let outboxLeft = (try? ReceiptOutboxStore(store: store).pending(now: store.clock.unixSeconds).entries.count) ?? -1
            return (outcomes, got.count, "\(transport.posts) receipts posted, \(outboxLeft) left in the outbox; \(left) pending entries left")
        }
    }

    static func deliver(_ e: SecretMessageExtension, _ request: NotificationRequest) async -> ExtensionDelivery {
        await withCheckedContinuation { continuation in e.didReceive(request) { continuation.resume(returning: $0) } }
    }
}

/// A receipt transport that accepts every POST at once, counting them (no network in the figure).
final class AcceptingTransport: ReceiptTransport {
    private let count = Mutex(0)
    var posts: Int { count.withLock { $0 } }
    func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        count.withLock { $0 += 1 }
        return .accepted(status: 202)
    }
}
