// The demo's gateway act (issue #20): `sealedpush-server gateway` in process on loopback, in front of a local
// APNs with two phones of one user; the backend's calls are shown as the curl commands they stand for.
import SealedPushCLI
import SealedPushDevice
import SealedPushDeviceHTTP
import SealedPushKeychain
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import AsyncHTTPClient
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import SealedPushAPNs
import SealedPushAPNsServer
import SealedPushCrypto
import SealedPushGateway
import SealedPushWire
#if canImport(Glibc)
import Glibc
#endif

/// The gateway, its local APNs and the demo's HTTP client.
final class DemoGateway: Sendable {
    static let topic = "com.example.secretmessages"
    static let apiKey = "sp_" + Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 30)).filter { $0.isLetter || $0.isNumber }
    let apns: LocalAPNsServer
    let received: NIOLockedValueBox<[AcceptedPush]>
    let gateway: Gateway
    let services: BackgroundServices
    let base: String
    let http = HTTPClient(eventLoopGroupProvider: .singleton)
    let transport = HTTPReceiptTransport()

    private init(apns: LocalAPNsServer, received: NIOLockedValueBox<[AcceptedPush]>, gateway: Gateway, services: BackgroundServices, base: String) {
        self.apns = apns
        self.received = received
        self.gateway = gateway
        self.services = services
        self.base = base
    }

    /// Writes a configuration into `directory` (app `chat`, its `.p8`, the local APNs's CA, one API key, the
    /// demo's sender store) and starts the gateway on a free loopback port; `nil` if anything cannot start.
    static func start(in directory: URL, senderStore: URL, extraApp: JSONObject = JSONObject([]), logger: Logger) async -> DemoGateway? {
        guard let (key, pem) = try? APNsSigningKey.generateForDevelopment(keyID: "DEMO000KEY", teamID: "DEMOTEAM00"),
              let authority = try? LocalCertificateAuthority.make(),
              (try? FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)) != nil
        else { return nil }
        let received = NIOLockedValueBox<[AcceptedPush]>([])
        let apns = LocalAPNsServer(
            configuration: LocalAPNsConfiguration(port: 0, keys: [.init(keyID: key.keyID, teamID: key.teamID, publicKey: key.privateKey.publicKey,
                                                                        topics: [topic])], acceptUnknownTokens: true),
            authority: authority, logger: logger) { push in received.withLockedValue { $0.append(push) } }
        guard let apnsPort = try? await apns.start(), let port = freePort() else { return nil }
        let p8 = directory.appendingPathComponent("AuthKey_DEMO000KEY.p8")
        guard FileManager.default.createFile(atPath: p8.path, contents: Data(pem.utf8), attributes: [.posixPermissions: 0o600]),
              FileManager.default.createFile(atPath: directory.appendingPathComponent("ca.pem").path, contents: Data(authority.caPEM.utf8))
        else { return nil }
        let url = JSONValue.string("https://127.0.0.1:\(apnsPort)")
        var app = JSONObject([
            ("id", "chat"), ("topic", .string(topic)),
            ("apns", .object(JSONObject([("auth_key", "AuthKey_DEMO000KEY.p8"), ("key_id", "DEMO000KEY"), ("team_id", "DEMOTEAM00"),
                                         ("production_url", url), ("sandbox_url", url), ("ca_cert", "ca.pem")]))),
            ("sender_keychain", .string(senderStore.path)),
            ("api_keys", .array([.object(JSONObject([("id", "backend"), ("sha256", .string(Hex.encode(SHA256Hasher.hash(Array(apiKey.utf8))))),
                                                     ("scopes", .array(["send", "devices", "read"]))]))])),
        ])
        for member in extraApp { app[member.key] = member.value }
        let config = JSONObject([
            ("listen", .string("127.0.0.1:\(port)")), ("admin_listen", "127.0.0.1:0"), ("public_url", .string("http://127.0.0.1:\(port)")),
            ("database", "sqlite:gateway.db"),
            ("apps", .array([.object(app)])),
        ])
        let path = directory.appendingPathComponent("gateway.json").path
        guard FileManager.default.createFile(atPath: path, contents: Data(JSON.serialize(.object(config)))),
              let configuration = try? GatewayConfiguration.load(path: path),
              let gateway = try? await Gateway.open(configuration: configuration, logger: logger)
        else {
            await apns.stop()
            return nil
        }
        let listening = NIOLockedValueBox(0)
        let services = BackgroundServices([apns] + GatewayServer.services(gateway, logger: logger) { _, _ in listening.withLockedValue { $0 += 1 } },
                                          logger: logger)
        let deadline = ContinuousClock.now + .seconds(30)
        while listening.withLockedValue({ $0 }) < 2, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return DemoGateway(apns: apns, received: received, gateway: gateway, services: services, base: "http://127.0.0.1:\(port)")
    }

    /// A free loopback port (bound and released: the gateway binds it a moment later).
    static func freePort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        guard bound == 0,
              withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0
        else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// One API call; the status and the JSON body.
    func call(_ method: HTTPMethod, _ path: String, _ body: JSONObject? = nil) async throws -> (Int, JSONObject) {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(Self.apiKey)")
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: JSON.serialize(.object(body))))
        }
        let response = try await http.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSON.parse(Array(bytes.readableBytesView)))?.objectValue ?? JSONObject([])
        return (Int(response.status.code), json)
    }

    /// Waits (up to 30 s) until `done` holds for the message; the message.
    func waitFor(_ messageID: String, _ done: @Sendable ([String]) -> Bool) async throws -> [JSONObject] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let (_, message) = try await call(.GET, "/v1/apps/chat/messages/\(messageID)")
            let deliveries = (message["deliveries"]?.arrayValue ?? []).compactMap(\.objectValue)
            if done(deliveries.compactMap { $0["state"]?.stringValue }) || ContinuousClock.now > deadline { return deliveries }
            try await Task.sleep(for: .milliseconds(20))
        }
    }

    func stop() async {
        try? await http.shutdown()
        await transport.shutdown()
        await services.stop()
        await gateway.close()
    }
}

