import ArgumentParser
package import Logging
import SealedPushDevice
package import SealedPushKeychain
package import SealedPushReceiver
import SealedPushSender
import SealedPushWire

/// What a simulated Android device does with an FCM data message (platforms v1 §2, §5): reads `data`, checks FCM's
/// 4096-byte data budget, and opens `ENCRYPTED_DATA` with the receiver core an iPhone uses (`DeviceRun.deliver`: the
/// same extension, keys, trust, replay cache, receipts, attachments and notification store), handed an APNs-shaped
/// payload whose alert is the placeholder the app posts when a message cannot be opened (`Secret Message!` /
/// `(Encrypted)`: on Android the app must post a notification for every message it receives). Android has no
/// service extension, so `notMutable`, `noAlert`, `extensionCrashed` and `timeout` do not occur.
package enum FCMReceiving {
    /// FCM's limit on a message's data: the UTF-8 bytes of its keys and values (`FCMMessage.maximumDataBytes`; the
    /// light CLI does not link the FCM client).
    package static let maximumDataBytes = 4096
    /// How long the receiver may take for one message: a backstop for a hung attachment server, not a budget
    /// Android imposes (a data message's handler may run a job).
    package static let backstop: Duration = .seconds(300)
    /// The largest APNs-shaped payload the core is handed: the data's 4096 bytes may grow six-fold when escaped
    /// as JSON, and the placeholder is added around them. The data budget is checked before.
    static let wrappedPayloadLimit = 6 * maximumDataBytes + 1024

    /// The outcome of one message and, for one that was refused, why.
    package typealias Delivery = PlatformReceiving.Delivery


    /// An FCM message as the device reads it: its data members and collapse key.
    package struct DataMessage: Sendable {
        /// `message.data`, in order.
        package let data: [(key: String, value: String)]
        /// `message.android.collapse_key`, if any.
        package let collapseKey: String?
    }

    /// Why a file is not an FCM message the device could have received (safe to print).
    package struct Unreadable: Error, CustomStringConvertible {
        /// What is wrong and what to pass instead.
        package let description: String
    }

    /// Reads an FCM HTTP v1 request body (`{"message": {"token", "data": {…}, "android": {…}}}`, platforms v1 §2) as the
    /// device would receive it, or says why it is not one.
    package static func read(message bytes: [UInt8]) -> Result<DataMessage, Unreadable> {
        guard case let .object(root)? = try? JSON.parse(bytes, maxDepth: 16) else {
            return .failure(Unreadable(description: "the file is not a UTF-8 JSON object; pass an FCM message as platforms v1 §2 sends it: "
                            + #"{"message": {"token": …, "data": {"ENCRYPTED_DATA": …, "sealedpush": "1"}, "android": {…}}}"#))
        }
        guard case let .object(message)? = root["message"] else {
            return .failure(Unreadable(description: #"the file has no "message" object; pass an FCM message as platforms v1 §2 sends it: {"message": {"token": …, "data": {…}}}"#))
        }
        guard message["notification"] == nil else {
            return .failure(Unreadable(description: "the message has a notification block, which Android shows itself without the app: SealedPush sends data-only messages"))
        }
        guard case let .object(dataObject)? = message["data"] else {
            return .failure(Unreadable(description: #"the message has no "data" object (SealedPush sends {"ENCRYPTED_DATA": …, "sealedpush": "1"})"#))
        }
        var data: [(key: String, value: String)] = []
        for (key, value) in dataObject {
            guard case let .string(text) = value else {
                return .failure(Unreadable(description: "message.data's \"\(key.prefix(64))\" is not a string: FCM data values are strings"))
            }
            data.append((key, text))
        }
        let collapseKey = message["android"]?.objectValue?["collapse_key"]?.stringValue
        return .success(DataMessage(data: data, collapseKey: collapseKey))
    }

    /// Delivers an FCM message file's bytes (`read(message:)`) to the device over `store`, under the request identifier
    /// `requestIdentifier`, else the message's `android.collapse_key`, else a new one.
    package static func deliver(message bytes: [UInt8], store: KeychainStore, requestIdentifier: String?,
                                logger: Logger = Logger(label: "sealedpush.fcm-receiver"),
                                attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil,
                                mailbox: (any MailboxFetcher)? = nil) async -> Delivery {
        switch read(message: bytes) {
        case let .failure(problem):
            return rejected(.invalidPayload, problem.description, identifier: requestIdentifier ?? DeviceSimulator.newRequestIdentifier())
        case let .success(message):
            return await deliver(data: message.data, store: store, requestIdentifier: requestIdentifier ?? message.collapseKey,
                                 logger: logger, attachments: attachments, receipts: receipts, mailbox: mailbox)
        }
    }

    /// Delivers a data message's `data` to the device over `store` (its keys, trust and replay cache), under the
    /// notification request identifier `requestIdentifier` (`nil`: a new one; the local FCM passes the collapse key,
    /// so a message sent twice replaces its own notification, as on an iPhone).
    ///
    /// Data over 4096 bytes (keys and values) is `rejected`/`payloadTooLarge` (FCM would not have delivered it).
    /// Everything else goes through the receiver core.
    package static func deliver(data: [(key: String, value: String)], store: KeychainStore, requestIdentifier: String?,
                                logger: Logger = Logger(label: "sealedpush.fcm-receiver"),
                                attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil,
                                mailbox: (any MailboxFetcher)? = nil) async -> Delivery {
        let identifier = requestIdentifier ?? DeviceSimulator.newRequestIdentifier()
        let size = data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= maximumDataBytes else {
            return rejected(.payloadTooLarge, "the message's data is \(size) bytes (keys and values), over the \(maximumDataBytes) FCM delivers",
                            identifier: identifier)
        }
        // The receiver core takes an APNs payload: the placeholder as `aps`, the data members beside it.
        var payload = JSONObject([("aps", .object(PlatformReceiving.placeholder))])
        for (key, value) in data where key != "aps" { payload[PlatformReceiving.coreKey(key)] = .string(value) }
        var options = DeviceSimulator.Options(timeLimit: backstop)
        options.maximumPayloadBytes = wrappedPayloadLimit
        let result = await DeviceRun.deliver(JSON.serialize(.object(payload)), store: store, requestIdentifier: identifier,
                                             options: options, logger: logger, attachments: attachments, receipts: receipts, mailbox: mailbox)
        return Delivery(result: PlatformReceiving.withoutAPS(result), problem: nil)
    }

    static func rejected(_ reason: ReasonCode, _ problem: String, identifier: String) -> Delivery {
        var result = DeliveryResult(outcome: .rejected, reason: reason, notification: nil)
        result.requestID = identifier
        return Delivery(result: result, problem: problem)
    }

}

extension DeviceCommand.Push {
    /// `--platform fcm`: the FCM message's data read, then the envelope opened as on an iPhone.
    func runFCM() async throws {
        let bytes = try readInput(payload, limit: 16 << 20, what: "the FCM message")
        let storeValue = try openStore(store, create: false, clock: clock?.wallClock ?? .system)
        let media = try DeviceRun.MediaFetching(directory: attachmentsDir, policy: allowLocalMedia ? .development : .production)
        let delivery = try await DeviceRun.withMailbox(storeValue) { mailbox in
            await ReceiptsTransportCLI.with { transport in
                await FCMReceiving.deliver(message: bytes, store: storeValue, requestIdentifier: requestID, attachments: media.pipeline,
                                           receipts: SimulatedDevice(store: storeValue).receiptCourier(transport: transport), mailbox: mailbox)
            }
        }
        await media.shutdown()
        try report(delivery, platform: .fcm)
    }

    /// Prints what an Android phone or a browser showed (`--json`: its JSON object) and why a refused message was
    /// refused; exit 1 for a refusal, as for an iPhone.
    func report(_ delivery: PlatformReceiving.Delivery, platform: DevicePlatform) throws {
        let result = delivery.result
        if output.json {
            print(String(decoding: JSON.serialize(.object(result.jsonObject)), as: UTF8.self))
        } else {
            print(Banner.render(result, style: .detect()))
        }
        if let problem = delivery.problem { printError("--platform \(platform.rawValue): \(problem)") }
        if result.isRejection { throw ExitCode(1) }
    }
}
