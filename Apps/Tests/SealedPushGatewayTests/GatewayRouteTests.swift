import Foundation
import GRDB
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import NIOCore
import NIOHTTP1
import SealedPushAPNs
@testable import SealedPushGateway
import SealedPushAPNsServer
import SealedPushTestSupport
import SealedPushWire
import SealedPushCrypto
import Testing

/// A gateway over a fresh SQLite file whose routers are tested in process (HummingbirdTesting's `.router`: no
/// socket, no APNs running, no delivery worker): routes, errors, idempotency and authentication.
struct InProcessGateway {
    let directory: URL
    let gateway: Gateway
    let logger: Logger

    static func make(_ name: String, options: GatewayOptions = GatewayOptions(), extraApp: JSONObject = JSONObject([]),
                     extraRoot: JSONObject = JSONObject([])) async throws -> InProcessGateway {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("gateway-routes-\(name)-\(UUID().uuidString)")
        let (_, pem) = try APNsSigningKey.generateForDevelopment(keyID: "KEY0000001", teamID: "TEAM000001")
        // Port 9 (discard): nothing is delivered in these tests; a CA file is still required by the configuration.
        let path = try GatewayHarness.writeConfiguration(in: directory, apnsKeyPEM: pem, apnsPort: 9, caPEM: TestCA.pem,
                                                         extraApp: extraApp, extraRoot: extraRoot)
        var logger = Logger(label: "gateway-route-test")
        logger.logLevel = .critical
        let gateway = try await Gateway.open(configuration: try GatewayConfiguration.load(path: path), options: options, logger: logger)
        return InProcessGateway(directory: directory, gateway: gateway, logger: logger)
    }

    /// Runs `body` against the API router in process.
    func api<T: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        try await Application(router: GatewayHTTP.apiRouter(gateway, logger: logger)).test(.router, body)
    }

    /// Runs `body` against the admin router in process.
    func admin<T: Sendable>(_ body: @Sendable (any TestClientProtocol) async throws -> T) async throws -> T {
        try await Application(router: GatewayHTTP.adminRouter(gateway, logger: logger)).test(.router, body)
    }

    /// The API router as the loopback tests' `GatewayClient` reads it: one in-process request per call.
    var api: RouterClient { RouterClient(router: { GatewayHTTP.apiRouter(gateway, logger: logger) }) }
    /// The admin router, the same way.
    var admin: RouterClient { RouterClient(router: { GatewayHTTP.adminRouter(gateway, logger: logger) }) }

    /// Registers `phone` as `device` of `user` in app `chat`.
    @discardableResult
    func register(_ phone: Phone, device: String, user: String) async throws -> Answer {
        try await api.call(.PUT, "/v1/apps/chat/devices/\(device)", json: registration(phone, user: user))
    }

    /// Sends `body` to `to` in app `chat`.
    func send(_ to: JSONObject, body: String = "the secret", extra: JSONObject = JSONObject([]), headers: [(String, String)] = []) async throws -> Answer {
        var o = JSONObject([("to", .object(to)), ("body", .string(body))])
        for m in extra { o[m.key] = m.value }
        return try await api.call(.POST, "/v1/apps/chat/messages", json: .object(o), headers: headers)
    }

    func close() async {
        await gateway.close()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Runs `body` with a fresh in-process gateway, closing it whatever happens.
    static func with(_ name: String, options: GatewayOptions = GatewayOptions(), extraApp: JSONObject = JSONObject([]),
                     extraRoot: JSONObject = JSONObject([]), _ body: (InProcessGateway) async throws -> Void) async throws {
        let g = try await make(name, options: options, extraApp: extraApp, extraRoot: extraRoot)
        do { try await body(g) } catch {
            await g.close()
            throw error
        }
        await g.close()
    }
}

/// In-process requests to a router with the loopback client's signature (`GatewayClient.call`), answered as `Answer`s.
struct RouterClient: Sendable {
    let router: @Sendable () -> Router<GatewayRequestContext>