extension JSONValue {
    var arrayValue: [JSONValue]? { if case let .array(a) = self { a } else { nil } }
}

extension Demo {
    /// The gateway act: a backend registers two phones for a user, sends one message, both phones show it and
    /// it reads `delivered` for both; one phone's app is removed and the next send skips it.
    mutating func gatewayAct(senderStore: URL, senderRecord: SenderKeyRecord) async throws {
        guard let g = await DemoGateway.start(in: base.appendingPathComponent("gateway"), senderStore: senderStore, logger: quietLogger) else {
            note("(the gateway could not start here; skipped)")
            return
        }
        do { try await gatewayScenes(g, senderRecord: senderRecord) } catch {
            await g.stop()
            throw error
        }
        await g.stop()
    }

    private mutating func gatewayScenes(_ g: DemoGateway, senderRecord: SenderKeyRecord) async throws {
        heading("The push gateway: a backend registers two phones for a user and sends through it")
        note("sealedpush-server gateway --config gateway.json  →  API on \(g.base) (app \"chat\", one API key)")
        var phones: [(name: String, store: KeychainStore, token: String)] = []
        for name in ["phone-1", "phone-2"] {
            let store = try opened("\(name) store") { () throws(KeychainError) in try KeychainStore(url: base.appendingPathComponent("gateway/\(name)")) }
            let record = try opened("\(name) keys generate") { () throws(KeychainError) in try DeviceKeyring(store: store).generate() }
            try opened("\(name) trust") { () throws(KeychainError) in
                try TrustStore(store: store).add(senderRecord)
                try TrustStore(store: store).setRequireSignature(true)
            }
            let token = Hex.encode(CryptoLibrary.randomBytes(count: 32))
            let (status, device) = try await g.call(.PUT, "/v1/apps/chat/devices/\(name)", JSONObject([
                ("user_id", "u-42"), ("apns_token", .string(token)), ("environment", "production"), ("key_record", .object(record.jsonObject)),
            ]))
            note("curl -X PUT \(g.base)/v1/apps/chat/devices/\(name) -H 'Authorization: Bearer sp_…' -d '{\"user_id\":\"u-42\",…}'  →  "
                 + style.bold("\(status)") + " key \(device["key_id"]?.stringValue ?? "?")")
            phones.append((name, store, token))
        }
        let (status, sent) = try await g.call(.POST, "/v1/apps/chat/messages", JSONObject([
            ("to", .object(JSONObject([("user_id", "u-42")]))), ("title", "Agent K"), ("body", "Both of your phones get this, each sealed to its own key."),
        ]))
        let messageID = sent["message_id"]?.stringValue ?? ""
        note("curl -X POST \(g.base)/v1/apps/chat/messages -d '{\"to\":{\"user_id\":\"u-42\"},\"body\":…}'  →  " + style.bold("\(status)")
             + ", \(sent["deliveries"]?.arrayValue?.count ?? 0) deliveries queued")
        _ = try await g.waitFor(messageID) { $0.allSatisfy { $0 != "queued" } }
        for phone in phones {
            guard let push = g.received.withLockedValue({ $0.last { $0.deviceToken == phone.token } }) else {
                note("\(phone.name): nothing arrived")
                continue
            }
            note("\(phone.name):")
            let device = SimulatedDevice(store: phone.store)
            sideBySide(push.payload, await device.deliver(push.payload, requestIdentifier: push.requestIdentifier, logger: quietLogger, receipts: device.receiptCourier(transport: g.transport)))
        }
        let delivered = try await g.waitFor(messageID) { $0.allSatisfy { $0 == "delivered" } }
        note("curl \(g.base)/v1/apps/chat/messages/\(messageID.prefix(8))…  →  "
             + style.bold(delivered.map { "\($0["device_id"]?.stringValue ?? "?"): \($0["state"]?.stringValue ?? "?")" }.joined(separator: ", "))
             + " (each phone's receipt came back)")

        g.apns.rules.unregister(phones[1].token)
        note("The app is removed from phone-2: APNs answers 410 to its next push.")
        let (_, second) = try await g.call(.POST, "/v1/apps/chat/messages", JSONObject([("to", .object(JSONObject([("user_id", "u-42")]))), ("body", "Second.")]))
        let after = try await g.waitFor(second["message_id"]?.stringValue ?? "") { $0.allSatisfy { $0 != "queued" } }
        note("second message  →  " + after.map { "\($0["device_id"]?.stringValue ?? "?"): \($0["state"]?.stringValue ?? "?")" }.joined(separator: ", "))
        let (_, third) = try await g.call(.POST, "/v1/apps/chat/messages", JSONObject([("to", .object(JSONObject([("user_id", "u-42")]))), ("body", "Third.")]))
        let skipped = (third["skipped"]?.arrayValue ?? []).compactMap(\.objectValue)
        note("third message  →  " + style.bold("\(third["deliveries"]?.arrayValue?.count ?? 0) delivery")
             + "; skipped: " + skipped.map { "\($0["device_id"]?.stringValue ?? "?") (\($0["reason"]?.stringValue ?? "?"))" }.joined(separator: ", "))
    }
}
