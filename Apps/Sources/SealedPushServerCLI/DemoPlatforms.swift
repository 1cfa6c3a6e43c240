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
import SealedPushFCM
import SealedPushFCMServer
import SealedPushAPNsServer
import SealedPushWire

/// The local push services of the platforms act (Web Push and FCM, in process on loopback), and what they accepted.
final class DemoPushServices: Sendable {
    static let androidToken = "demo-pixel:APA91bH-" + String(repeating: "x", count: 24) + "demo0001"
    let webpushAccepted: NIOLockedValueBox<[AcceptedWebPush]>
    let fcmAccepted: NIOLockedValueBox<[AcceptedFCMMessage]>
    let webpushOrigin: String
    let fcmBase: String
    let services: BackgroundServices

    private init(webpushOrigin: String, fcmBase: String, services: BackgroundServices, webpushAccepted: NIOLockedValueBox<[AcceptedWebPush]>,
                 fcmAccepted: NIOLockedValueBox<[AcceptedFCMMessage]>) {
        self.webpushOrigin = webpushOrigin
        self.fcmBase = fcmBase
        self.services = services
        self.webpushAccepted = webpushAccepted
        self.fcmAccepted = fcmAccepted
    }

    /// Starts the local Web Push service (subscription `browser-1`) and the local FCM (the demo's service account,
    /// written to `sa.json`; device `androidToken`) on free loopback ports, trusting one CA (`ca.pem`); nil if either
    /// cannot start.
    static func start(in directory: URL, logger: Logger) async -> DemoPushServices? {
        guard let authority = try? LocalCertificateAuthority.make(caName: "SealedPush demo push services CA"),
              FileManager.default.createFile(atPath: directory.appendingPathComponent("ca.pem").path, contents: Data(authority.caPEM.utf8)),
              let (account, accountJSON) = try? FCMServiceAccount.generate(project: "sealedpush-demo", tokenURI: "https://127.0.0.1:1/token"),
              accountJSON.withUnsafeBytes({ FileManager.default.createFile(atPath: directory.appendingPathComponent("sa.json").path, contents: Data($0),
                                                                          attributes: [.posixPermissions: 0o600]) })
        else { return nil }
        let webpushAccepted = NIOLockedValueBox<[AcceptedWebPush]>([])
        let webpush = LocalWebPushServer(rules: LocalWebPushRules(configuration: LocalWebPushConfiguration(subscriptions: ["browser-1"])),
                                         authority: authority, logger: logger) { push in webpushAccepted.withLockedValue { $0.append(push) } }
        let origin = NIOLockedValueBox<String?>(nil)
        guard let webpushApp = try? webpush.application(onRunning: { o in origin.withLockedValue { $0 = o } }) else { return nil }
        let fcmAccepted = NIOLockedValueBox<[AcceptedFCMMessage]>([])
        let fcmPort = NIOLockedValueBox<Int?>(nil)
        let fcm = LocalFCMServer(rules: LocalFCMRules(configuration: LocalFCMConfiguration(serviceAccount: account, devices: [androidToken])),
                                 authority: authority, port: 0, logger: logger,
                                 onListening: { port in fcmPort.withLockedValue { $0 = port } },
                                 onAccepted: { message in fcmAccepted.withLockedValue { $0.append(message) } })
        let services = BackgroundServices([webpushApp, fcm], logger: logger)
        let deadline = ContinuousClock.now + .seconds(30)
        while origin.withLockedValue({ $0 }) == nil || fcmPort.withLockedValue({ $0 }) == nil, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        guard let bound = origin.withLockedValue({ $0 }), let port = fcmPort.withLockedValue({ $0 }) else {
            await services.stop()
            return nil
        }
        return DemoPushServices(webpushOrigin: bound, fcmBase: "https://127.0.0.1:\(port)", services: services,
                                webpushAccepted: webpushAccepted, fcmAccepted: fcmAccepted)
    }

    func stop() async { await services.stop() }
}

extension Demo {
    /// Beyond iOS: the same sealed message to an iPhone (APNs), an Android phone (FCM) and a browser (Web Push),
    /// through the gateway.
    mutating func platformsAct(senderStore: URL, senderRecord: SenderKeyRecord) async throws {
        let directory = base.appendingPathComponent("platforms")
        try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        guard let push = await DemoPushServices.start(in: directory, logger: quietLogger) else {
            note("(the local Web Push service or FCM could not start here; skipped)")
            return
        }
        let (vapid, vapidPEM) = VAPIDKey.generate()
        let vapidPath = directory.appendingPathComponent("vapid.p8")
        guard vapidPEM.withUnsafeBytes({ FileManager.default.createFile(atPath: vapidPath.path, contents: Data($0), attributes: [.posixPermissions: 0o600]) }) else {
            await push.stop()
            note("(cannot write the VAPID key here; skipped)")
            return
        }
        let ca = directory.appendingPathComponent("ca.pem").path
        let sections = JSONObject([
            ("webpush", .object(JSONObject([
                ("vapid_key", .string(vapidPath.path)), ("subject", "mailto:ops@example.com"), ("allow_private_endpoints", .bool(true)),
                ("ca_cert", .string(ca)),
            ]))),
            ("fcm", .object(JSONObject([
                ("service_account", .string(directory.appendingPathComponent("sa.json").path)), ("url", .string(push.fcmBase)),
                ("token_url", .string(push.fcmBase + "/token")), ("ca_cert", .string(ca)),
            ]))),
        ])
        guard let g = await DemoGateway.start(in: directory.appendingPathComponent("gateway"), senderStore: senderStore, extraApp: sections,
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
        heading("Beyond iOS: one message to an iPhone, an Android phone and a browser, each through its own push service")
        note("app \"chat\" serves apns, fcm (a service account of project sealedpush-demo) and webpush (VAPID key \(vapid.publicKeyBase64URL.prefix(12))…)")
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

        let (android, androidRecord) = try device("android")
        let (s3, androidDevice) = try await g.call(.PUT, "/v1/apps/chat/devices/android", JSONObject([
            ("user_id", "u-7"), ("platform", "fcm"), ("fcm_token", .string(DemoPushServices.androidToken)), ("key_record", .object(androidRecord)),
        ]))
        note("android  PUT …/devices/android {\"platform\": \"fcm\", \"fcm_token\": …}  →  " + style.bold("\(s3)")
             + " (token …\(androidDevice["fcm_token_suffix"]?.stringValue ?? "?"))")

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
        if let message = push.fcmAccepted.withLockedValue({ $0.last }) {
            let data = message.data.first { $0.key == "ENCRYPTED_DATA" }?.value ?? ""
            note("android (FCM): Google sees a data-only message, {\"ENCRYPTED_DATA\": \"\(data.prefix(16))…\", \"sealedpush\": \"1\"}, priority \(message.priority ?? "?"), no notification text")
            let simulated = SimulatedDevice(store: android)
            let opened = await FCMReceiving.deliver(data: message.data, store: android, requestIdentifier: message.collapseKey, logger: quietLogger,
                                                    receipts: simulated.receiptCourier(transport: g.transport))
            if let n = opened.result.notification {
                for line in Banner.box(title: n.title, subtitle: n.subtitle, body: n.body, style: style) { note(line) }
            }
            note(Banner.outcomeLine(opened.result, style: style))
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