    func call(_ method: NIOHTTP1.HTTPMethod, _ path: String, key: String? = Keys.all, json: JSONValue? = nil, raw: [UInt8]? = nil,
              contentType: String? = "application/json", headers: [(String, String)] = []) async throws -> Answer {
        var fields = HTTPFields()
        if let key { fields[.authorization] = "Bearer \(key)" }
        var body: ByteBuffer?
        if let bytes = raw ?? json.map({ JSON.serialize($0) }) {
            if let contentType { fields[.contentType] = contentType }
            body = ByteBuffer(bytes: bytes)
        }
        for (name, value) in headers { fields.append(HTTPField(name: HTTPField.Name(name)!, value: value)) }
        let (request, payload) = (fields, body)
        return try await Application(router: router()).test(.router) { client in
            let response = try await client.execute(uri: path, method: HTTPRequest.Method(rawValue: method.rawValue)!, headers: request, body: payload)
            return Answer(status: Int(response.status.code), headers: response.headers.map { ($0.name.rawName, $0.value) },
                          body: Array(response.body.readableBytesView))
        }
    }
}

/// A self-signed CA certificate's PEM, made once: the configuration needs a readable `ca_cert`.
enum TestCA {
    static let pem: String = {
        (try? LocalCertificateAuthority.make())?.caPEM ?? ""
    }()
}

extension TestClientProtocol {
    /// A request with the bearer key and, for a body, `Content-Type: application/json`.
    func call(_ method: HTTPRequest.Method, _ uri: String, key: String? = Keys.all, json: JSONValue? = nil,
              headers extra: HTTPFields = [:]) async throws -> TestResponse {
        var headers = extra
        if let key { headers[.authorization] = "Bearer \(key)" }
        var body: ByteBuffer?
        if let json {
            headers[.contentType] = "application/json"
            body = ByteBuffer(bytes: JSON.serialize(json))
        }
        return try await execute(uri: uri, method: method, headers: headers, body: body)
    }
}

extension TestResponse {
    var json: JSONObject {
        (try? JSON.parse(Array(body.readableBytesView))).flatMap { if case let .object(o) = $0 { o } else { nil } } ?? JSONObject([])
    }
    var code: String? { json["type"]?.stringValue.map { String($0.dropFirst("urn:sealedpush:problem:".count)) } }
    var text: String { String(buffer: body) }
}

/// A device registration body for `phone`, as `user`.
func registration(_ phone: Phone, user: String, record: JSONObject? = nil) -> JSONValue {
    .object(JSONObject([("user_id", .string(user)), ("apns_token", .string(phone.token)), ("environment", "sandbox"),
                        ("key_record", .object(record ?? phone.record))]))
}

extension GatewaySuites {
    /// The routes, errors and rules of gateway v1 §3–§6 in process, over the routers themselves (#36: routes over a
    /// `Gateway` service, errors mapped to problems in one place).
    @Suite("Gateway routes in process", .serialized, .timeLimit(.minutes(5)))
    struct GatewayRouteTests {
        /// #36 bug 2: a known path with a method it does not take is `405` with `Allow`, not `404 no such route`.
        @Test func aKnownPathWithAnotherMethodIs405WithAllow() async throws {
            try await InProcessGateway.with("405") { g in
                try await g.api { client in
                    for (method, uri, allow) in [(HTTPRequest.Method.patch, "/v1/apps/chat/devices/d1", "PUT, GET, DELETE"),
                                                 (.put, "/v1/apps/chat/messages", "POST"),
                                                 (.get, "/v1/receipts", "POST"),
                                                 (.post, "/v1/apps/chat/messages/abc", "GET, DELETE")] {
                        let answer = try await client.call(method, uri)
                        #expect(answer.status == .methodNotAllowed, "\(method) \(uri): \(answer.status)")
                        #expect(answer.code == "method_not_allowed")
                        #expect(answer.headers[HTTPField.Name("Allow")!] == allow, "\(method) \(uri)")
                        #expect(answer.headers[.contentType] == "application/problem+json")
                        #expect(answer.headers[HTTPField.Name("Request-Id")!]?.count == 24)
                    }
                    // An unknown path is still 404.
                    #expect(try await client.call(.get, "/v1/apps/chat/nothing").status == .notFound)
                }
            }
        }

