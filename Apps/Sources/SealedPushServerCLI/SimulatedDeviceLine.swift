package import SealedPushCLI
import SealedPushDevice
package import SealedPushKeychain
package import SealedPushReceiver
package import SealedPushWire
package import Logging
import ServiceLifecycle
import SealedPushDeviceHTTP

/// One simulated device of a local push service (`apns serve`, `fcm serve`, `webpush serve`), a service: the
/// messages its push service accepted are opened one at a time, in order, each printed as one JSON line on
/// stdout; on graceful shutdown (after the server stopped) it opens what was already accepted and returns.
///
/// At most `capacity` messages wait; past that the oldest waiting one is dropped (and logged), as a push service
/// keeps only the latest messages for a device it cannot reach.
package final class SimulatedDeviceLine<Message: Sendable>: Service, Sendable {
    /// The most messages waiting for one device, by default.
    package static var defaultCapacity: Int { 1000 }
    let store: KeychainStore
    /// The waiting messages (tests read it instead of running the line).
    package let stream: AsyncStream<Message>
    let continuation: AsyncStream<Message>.Continuation
    let logger: Logger
    let dropped: @Sendable (Message) -> Logger.Metadata
    let open: @Sendable (Message, DeviceRun.MediaFetching?, ReceiptCourier, Logger, (any MailboxFetcher)?) async -> [(String, JSONValue)]

    /// A line for the device over `store`: `open` opens one message and says what to print, with the fetcher of the
    /// device's mailbox URL (`device config --mailbox-url` as set when the line starts; `nil`: none); `dropped` names a
    /// dropped message in the log (never a whole token or a key); `label` names the logger.
    package init(store: KeychainStore, capacity: Int, label: String, dropped: @escaping @Sendable (Message) -> Logger.Metadata,
                 open: @escaping @Sendable (Message, DeviceRun.MediaFetching?, ReceiptCourier, Logger, (any MailboxFetcher)?) async -> [(String, JSONValue)]) {
        self.store = store
        self.logger = Logger(label: label)
        self.dropped = dropped
        self.open = open
        (stream, continuation) = AsyncStream.makeStream(of: Message.self, bufferingPolicy: .bufferingNewest(capacity))
    }

    /// Queues a message the push service accepted.
    package func enqueue(_ message: Message) {
        if case let .dropped(old) = continuation.yield(message) {
            logger.notice("a device's queue is full: dropped its oldest waiting message", metadata: dropped(old))
        }
    }

    package func run() async throws {
        let continuation = self.continuation
        await withGracefulShutdownHandler {
            await self.deliverAll()
        } onGracefulShutdown: {
            continuation.finish()
        }
    }

    /// The fetcher of the device's mailbox URL, or `nil` when none is set (or it cannot be used: logged).
    static func mailboxFetcher(_ store: KeychainStore, logger: Logger) -> HTTPMailboxFetcher? {
        do {
            guard let url = try SimulatedDevice(store: store).mailboxURL() else { return nil }
            return try HTTPMailboxFetcher(mailboxURL: url)
        } catch {
            logger.error("the device's mailbox URL cannot be used; mailbox pushes will fall back", metadata: ["error": "\(error)"])
            return nil
        }
    }

    /// Ends the line: what is waiting is still opened (tests read `stream` instead).
    package func finish() { continuation.finish() }

    private func deliverAll() async {
        // The devices of a local push service fetch from media servers on this machine (a development setup).
        let media = try? DeviceRun.MediaFetching(directory: nil, policy: .development)
        // One receipt transport and one mailbox fetcher (HTTP clients) for the device's whole life, not one per message.
        let mailbox = Self.mailboxFetcher(store, logger: logger)
        await ReceiptsTransportCLI.with { transport in
            let courier = SimulatedDevice(store: store).receiptCourier(transport: transport)
            for await message in stream {
                let line = await open(message, media, courier, logger, mailbox)
                StandardIO.writeOutput(JSON.serialize(.object(JSONObject(line))) + [0x0a])
            }
        }
        await mailbox?.shutdown()
        await media?.shutdown()
    }
}
