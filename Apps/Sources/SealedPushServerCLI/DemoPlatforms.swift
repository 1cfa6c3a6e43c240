// The demo's last act (issue #38): one message from the gateway to an iPhone, an Android phone and a browser,
// each through its own local push service, each opened by its simulated device with its own keys.
import SealedPushCLI
import SealedPushDevice
import SealedPushDeviceHTTP
import SealedPushKeychain
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import NIOConcurrencyHelpers
import SealedPushCrypto
import SealedPushGateway
import SealedPushWebPush
import SealedPushWebPushServer
import SealedPushAPNsServer
import SealedPushWire

/// The local push services of the platforms act, running in the background, and what they accepted.
final class DemoPushServices: Sendable {
    let webpushAccepted: NIOLockedValueBox<[AcceptedWebPush]>
    let webpushOrigin: String
    let webpushCA: String
    let services: BackgroundServices

    private init(webpushOrigin: String, webpushCA: String, services: BackgroundServices, webpushAccepted: NIOLockedValueBox<[AcceptedWebPush]>) {
        self.webpushOrigin = webpushOrigin
        self.webpushCA = webpushCA
        self.services = services
        self.webpushAccepted = webpushAccepted
    }

    /// Starts the local Web Push service (subscription `browser-1`) on a free loopback port; nil if it cannot.
    static func start(in directory: URL, logger: Logger) async -> DemoPushServices? {
        guard let authority = try? LocalCertificateAuthority.make(caName: "SealedPush demo Web Push CA") else { return nil }
        let ca = directory.appendingPathComponent("webpush-ca.pem").path
        guard FileManager.default.createFile(atPath: ca, contents: Data(authority.caPEM.utf8)) else { return nil }
        let accepted = NIOLockedValueBox<[AcceptedWebPush]>([])
        let server = LocalWebPushServer(rules: LocalWebPushRules(configuration: LocalWebPushConfiguration(subscriptions: ["browser-1"])),
                                        authority: authority, logger: logger) { push in accepted.withLockedValue { $0.append(push) } }
        let origin = NIOLockedValueBox<String?>(nil)
        guard let app = try? server.application(onRunning: { o in origin.withLockedValue { $0 = o } }) else { return nil }
        let services = BackgroundServices([app], logger: logger)
        let deadline = ContinuousClock.now + .seconds(30)
        while origin.withLockedValue({ $0 }) == nil, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        guard let bound = origin.withLockedValue({ $0 }) else {
            await services.stop()
            return nil
        }
        return DemoPushServices(webpushOrigin: bound, webpushCA: ca, services: services, webpushAccepted: accepted)
    }

    func stop() async { await services.stop() }
}

extension Demo {
    /// Beyond iOS: the same sealed message to an iPhone (APNs) and a browser (Web Push), through the gateway.
    mutating func platformsAct(senderStore: URL, senderRecord: SenderKeyRecord) async throws {
        let directory = base.appendingPathComponent("platforms")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard let push = await DemoPushServices.start(in: directory, logger: quietLogger) else {
            note("(the local Web Push service could not start here; skipped)")
            return
        }
        let (vapid, vapidPEM) = VAPIDKey.generate()
        let vapidPath = directory.appendingPathComponent("vapid.p8")
        guard vapidPEM.withUnsafeBytes({ FileManager.default.createFile(atPath: vapidPath.path, contents: Data($0), attributes: [.posixPermissions: 0o600]) }) else {
            await push.stop()
            note("(cannot write the VAPID key here; skipped)")
            return
        }
        let webpush = JSONObject([("webpush", .object(JSONObject([
            ("vapid_key", .string(vapidPath.path)), ("subject", "mailto:ops@example.com"), ("allow_private_endpoints", .bool(true)),
            ("ca_cert", .string(push.webpushCA)),
        ])))])
        guard let g = await DemoGateway.start(in: directory.appendingPathComponent("gateway"), senderStore: senderStore, extraApp: webpush,
                                              logger: quietLogger) else {
            await push.stop()
            note("(the gateway could not start here; skipped)")
            return
        }
        do { try await platformScenes(g, push: push, vapid: vapid, senderRecord: senderRecord, directory: directory) } catch {
            await g.stop()
            await push.stop()
            throw error
        }
        await g.stop()
        await push.stop()
    }