        /// #36 bug 3: one rule for a path id outside the id syntax, whatever the method: `400 invalid_field`. A
        /// well-formed id that names nothing is `404`.
        @Test func anInvalidPathIDIs400OnEveryMethod() async throws {
            try await InProcessGateway.with("pathids") { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.api { client in
                    for bad in [String(repeating: "d", count: 129), "a%00b", "..%2Fx", "-leading"] {
                        for method in [HTTPRequest.Method.get, .delete] {
                            let answer = try await client.call(method, "/v1/apps/chat/devices/\(bad)")
                            #expect(answer.status == .badRequest && answer.code == "invalid_field", "\(method) \(bad): \(answer.status) \(answer.text)")
                        }
                        let put = try await client.call(.put, "/v1/apps/chat/devices/\(bad)", json: registration(phone, user: "u"))
                        #expect(put.status == .badRequest && put.code == "invalid_field", "PUT \(bad): \(put.status)")
                        let user = try await client.call(.get, "/v1/apps/chat/users/\(bad)/devices")
                        #expect(user.status == .badRequest && user.code == "invalid_field", "GET user \(bad): \(user.status)")
                    }
                    let badMessage = try await client.call(.get, "/v1/apps/chat/messages/" + String(repeating: "m", count: 65))
                    #expect(badMessage.status == .badRequest && badMessage.code == "invalid_field")
                    #expect(try await client.call(.get, "/v1/apps/chat/devices/never-registered").status == .notFound)
                    #expect(try await client.call(.get, "/v1/apps/chat/messages/0123456789ab_unknown").status == .notFound)
                }
            }
        }

        /// Security review: a device record whose public key is a low-order point is refused at `PUT`, naming the
        /// member; and a stored record that cannot be sealed to makes that device `skipped` (`bad_key_record`),
        /// never the whole message.
        @Test func aKeyThatCannotBeSealedToIsRefusedAndSkipped() async throws {
            try await InProcessGateway.with("loworder") { g in
                let good = try Phone(in: g.directory, name: "good", token: hexToken(1))
                let other = try Phone(in: g.directory, name: "other", token: hexToken(2))
                // A well-formed record (its key id matches its key) whose key is the all-zero, low-order point.
                let lowOrder = DeviceKeyRecord(publicKey: try BoxPublicKey(bytes: [UInt8](repeating: 0, count: 32)), createdAt: nil).jsonObject
                let refused = try await g.api { client in
                    try await client.call(.put, "/v1/apps/chat/devices/zero", json: registration(other, user: "u", record: lowOrder))
                }
                #expect(refused.status == .badRequest, "\(refused.text)")
                #expect(refused.json["field"]?.stringValue == "/key_record/public_key" || refused.json["field"]?.stringValue?.hasPrefix("/key_record") == true,
                        "\(refused.text)")

                // A record stored before the check (or by an older gateway) is skipped at send time.
                let registered = try await g.api { client in
                    try await client.call(.put, "/v1/apps/chat/devices/good", json: registration(good, user: "u"))
                }
                #expect(registered.status == .created)
                var stored = try #require(try await g.gateway.store.device(app: "chat", deviceID: "good"))
                stored = DeviceRecord(app: "chat", deviceID: "bad", userID: "u", address: other.token, environment: .sandbox,
                                      keyRecord: JSON.serialize(.object(lowOrder)), keyID: stored.keyID, state: .active,
                                      createdAt: stored.createdAt, updatedAt: stored.updatedAt, registeredAt: stored.registeredAt,
                                      unregisteredAt: nil, unregisteredReason: nil, tokenReassigned: false, lastReport: nil)
                _ = try await g.gateway.store.putDevice(stored, maxDevicesPerUser: 100)
                let body = JSONValue.object(JSONObject([("to", .object(JSONObject([("user_id", "u")]))), ("body", "hi")]))
                let (sent, replay) = try await g.api { client in
                    (try await client.call(.post, "/v1/apps/chat/messages", json: body, headers: [HTTPField.Name("Idempotency-Key")!: "k1"]),
                     try await client.call(.post, "/v1/apps/chat/messages", json: body, headers: [HTTPField.Name("Idempotency-Key")!: "k1"]))
                }
                #expect(sent.status == .accepted, "\(sent.text)")
                #expect(sent.json["deliveries"]?.arrayValue?.compactMap { $0.objectValue?["device_id"]?.stringValue } == ["good"])
                let skipped = sent.json["skipped"]?.arrayValue?.compactMap { $0.objectValue } ?? []
                #expect(skipped.map { $0["device_id"]?.stringValue } == ["bad"] && skipped.first?["reason"]?.stringValue == "bad_key_record")
                #expect(replay.status == .accepted && replay.text == sent.text, "the 202 is what is replayed")
            }
        }

