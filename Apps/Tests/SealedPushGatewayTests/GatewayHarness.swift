import AsyncHTTPClient
import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOHTTP1
import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushAPNsServer
import SealedPushCrypto
import SealedPushDevice
import SealedPushDeviceHTTP
import SealedPushGateway
import SealedPushKeychain
import SealedPushWire
import SealedPushTestSupport
import ServiceLifecycle
import Testing

/// The API keys every harness configures, by what they may do (the config holds only their SHA-256).
enum Keys {
    static let all = "sp_" + String(repeating: "A1", count: 20)
    static let devicesOnly = "sp_" + String(repeating: "B2", count: 20)
    static let sendOnly = "sp_" + String(repeating: "C3", count: 20)
    static let readOnly = "sp_" + String(repeating: "D4", count: 20)
    static let otherApp = "sp_" + String(repeating: "E5", count: 20)
    static func sha256(_ key: String) -> String { Hex.encode(SHA256Hasher.hash(Array(key.utf8))) }
}

/// A local APNs on loopback with a development key for the topic `com.example.chat`, whose accepted pushes
/// are kept for the test to hand to simulated phones.
final class TestAPNs: Sendable {
    static let topic = "com.example.chat"
    let server: LocalAPNsServer
    let port: Int
    let pem: String
    let accepted: NIOLockedValueBox<[AcceptedPush]>

    init(port: Int = 0, devices: [String: String] = [:], acceptUnknownTokens: Bool = true, latency: Duration = .zero) async throws {
        let (key, pem) = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001")
        let configuration = LocalAPNsConfiguration(
            port: port, keys: [.init(keyID: "KEY0000001", teamID: "TEAM000001", publicKey: key.privateKey.publicKey, topics: [Self.topic])],
            devices: devices, acceptUnknownTokens: acceptUnknownTokens, latency: latency)
        let box = NIOLockedValueBox<[AcceptedPush]>([])
        server = LocalAPNsServer(configuration: configuration, authority: try LocalCertificateAuthority.make(), onAccepted: { push in
            box.withLockedValue { $0.append(push) }
        })
        self.pem = pem
        accepted = box
        self.port = try await server.start()
    }

    /// The pushes accepted so far.
    var pushes: [AcceptedPush] { accepted.withLockedValue { $0 } }

    func stop() async { await server.stop() }
}

/// A simulated phone: a keychain store with a device key, an APNs token, and its exported key record.
struct Phone {
    let store: KeychainStore
    let token: String
    let record: JSONObject

    /// A phone with a device key and, with `reveal`, a reveal key in its record (reveal v1 §1).
    init(in directory: URL, name: String, token: String, reveal: Bool = false) throws {
        let root = directory.appendingPathComponent(name)
        store = try KeychainStore(url: root)
        record = try DeviceKeys(store: store).generate(reveal: reveal).jsonObject
        self.token = token
    }

    /// Opens `payload` as the phone would, posting its receipt through HTTP.
    func open(_ payload: [UInt8], transport: HTTPReceiptTransport) async -> DeliveryResult {
        await SimulatedDevice(store: store).deliver(payload, receipts: SimulatedDevice(store: store).receiptCourier(transport: transport))
    }

    /// Sends what waits in the phone's receipt outbox, as a phone does at its next delivery or launch: a receipt
    /// whose POST missed its 2 s deadline (a slow machine) stays queued until then.
    func flushReceipts(transport: HTTPReceiptTransport) async {
        _ = await SimulatedDevice(store: store).flushReceipts(transport: transport)
    }
}

/// An HTTP answer as the tests read it.
struct Answer {
    let status: Int
    let headers: [(String, String)]
    let body: [UInt8]
    var json: JSONObject { (try? JSON.parse(body)).flatMap { if case let .object(o) = $0 { o } else { nil } } ?? JSONObject([]) }
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
    var code: String? { json["type"]?.stringValue.map { String($0.dropFirst("urn:sealedpush:problem:".count)) } }
    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Plain HTTP calls to a gateway on loopback.
struct GatewayClient {
    let http: HTTPClient
    let base: String