    private mutating func platformScenes(_ g: DemoGateway, push: DemoPushServices, vapid: VAPIDKey, senderRecord: SenderKeyRecord,
                                         directory: URL) async throws {
        heading("Beyond iOS: one message to an iPhone and a browser, each through its own push service")
        note("app \"chat\" serves apns and webpush (VAPID key \(vapid.publicKeyBase64URL.prefix(12))…, the browser's applicationServerKey)")
        func device(_ name: String) throws -> (KeychainStore, JSONObject) {
            let store = try opened("\(name) store") { () throws(KeychainError) in try KeychainStore(url: directory.appendingPathComponent(name)) }
            let record = try opened("\(name) keys generate") { () throws(KeychainError) in try DeviceKeyring(store: store).generate() }
            try opened("\(name) trust") { () throws(KeychainError) in
                try TrustStore(store: store).add(senderRecord)
                try TrustStore(store: store).setRequireSignature(true)
            }
            return (store, record.jsonObject)
        }
        let (iphone, iphoneRecord) = try device("iphone")
        let token = Hex.encode(CryptoLibrary.randomBytes(count: 32))
        let (s1, _) = try await g.call(.PUT, "/v1/apps/chat/devices/iphone", JSONObject([
            ("user_id", "u-7"), ("apns_token", .string(token)), ("environment", "production"), ("key_record", .object(iphoneRecord)),
        ]))
        note("iphone   PUT …/devices/iphone  {\"apns_token\": …}  →  " + style.bold("\(s1)"))

        let (browser, browserRecord) = try device("browser")
        let keys = WebPushUserAgentKeys.generate()
        let endpoint = push.webpushOrigin + "/push/browser-1"
        _ = try opened("browser subscribe") { () throws(KeychainError) in try WebPushKeyStore(store: browser).save(keys, endpoint: endpoint) }
        let (s2, browserDevice) = try await g.call(.PUT, "/v1/apps/chat/devices/browser", JSONObject([
            ("user_id", "u-7"), ("platform", "webpush"), ("webpush", keys.subscriptionJSON(endpoint: endpoint)), ("key_record", .object(browserRecord)),
        ]))
        note("browser  PUT …/devices/browser {\"platform\": \"webpush\", \"webpush\": PushSubscription}  →  " + style.bold("\(s2)")
             + " (shown as \(browserDevice["webpush_origin"]?.stringValue ?? "?"); the endpoint itself is never returned)")

        let (status, sent) = try await g.call(.POST, "/v1/apps/chat/messages", JSONObject([
            ("to", .object(JSONObject([("user_id", "u-7")]))), ("title", "Agent K"), ("body", "One message, every device, sealed to each one's key."),
        ]))
        let messageID = sent["message_id"]?.stringValue ?? ""
        note("POST …/messages {\"to\": {\"user_id\": \"u-7\"}}  →  " + style.bold("\(status)") + ", \(sent["deliveries"]?.arrayValue?.count ?? 0) deliveries")
        _ = try await g.waitFor(messageID) { $0.allSatisfy { $0 != "queued" } }

        if let apnsPush = g.received.withLockedValue({ $0.last { $0.deviceToken == token } }) {
            note("iphone (APNs):")
            let simulated = SimulatedDevice(store: iphone)
            sideBySide(apnsPush.payload, await simulated.deliver(apnsPush.payload, requestIdentifier: apnsPush.requestIdentifier, logger: quietLogger,
                                                                 receipts: simulated.receiptCourier(transport: g.transport)))
        }
        if let webPush = push.webpushAccepted.withLockedValue({ $0.last }) {
            note("browser (Web Push): the push service got \(webPush.body.count) bytes of aes128gcm (TTL \(webPush.ttl), Urgency \(webPush.urgency.rawValue)); the browser's keys open it, then its device key")
            let simulated = SimulatedDevice(store: browser)
            let opened = await WebPushReceiving.deliver(body: webPush.body, store: browser, keys: keys, requestIdentifier: webPush.topic,
                                                       logger: quietLogger, receipts: simulated.receiptCourier(transport: g.transport))
            if let n = opened.result.notification {
                for line in Banner.box(title: n.title, subtitle: n.subtitle, body: n.body, style: style) { note(line) }
            }
            note(Banner.outcomeLine(opened.result, style: style))
        }
        let delivered = try await g.waitFor(messageID) { $0.allSatisfy { $0 == "delivered" } }
        note("GET …/messages/\(messageID.prefix(8))…  →  "
             + style.bold(delivered.map { "\($0["device_id"]?.stringValue ?? "?") (\($0["platform"]?.stringValue ?? "?")): \($0["state"]?.stringValue ?? "?")" }
                .joined(separator: ", ")))
    }
}