        /// Gateway v1 §5 (revision 2): a message beyond the app's `max_fanout` is `422 too_many_deliveries` and stores nothing.
        @Test func aFanOutBeyondMaxFanoutIs422AndStoresNothing() async throws {
            try await InProcessGateway.with("fanout", extraApp: JSONObject([("max_fanout", .int(2))])) { g in
                try await g.api { client in
                    for n in 1...3 {
                        let phone = try Phone(in: g.directory, name: "p\(n)", token: hexToken(n))
                        #expect(try await client.call(.put, "/v1/apps/chat/devices/d\(n)", json: registration(phone, user: "u")).status == .created)
                    }
                    let body = JSONValue.object(JSONObject([("to", .object(JSONObject([("user_id", "u")]))), ("body", "hi")]))
                    let refused = try await client.call(.post, "/v1/apps/chat/messages", json: body)
                    #expect(refused.status == .unprocessableContent && refused.code == "too_many_deliveries", "\(refused.text)")
                    #expect(refused.text.contains("max_fanout"))
                    let two = JSONValue.object(JSONObject([("to", .object(JSONObject([("device_ids", .array(["d1", "d2"]))]))), ("body", "hi")]))
                    #expect(try await client.call(.post, "/v1/apps/chat/messages", json: two).status == .accepted)
                }
                #expect(try await g.gateway.store.queueDepths()["chat"]?.queued == 2, "only the message within the bound was stored")
            }
        }

        /// An error the gateway does not know is `500 internal` naming the request id, never a fake `503`; a database
        /// that does not answer is `503 unavailable`.
        @Test func anUnknownErrorIs500WithTheRequestID() async throws {
            struct Unexpected: Error {}
            let router = Router(context: GatewayRequestContext.self)
            let g = try await InProcessGateway.make("internal")
            defer { Task { await g.close() } }
            router.add(middleware: RequestMiddleware(metrics: g.gateway.metrics, logger: g.logger))
            router.get("boom") { _, _ -> Response in throw Unexpected() }
            try await Application(router: router).test(.router) { client in
                let answer = try await client.execute(uri: "/boom", method: .get)
                #expect(answer.status == .internalServerError)
                #expect(answer.code == "internal")
                let id = try #require(answer.headers[HTTPField.Name("Request-Id")!])
                #expect(answer.text.contains(id), "the detail names the request id to report")
            }
            #expect(GatewayError(classifying: Unexpected(), requestID: "r") == .internal(requestID: "r"))
            #expect(GatewayError(classifying: GatewayError.notFound("x"), requestID: "r") == .notFound("x"))
            // A database that does not answer (in time) is 503, whatever layer says so.
            #expect(GatewayError(classifying: GatewayStoreError("no answer within 15 s", unavailable: true), requestID: "r").status == .serviceUnavailable)
            #expect(GatewayError(classifying: GatewayStoreError("schema too new"), requestID: "r") == .internal(requestID: "r"))
            #expect(GatewayError(classifying: DatabaseError(resultCode: .SQLITE_BUSY), requestID: "r").status == .serviceUnavailable)
        }