    func call(_ method: HTTPMethod, _ path: String, key: String? = Keys.all, json: JSONValue? = nil, raw: [UInt8]? = nil,
              contentType: String? = "application/json", headers: [(String, String)] = []) async throws -> Answer {
        var request = HTTPClientRequest(url: base + path)
        request.method = method
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        if let bytes = raw ?? json.map({ JSON.serialize($0) }) {
            if let contentType { request.headers.add(name: "Content-Type", value: contentType) }
            request.body = .bytes(ByteBuffer(bytes: bytes))
        }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        let response = try await http.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 16 << 20)
        return Answer(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                      body: Array(body.readableBytesView))
    }
}

/// A gateway on loopback over a fresh SQLite database, with app `chat` (and app `other`) against a local APNs.
final class GatewayHarness: Sendable {
    let directory: URL
    let apns: TestAPNs
    let gateway: Gateway
    let group: ServiceGroup
    let running: Task<Void, any Error>
    let apiPort: Int
    let adminPort: Int
    let http: HTTPClient
    let receipts = HTTPReceiptTransport()
    /// Whether `stop()` stops the local APNs (false when the test passed in one that several gateways share).
    let ownsAPNs: Bool

    /// Writes the configuration (the app's `.p8`, CA, API keys) into `directory` and returns its path.
    /// A new temporary directory holding a `key.p8` (mode 0600; parsing a configuration checks its mode, not
    /// its contents), for tests that parse configurations naming it.
    static func parseTestDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let p8 = directory.appendingPathComponent("key.p8")
        try Data("not checked at parse".utf8).write(to: p8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: p8.path)
        return directory
    }

    static func writeConfiguration(in directory: URL, apns: TestAPNs, listen: String = "127.0.0.1:0", admin: String = "127.0.0.1:0",
                                   publicURL: String = "http://127.0.0.1:1", extraApp: JSONObject = JSONObject([]),
                                   extraRoot: JSONObject = JSONObject([]), database: String = "sqlite:gateway.db",
                                   otherApp: JSONObject = JSONObject([])) throws -> String {
        try writeConfiguration(in: directory, apnsKeyPEM: apns.pem, apnsPort: apns.port, caPEM: apns.server.authority.caPEM, listen: listen,
                               admin: admin, publicURL: publicURL, extraApp: extraApp, extraRoot: extraRoot, database: database, otherApp: otherApp)
    }

    /// The same for an APNs that may not run (tests that never deliver): its key's PEM, its port and its CA.
    static func writeConfiguration(in directory: URL, apnsKeyPEM: String, apnsPort: Int, caPEM: String, listen: String = "127.0.0.1:0",
                                   admin: String = "127.0.0.1:0", publicURL: String = "http://127.0.0.1:1", extraApp: JSONObject = JSONObject([]),
                                   extraRoot: JSONObject = JSONObject([]), database: String = "sqlite:gateway.db",
                                   otherApp: JSONObject = JSONObject([])) throws -> String {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let p8 = directory.appendingPathComponent("AuthKey_KEY0000001.p8")
        try Data(apnsKeyPEM.utf8).write(to: p8)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: p8.path)
        try Data(caPEM.utf8).write(to: directory.appendingPathComponent("ca.pem"))
        func key(_ id: String, _ k: String, _ scopes: [String]) -> JSONValue {
            .object(JSONObject([("id", .string(id)), ("sha256", .string(Keys.sha256(k))), ("scopes", .array(scopes.map { .string($0) }))]))
        }
        let url = JSONValue.string("https://127.0.0.1:\(apnsPort)")
        func app(_ id: String, _ keys: [JSONValue]) -> JSONValue {
            var o = JSONObject([
                ("id", .string(id)), ("topic", .string(TestAPNs.topic)),
                ("apns", .object(JSONObject([("auth_key", "AuthKey_KEY0000001.p8"), ("key_id", "KEY0000001"), ("team_id", "TEAM000001"),
                                             ("production_url", url), ("sandbox_url", url), ("ca_cert", "ca.pem")]))),
                ("api_keys", .array(keys)),
            ])
            if id == "chat" { for m in extraApp { o[m.key] = m.value } }
            if id == "other" { for m in otherApp { o[m.key] = m.value } }
            return .object(o)
        }
        var config = JSONObject([
            ("listen", .string(listen)), ("admin_listen", .string(admin)), ("public_url", .string(publicURL)),
            ("database", .string(database)),
            ("apps", .array([
                app("chat", [key("all", Keys.all, ["send", "devices", "read"]), key("devices", Keys.devicesOnly, ["devices"]),
                             key("send", Keys.sendOnly, ["send"]), key("read", Keys.readOnly, ["read"])]),
                app("other", [key("other", Keys.otherApp, ["send", "devices", "read"])]),
            ])),
        ])
        // No linger after the drain in tests (a test that wants one sets `http` itself).
        config["http"] = .object(JSONObject([("drain_linger", .int(0))]))
        for m in extraRoot { config[m.key] = m.value }
        let path = directory.appendingPathComponent("gateway.json")
        try Data(JSON.serialize(.object(config))).write(to: path)
        return path.path
    }

    /// Starts a gateway over `database` (a fresh SQLite file by default); `publicURL` nil means its own API address
    /// (receipts come back to it). With `directory`, in that directory (the database of an earlier harness stopped
    /// with `keepFiles`). With `apiPort`, the API listens there (a port reserved with `freePort()` that a simulated
    /// device was configured with before the gateway started: its mailbox URL). `otherApp` adds members to app `other`
    /// as `extraApp` does to `chat`.
    init(name: String, options: GatewayOptions = GatewayOptions(), extraApp: JSONObject = JSONObject([]), extraRoot: JSONObject = JSONObject([]),
         apns: TestAPNs? = nil, directory: URL? = nil, database: String = "sqlite:gateway.db", apiPort reserved: Int? = nil,
         otherApp: JSONObject = JSONObject([])) async throws {
        ownsAPNs = apns == nil
        self.directory = directory ?? FileManager.default.temporaryDirectory.appendingPathComponent("gateway-\(name)-\(UUID().uuidString)")
        let apns = if let apns { apns } else { try await TestAPNs() }
        self.apns = apns
        // Reserve the API port first so the configuration's public_url can name it.
        let port = try reserved ?? Self.freePort()
        let path = try Self.writeConfiguration(in: self.directory, apns: apns, listen: "127.0.0.1:\(port)",
                                               publicURL: "http://127.0.0.1:\(port)", extraApp: extraApp, extraRoot: extraRoot, database: database,
                                               otherApp: otherApp)
        var logger = Logger(label: "gateway-test")
        logger.logLevel = .warning
        let configuration = try GatewayConfiguration.load(path: path)
        gateway = try await Gateway.open(configuration: configuration, options: options, logger: logger)
        let ports = NIOLockedValueBox<[String: Int]>([:])
        let services = GatewayServer.services(gateway, logger: logger) { name, port in ports.withLockedValue { $0[name] = port } }
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: services, logger: logger))
        self.group = group
        running = Task { try await group.run() }
        try await waitUntil("the gateway's servers to listen", within: .seconds(60)) { ports.withLockedValue { $0.count } == 2 }
        apiPort = ports.withLockedValue { $0["api"]! }
        adminPort = ports.withLockedValue { $0["admin"]! }
        http = HTTPClient(eventLoopGroupProvider: .singleton)
    }

    /// A loopback listener that never accepts nor answers (the kernel completes handshakes into its backlog): its
    /// descriptor (the caller closes it) and port.
    static func silentListener() throws -> (fd: Int32, port: Int) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard listen(fd, 8) == 0 else {
            close(fd)
            throw PostgresClusterError(description: "cannot listen on a loopback port (errno \(errno))")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    var api: GatewayClient { GatewayClient(http: http, base: "http://127.0.0.1:\(apiPort)") }
    var admin: GatewayClient { GatewayClient(http: http, base: "http://127.0.0.1:\(adminPort)") }

    /// Registers `phone` as `device` of `user` in app `chat`.
    @discardableResult
    func register(_ phone: Phone, device: String, user: String, environment: String = "sandbox") async throws -> Answer {
        try await api.call(.PUT, "/v1/apps/chat/devices/\(device)", json: .object(JSONObject([
            ("user_id", .string(user)), ("apns_token", .string(phone.token)), ("environment", .string(environment)),
            ("key_record", .object(phone.record)),
        ])))
    }

    /// Sends `body` to `to` in app `chat`.
    func send(_ to: JSONObject, body: String = "the secret", extra: JSONObject = JSONObject([]), headers: [(String, String)] = []) async throws -> Answer {
        var o = JSONObject([("to", .object(to)), ("body", .string(body))])
        for m in extra { o[m.key] = m.value }
        return try await api.call(.POST, "/v1/apps/chat/messages", json: .object(o), headers: headers)
    }

    /// Waits until every delivery of `messageID` is in one of `states`; the message.
    @discardableResult
    func waitForStates(_ messageID: String, _ states: Set<String>, within: Duration = .seconds(60),
                       where also: @escaping @Sendable (JSONObject) -> Bool = { _ in true }) async throws -> JSONObject {
        var last = JSONObject([])
        try await waitUntil("message deliveries to reach \(states.sorted())", within: within) {
            last = try await self.api.call(.GET, "/v1/apps/chat/messages/\(messageID)").json
            let deliveries = last["deliveries"]?.arrayValue ?? []
            return !deliveries.isEmpty && deliveries.allSatisfy {
                guard let d = $0.objectValue else { return false }
                return states.contains(d["state"]?.stringValue ?? "") && also(d)
            }
        }
        return last
    }

    /// A test that threw before `stop()` still shuts its HTTP clients down: a debug build of AsyncHTTPClient
    /// traps when a client is released while running. After `stop()` this does nothing.
    deinit {
        let (http, receipts) = (http, receipts)
        Task {
            try? await http.shutdown()
            await receipts.shutdown()
        }
    }

    func stop(keepFiles: Bool = false) async {
        await group.triggerGracefulShutdown()
        _ = try? await running.value
        await gateway.close()
        try? await http.shutdown()
        await receipts.shutdown()
        if ownsAPNs { await apns.stop() }
        if !keepFiles { try? FileManager.default.removeItem(at: directory) }
    }
}

