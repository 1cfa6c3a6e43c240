import ArgumentParser
package import Logging
import SealedPushCrypto
package import SealedPushDevice
package import SealedPushKeychain
package import SealedPushReceiver
import SealedPushSender
package import SealedPushWebPush
import SealedPushWire

/// The platform a simulated device receives pushes on (`device push --platform`): the payload's form and what
/// opens it. The wire v1 envelope inside is the same on every platform (platforms v1).
enum DevicePlatform: String, CaseIterable, Sendable, ExpressibleByArgument {
    /// An iPhone: the input is an APNs payload, opened by the notification service extension (the default).
    case apns
    /// A browser (or a UnifiedPush distributor): the input is an RFC 8291 `aes128gcm` body, decrypted with the
    /// device's Web Push keys (`device subscribe`), then the envelope is opened as an iPhone opens it.
    case webpush
    /// An Android device: the input is an FCM HTTP v1 message (platforms v1 §2); the app's
    /// `FirebaseMessagingService.onMessageReceived` opens `data.ENCRYPTED_DATA` as an iPhone opens it (`FCMReceiving`).
    case fcm
}

/// A simulated browser's Web Push keys in its keychain store (`device subscribe`): the P-256 private key, the
/// 16-byte auth secret and the endpoint they were made for, in one generic-password item
/// (`sealedpush.webpush` / `subscription`).
///
/// The item is `alwaysThisDeviceOnly`: the push layer decrypts as soon as a push arrives, in any lock state, as a
/// browser or Android's push service does; the sealed envelope inside is still protected by the device key's class
/// (before the first unlock it ends `keychainLocked` and waits in the pending queue, as on an iPhone). Like every
/// item it is sealed at rest by the store key, and its secrets stay in wiped storage in memory.
///
/// Layout (version 1): `0x01`, the 32-byte private scalar, the 16-byte auth secret, the endpoint in UTF-8.
package struct WebPushKeyStore: Sendable {
    /// The keychain item's service.
    package static let service = "sealedpush.webpush"
    /// The keychain item's account.
    package static let account = "subscription"
    static let version: UInt8 = 1
    static let fixedLength = 1 + 32 + WebPushSubscriptionKeys.authLength

    /// The device's store.
    package let store: KeychainStore

    /// The Web Push keys of the device over `store`.
    package init(store: KeychainStore) {
        self.store = store
    }

    /// A stored subscription: the user agent's keys and its endpoint.
    package struct Subscription: Sendable {
        /// The private key and auth secret.
        package let keys: WebPushUserAgentKeys
        /// The endpoint the keys were made for (a capability URL: never log it).
        package let endpoint: String
    }

    /// Keeps `keys` for `endpoint`, replacing any earlier subscription; returns whether one was replaced.
    @discardableResult
    package func save(_ keys: WebPushUserAgentKeys, endpoint: String) throws(KeychainError) -> Bool {
        let item = SecureBytes(joining: [SecureBytes([Self.version]), keys.rawPrivateKey, keys.auth, SecureBytes(Array(endpoint.utf8))])
        var replaced = false
        try store.modify(itemClass: .genericPassword, service: Self.service, account: Self.account,
                         accessGroup: store.accessGroups[0], accessibility: .alwaysThisDeviceOnly) { old in
            replaced = old != nil
            return item
        }
        return replaced
    }

    /// The stored subscription, or `nil` when the device never subscribed.
    package func load() throws(KeychainError) -> Subscription? {
        let item: KeychainItem
        do {
            item = try store.read(itemClass: .genericPassword, service: Self.service, account: Self.account, accessGroup: store.accessGroups[0])
        } catch .itemNotFound { return nil }
        let path = "\(Self.service)/\(Self.account)"
        guard let data = item.data, data.count > Self.fixedLength,
              data.withUnsafeBytes({ $0[0] }) == Self.version
        else { throw .decode(path: path, why: "the Web Push keys item is not version 1 keys and an endpoint: subscribe the device again") }
        let endpointBytes = data.slice(Self.fixedLength..<data.count).unsafeCopyToArray()
        guard let endpoint = String(validating: endpointBytes, as: UTF8.self) else {
            throw .decode(path: path, why: "the stored endpoint is not UTF-8: subscribe the device again")
        }
        do {
            let keys = try WebPushUserAgentKeys(rawPrivateKey: data.slice(1..<33), auth: data.slice(33..<Self.fixedLength))
            return Subscription(keys: keys, endpoint: endpoint)
        } catch {
            throw .decode(path: path, why: "\(error.description)")
        }
    }
}