        /// The admin listener answers only a `Host` that names it (DNS rebinding), and its dashboard forbids framing,
        /// scripts and referrers.
        @Test func theAdminListenerChecksHostAndSendsSecurityHeaders() async throws {
            let loopback = try #require(GatewayConfiguration.HostAndPort("127.0.0.1:9090"))
            let everywhere = try #require(GatewayConfiguration.HostAndPort("0.0.0.0:9090"))
            func accepts(_ host: String?, _ listen: GatewayConfiguration.HostAndPort, names: Set<String> = []) -> Bool {
                AdminHostMiddleware.accepts(host: host, listen: listen, names: names)
            }
            #expect(accepts("127.0.0.1:9090", loopback))
            #expect(accepts("localhost:9090", loopback))
            #expect(accepts("[::1]:9090", loopback))
            #expect(!accepts("attacker.example", loopback))
            #expect(!accepts("attacker.example:9090", everywhere))
            #expect(accepts("10.0.0.5:9090", everywhere))
            #expect(accepts("metrics.internal:9090", everywhere, names: ["metrics.internal"]))
            #expect(!accepts(nil, loopback))
            try await InProcessGateway.with("admin") { g in
                try await g.admin { client in
                    let page = try await client.execute(uri: "/", method: .get)
                    #expect(page.status == .ok)
                    #expect(page.headers[HTTPField.Name("X-Frame-Options")!] == "DENY")
                    #expect(page.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer")
                    let csp = try #require(page.headers[HTTPField.Name("Content-Security-Policy")!])
                    #expect(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"))
                    #expect(try await client.execute(uri: "/metrics", method: .post).status == .methodNotAllowed)
                }
            }
        }

        /// Security review: a failure report (unauthenticated) counts only in the app its URL names; one naming no app
        /// changes no device's `last_report` in any app that holds the key id.
        @Test func aFailureReportStaysInTheAppItNames() async throws {
            try await InProcessGateway.with("reports") { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                let kid = try #require(phone.record["key_id"]?.stringValue)
                let report = JSONValue.object(JSONObject([("v", .int(1)), ("type", "failed"), ("reason", "unknownKey"), ("kid", .string(kid)),
                                                          ("at", .int(1_795_000_000)), ("count", .int(2))]))
                try await g.api { client in
                    #expect(try await client.call(.put, "/v1/apps/chat/devices/d", json: registration(phone, user: "u")).status == .created)
                    for uri in ["/v1/reports", "/v1/reports?app=other", "/v1/reports?app=nosuchapp"] {
                        #expect(try await client.call(.post, uri, key: nil, json: report).status == .accepted)
                        #expect(try await client.call(.get, "/v1/apps/chat/devices/d").json["last_report"] == .null, "\(uri) reached app chat")
                    }
                    #expect(try await client.call(.post, "/v1/reports?app=chat", key: nil, json: report).status == .accepted)
                    let shown = try await client.call(.get, "/v1/apps/chat/devices/d").json["last_report"]?.objectValue
                    #expect(shown?["kid"]?.stringValue == kid && shown?["count"] == .int(2))
                }
            }
        }