extension JSONValue {
    var arrayValue: [JSONValue]? { if case let .array(a) = self { a } else { nil } }
}

/// Runs `body` with a harness, stopping it afterwards whatever happens.
func withGateway(_ name: String, options: GatewayOptions = GatewayOptions(), extraApp: JSONObject = JSONObject([]),
                 extraRoot: JSONObject = JSONObject([]), database: String = "sqlite:gateway.db", apiPort: Int? = nil,
                 otherApp: JSONObject = JSONObject([]), _ body: (GatewayHarness) async throws -> Void) async throws {
    let harness = try await GatewayHarness(name: name, options: options, extraApp: extraApp, extraRoot: extraRoot, database: database,
                                           apiPort: apiPort, otherApp: otherApp)
    do { try await body(harness) } catch {
        await harness.stop()
        throw error
    }
    await harness.stop()
}

func hexToken(_ n: Int) -> String { String(format: "%064x", n) }

/// Runs a blocking call (a child process's wait) on a thread of its own, so that it never holds one of the
/// few threads Swift's concurrency pool has: the in-process servers of the tests running beside it need them.
func offPool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.start()
    }
}

/// The gateway suites that need no database server, one at a time: each starts servers in this process, and
/// on a 2-core machine several at once beside the other targets' suites starve the concurrency pool the tests
/// share. They run beside `GatewayPostgresSuites`, so at most two of the gateway suites run at once.
@Suite("Gateway", .serialized)
enum GatewaySuites {}

/// The suites that use the shared PostgreSQL cluster, one at a time (one of them restarts the cluster), beside
/// the other gateway suites (`GatewaySuites`).
@Suite("Gateway on PostgreSQL", .serialized)
enum GatewayPostgresSuites {}