/// What a simulated browser does with a Web Push body (platforms v1 §3, §5): decrypts RFC 8291 with its own keys,
/// reads the JSON `{"ENCRYPTED_DATA": "…", "sealedpush": 1}`, and opens the envelope with the receiver core an
/// iPhone uses (`DeviceRun.deliver`: the same extension, keys, trust, replay cache, receipts, attachments and
/// notification store), handed an APNs-shaped payload whose placeholder alert is the browser's own
/// (`Secret Message!` / `(Encrypted)`). Browsers have no service extension, so `notMutable`, `noAlert`,
/// `extensionCrashed` and `timeout` do not occur.
package enum WebPushReceiving {
    /// How long the receiver may take for one message before the core's expiry applies: a backstop for a hung
    /// attachment server, not a budget a browser imposes.
    package static let backstop: Duration = .seconds(300)

    /// The outcome of one message and, for one that was refused, why.
    package typealias Delivery = PlatformReceiving.Delivery


    /// Delivers `body` to the device over `store`, whose Web Push keys are `keys`, under the notification
    /// request identifier `requestIdentifier` (`nil`: a new one).
    ///
    /// A body over 4096 bytes is `rejected`/`payloadTooLarge`; one that does not decrypt, or whose plaintext is not
    /// a JSON object, `rejected`/`invalidPayload` (a browser drops it: nothing is shown). Everything else goes
    /// through the receiver core.
    package static func deliver(body: [UInt8], store: KeychainStore, keys: WebPushUserAgentKeys, requestIdentifier: String?,
                                logger: Logger = Logger(label: "sealedpush.webpush-receiver"),
                                attachments: AttachmentPipeline? = nil, receipts: ReceiptCourier? = nil,
                                mailbox: (any MailboxFetcher)? = nil) async -> PlatformReceiving.Delivery {
        let identifier = requestIdentifier ?? DeviceSimulator.newRequestIdentifier()
        func rejected(_ reason: ReasonCode, _ problem: String) -> PlatformReceiving.Delivery {
            var result = DeliveryResult(outcome: .rejected, reason: reason, notification: nil)
            result.requestID = identifier
            return PlatformReceiving.Delivery(result: result, problem: problem)
        }
        guard body.count <= WebPushBody.maximumSize else {
            return rejected(.payloadTooLarge, "the Web Push body is \(body.count) bytes, over the \(WebPushBody.maximumSize) push services deliver")
        }
        let plaintext: [UInt8]
        do { plaintext = try WebPushDecryptor(keys: keys).decrypt(body) } catch {
            return rejected(.invalidPayload, error.description + " (is it for this device's subscription?)")
        }
        guard case let .object(message)? = try? JSON.parse(plaintext) else {
            return rejected(.invalidPayload, "the decrypted Web Push message is not a UTF-8 JSON object")
        }
        // The receiver core takes an APNs payload: the browser's placeholder as `aps`, the message's members beside it.
        var payload = JSONObject([("aps", .object(PlatformReceiving.placeholder))])
        for (name, value) in message where name != "aps" { payload[PlatformReceiving.coreKey(name)] = value }
        let result = await DeviceRun.deliver(JSON.serialize(.object(payload)), store: store, requestIdentifier: identifier,
                                             options: .init(timeLimit: backstop), logger: logger, attachments: attachments,
                                             receipts: receipts, mailbox: mailbox)
        return PlatformReceiving.Delivery(result: PlatformReceiving.withoutAPS(result), problem: nil)
    }

}

/// What the simulated Android phone and browser share around the receiver core (platforms v1 §5): they hand the
/// core an APNs-shaped payload whose `aps` is the placeholder the app posts when a message cannot be opened, and
/// take that `aps` out of what they show.
package enum PlatformReceiving {
    /// The core's key for a data member: a mailbox handle (`sealedpush_fetch`, mailbox v1 §2) is the core's
    /// `SEALEDPUSH_FETCH`, fetched from the device's mailbox URL as on an iPhone; every other member keeps its name.
    static func coreKey(_ name: String) -> String { name == MailboxHandle.dataKey ? MailboxHandle.apnsKey : name }

    /// The placeholder shown when a message cannot be opened: the sealer's default placeholder text.
    static let placeholder = JSONObject([
        ("alert", .object(JSONObject([("title", .string(Placeholder.defaultTitle)), ("body", .string(Placeholder.defaultBody))]))),
        ("mutable-content", .int(1)),
    ])

    /// The outcome of one message and, for one that was refused, why (safe to print: no key, no token).
    package struct Delivery: Sendable {
        /// What the device shows (as `device-outcomes.md`); `userInfo` holds the message's members.
        package let result: DeliveryResult
        /// Why the message was rejected, when it was.
        package let problem: String?
    }

    /// `result` with `aps` (the placeholder the core was handed) removed from the shown userInfo.
    static func withoutAPS(_ result: DeliveryResult) -> DeliveryResult {
        guard var shown = result.notification else { return result }
        shown.userInfo["aps"] = nil
        var out = DeliveryResult(outcome: result.outcome, reason: result.reason, notification: shown, attachmentFailures: result.attachmentFailures)
        out.receipt = result.receipt
        out.report = result.report
        out.requestID = result.requestID
        return out
    }
}