        /// Gateway v1 §5.1: a batch answers `200` with one result per message in request order, each what `POST
        /// …/messages` would answer alone (checks, idempotency key and replay); the whole request is refused only for
        /// its shape, its size and an `Idempotency-Key` header; each message takes one token of the rate limit.
        @Test func aBatchAnswersEachMessageAsAloneInOrder() async throws {
            var options = GatewayOptions()
            // The monotonic reading stands still: the rate limit does not refill during the test, however slow the machine.
            let frozen = SealedPushManualClock()
            options.clock = SealedPushClock(wall: SealedPushClock.system.wall, monotonic: frozen.clock.monotonic)
            try await InProcessGateway.with("batch", options: options, extraApp: JSONObject([("rate_limit", .int(8))])) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                try await g.register(phone, device: "d1", user: "u1")
                func message(_ body: String, to user: String = "u1", key: String? = nil, extra: JSONObject = JSONObject([])) -> JSONValue {
                    var o = JSONObject([("to", .object(JSONObject([("user_id", .string(user))]))), ("body", .string(body))])
                    if let key { o["idempotency_key"] = .string(key) }
                    for m in extra { o[m.key] = m.value }
                    return .object(o)
                }
                let batch = JSONValue.object(JSONObject([("messages", .array([
                    message("one", key: "k-1"),
                    message("two", extra: JSONObject([("tittle", "typo")])),
                    message("three", to: "nobody"),
                    message("one", key: "k-1"),
                    message("one again", key: "k-1"),
                ]))]))
                let answer = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: batch)
                #expect(answer.status == 200, "\(answer.text)")
                let results = (answer.json["results"]?.arrayValue ?? []).compactMap { $0.objectValue }
                try #require(results.count == 5, "\(answer.text)")
                #expect(results.map { $0["status"] } == [.int(202), .int(400), .int(404), .int(202), .int(422)], "\(answer.text)")
                let first = try #require(results[0]["message"]?.objectValue)
                #expect(first["deliveries"]?.arrayValue?.count == 1)
                #expect(results[1]["problem"]?.objectValue?["field"]?.stringValue == "/tittle")
                #expect(results[3]["replayed"] == .bool(true) && results[3]["message"] == results[0]["message"], "the key's first answer, replayed")
                #expect(results[4]["problem"]?.objectValue?["type"]?.stringValue == "urn:sealedpush:problem:idempotency_conflict")
                #expect(try await g.gateway.store.queueDepths()["chat"]?.queued == 1, "only the first message was stored")

                // The bucket (8: one token taken by the PUT, five by the batch above) runs out midway: two messages are
                // sent, the other four get 429 results.
                let six = JSONValue.object(JSONObject([("messages", .array((1...6).map { message("m\($0)") }))]))
                let limited = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: six)
                #expect(limited.status == 200)
                let statuses = (limited.json["results"]?.arrayValue ?? []).compactMap { $0.objectValue?["status"]?.intValue }
                #expect(statuses == [202, 202, 429, 429, 429, 429], "\(statuses)")

                // Refused as a whole: shape, header, size.
                for bad in [JSONValue.object(JSONObject([("messages", .array([]))])),
                            .object(JSONObject([("messages", .array((0..<501).map { _ in message("x") }))])),
                            .object(JSONObject([("messages", .array(["not an object"]))])),
                            .object(JSONObject([("messages", .array([message("x")])), ("extra", .int(1))]))] {
                    let refused = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: bad)
                    #expect(refused.status == 400, "\(refused.text)")
                }
                let withHeader = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", json: .object(JSONObject([("messages", .array([message("x")]))])),
                                                      headers: [("Idempotency-Key", "batch-1")])
                #expect(withHeader.status == 400 && withHeader.text.contains("idempotency_key"))
                let huge = try await g.api.call(.POST, "/v1/apps/chat/messages/batch", raw: Array(repeating: 0x20, count: (4 << 20) + 1))
                #expect(huge.status == 413 && huge.text.contains("4 MiB"))
                // GET on the batch path is 405 naming POST only (the literal route, not messages/{message_id}).
                let get = try await g.api.call(.GET, "/v1/apps/chat/messages/batch")
                #expect(get.status == 405 && get.header("Allow") == "POST", "\(get.status) \(get.header("Allow") ?? "")")
            }
        }
    }
}
