import Foundation
import SealedPushGateway
import SealedPushWire
import SealedPushTestSupport
import Testing

extension GatewaySuites {
    /// The registry, authentication, errors, rate limit and idempotency of gateway v1 §2–§5, in process over the
    /// routers (HummingbirdTesting); only the idempotency test, which watches what reaches APNs, runs over loopback.
    @Suite("Gateway API: devices, keys and errors", .serialized, .timeLimit(.minutes(10)))
    struct GatewayAPITests {
        @Test func registerReplaceListAndDeleteDevices() async throws {
            try await InProcessGateway.with("devices") { g in
                let a = try Phone(in: g.directory, name: "a", token: hexToken(1))
                let b = try Phone(in: g.directory, name: "b", token: hexToken(2))
                let created = try await g.register(a, device: "phone-a", user: "u-42")
                #expect(created.status == 201, "\(created.text)")
                #expect(created.json["state"]?.stringValue == "active")
                #expect(created.json["apns_token_suffix"]?.stringValue == String(hexToken(1).suffix(8)))
                #expect(created.json["key_id"]?.stringValue == a.record["key_id"]?.stringValue)
                #expect(created.header("Request-Id")?.count == 24)
                #expect(!created.text.contains(hexToken(1)), "the whole token is never returned")
                let replaced = try await g.register(a, device: "phone-a", user: "u-42")
                #expect(replaced.status == 200)
                try await g.register(b, device: "phone-b", user: "u-42")

                let one = try await g.api.call(.GET, "/v1/apps/chat/devices/phone-a", key: Keys.readOnly)
                #expect(one.status == 200 && one.json["device_id"]?.stringValue == "phone-a")
                let user = try await g.api.call(.GET, "/v1/apps/chat/users/u-42/devices")
                #expect(user.json["devices"]?.arrayValue?.count == 2)

                // The list pages by (updated_at, device_id) with a cursor.
                let page1 = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1")
                #expect(page1.status == 200, "\(page1.text)")
                let cursor = try #require(page1.json["next_cursor"]?.stringValue)
                let page2 = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1&cursor=\(cursor)")
                let ids = (page1.json["devices"]?.arrayValue ?? []) + (page2.json["devices"]?.arrayValue ?? [])
                #expect(Set(ids.compactMap { $0.objectValue?["device_id"]?.stringValue }) == ["phone-a", "phone-b"])
                let page3 = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1&cursor=\(try #require(page2.json["next_cursor"]?.stringValue))")
                #expect(page3.json["devices"]?.arrayValue?.isEmpty == true)
                #expect(page3.json["next_cursor"] == .null)
                let bad = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=5000")
                #expect(bad.status == 400 && bad.code == "invalid_field")

                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/devices/phone-a").status == 204)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/phone-a").status == 404)
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/devices/phone-a").status == 404)
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/users/u-42/devices").status == 204)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/users/u-42/devices").json["devices"]?.arrayValue?.isEmpty == true)
            }
        }

        /// A token another device holds moves: the other device is deleted, its queued deliveries cancelled.
        @Test func aTokenBelongsToOneDevice() async throws {
            try await InProcessGateway.with("reassign") { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(7))
                try await g.register(phone, device: "old", user: "alice")
                let moved = try await g.register(phone, device: "new", user: "bob")
                #expect(moved.status == 201)
                #expect(moved.json["token_reassigned"] == .bool(true))
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/old").status == 404)
            }
        }

        @Test func everyScopeAndKeyRule() async throws {
            try await InProcessGateway.with("auth") { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(3))
                try await g.register(phone, device: "d1", user: "u1")
                let missing = try await g.api.call(.GET, "/v1/apps/chat/devices/d1", key: nil)
                #expect(missing.status == 401 && missing.header("WWW-Authenticate") == "Bearer" && missing.code == "unauthorized")
                #expect(missing.header("Content-Type") == "application/problem+json")
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/d1", key: "sp_" + String(repeating: "Z", count: 40)).status == 401)
                let other = try await g.api.call(.GET, "/v1/apps/chat/devices/d1", key: Keys.otherApp)
                #expect(other.status == 403 && other.code == "forbidden")
                // devices: register, read, delete devices; not send.
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/d1", key: Keys.devicesOnly).status == 200)
                #expect(try await g.api.call(.POST, "/v1/apps/chat/messages", key: Keys.devicesOnly,
                                             json: .object(JSONObject([("to", .object(JSONObject([("user_id", "u1")]))), ("body", "x")]))).status == 403)
                // read: read devices and messages; not register, delete or send.
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices", key: Keys.readOnly).status == 200)
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/devices/d1", key: Keys.readOnly).status == 403)
                let sent = try await g.api.call(.POST, "/v1/apps/chat/messages", key: Keys.sendOnly,
                                                json: .object(JSONObject([("to", .object(JSONObject([("user_id", "u1")]))), ("body", "x")])))
                #expect(sent.status == 202, "\(sent.text)")
                let id = try #require(sent.json["message_id"]?.stringValue)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)", key: Keys.readOnly).status == 200)
                // send: send and read messages; not devices.
                #expect(try await g.api.call(.GET, "/v1/apps/chat/messages/\(id)", key: Keys.sendOnly).status == 200)
                #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/d1", key: Keys.sendOnly).status == 403)
                #expect(try await g.api.call(.DELETE, "/v1/apps/chat/messages/\(id)", key: Keys.readOnly).status == 403)
                // The device endpoints take no key.
                #expect(try await g.api.call(.POST, "/v1/receipts", key: nil, raw: Array("{}".utf8)).status == 400)
            }
        }

        @Test func everyErrorHasItsCode() async throws {
            var options = GatewayOptions()
            options.maxDevicesPerUser = 2
            try await InProcessGateway.with("errors", options: options, extraApp: JSONObject([("rate_limit", .int(1000))])) { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(4))
                try await g.register(phone, device: "d1", user: "u1")

                let notJSON = try await g.api.call(.POST, "/v1/apps/chat/messages", raw: Array("{not json".utf8))
                #expect(notJSON.status == 400 && notJSON.code == "invalid_json", "\(notJSON.text)")
                let unknown = try await g.send(JSONObject([("user_id", "u1")]), extra: JSONObject([("tittle", "x")]))
                #expect(unknown.status == 400 && unknown.code == "unknown_member" && unknown.json["field"]?.stringValue == "/tittle")
                let badTTL = try await g.send(JSONObject([("user_id", "u1")]), extra: JSONObject([("ttl", .int(-1))]))
                #expect(badTTL.status == 400 && badTTL.code == "invalid_field" && badTTL.json["field"]?.stringValue == "/ttl")
                let badTo = try await g.send(JSONObject([("user_id", "u1"), ("device_ids", .array(["d1"]))]))
                #expect(badTo.status == 400, "\(badTo.text)")
                let badToken = try await g.api.call(.PUT, "/v1/apps/chat/devices/d2", json: .object(JSONObject([
                    ("user_id", "u1"), ("apns_token", "xyz"), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
                #expect(badToken.status == 400 && badToken.json["field"]?.stringValue == "/apns_token")
                #expect(!badToken.text.contains("xyz"), "detail never quotes a request value")
                // An odd number of hex digits is no token (APNs tokens are whole bytes): 65 digits are refused, naming the member.
                let oddToken = try await g.api.call(.PUT, "/v1/apps/chat/devices/d2", json: .object(JSONObject([
                    ("user_id", "u1"), ("apns_token", .string(String(repeating: "a", count: 65))), ("environment", "sandbox"),
                    ("key_record", .object(phone.record))])))
                #expect(oddToken.status == 400 && oddToken.code == "invalid_field" && oddToken.json["field"]?.stringValue == "/apns_token",
                        "\(oddToken.text)")
                #expect(oddToken.text.contains("even number"), "\(oddToken.text)")
                var forged = phone.record
                forged["key_id"] = "0000000000000000"
                let badRecord = try await g.api.call(.PUT, "/v1/apps/chat/devices/d2", json: .object(JSONObject([
                    ("user_id", "u1"), ("apns_token", .string(hexToken(5))), ("environment", "sandbox"), ("key_record", .object(forged))])))
                #expect(badRecord.status == 400 && badRecord.json["field"]?.stringValue?.hasPrefix("/key_record") == true, "\(badRecord.text)")
                #expect(badRecord.json["field"]?.stringValue == "/key_record/key_id", "the member that is wrong: \(badRecord.text)")
                // #36 bug 4: an RFC 3339 offset is a valid created_at (a client generated from the OpenAPI document writes
                // dates so); a created_at that is no date names /key_record/created_at, not "type, version, key_id".
                var offset = phone.record
                offset["created_at"] = "2026-11-27T16:27:13+00:00"
                let withOffset = try await g.api.call(.PUT, "/v1/apps/chat/devices/d-offset", json: .object(JSONObject([
                    ("user_id", "u-offset"), ("apns_token", .string(hexToken(11))), ("environment", "sandbox"), ("key_record", .object(offset))])))
                #expect((200...201).contains(withOffset.status), "\(withOffset.text)")
                var notADate = phone.record
                notADate["created_at"] = "27 November 2026"
                let badDate = try await g.api.call(.PUT, "/v1/apps/chat/devices/d-offset2", json: .object(JSONObject([
                    ("user_id", "u-offset"), ("apns_token", .string(hexToken(12))), ("environment", "sandbox"), ("key_record", .object(notADate))])))
                #expect(badDate.status == 400 && badDate.json["field"]?.stringValue == "/key_record/created_at", "\(badDate.text)")
                #expect(!badDate.text.contains("type, version"))
                _ = try await g.api.call(.DELETE, "/v1/apps/chat/devices/d-offset")

                let unsupported = try await g.api.call(.POST, "/v1/apps/chat/messages", raw: Array("{}".utf8), contentType: "text/plain")
                #expect(unsupported.status == 415 && unsupported.code == "unsupported_media_type")
                let huge = try await g.api.call(.POST, "/v1/apps/chat/messages", raw: Array(repeating: 0x20, count: 70_000))
                #expect(huge.status == 413 && huge.code == "too_large")
                let sealedTooLarge = try await g.send(JSONObject([("user_id", "u1")]), body: String(repeating: "x", count: 5000))
                #expect(sealedTooLarge.status == 413 && sealedTooLarge.json["field"]?.stringValue == "/body")
                let detail = sealedTooLarge.json["detail"]?.stringValue ?? ""
                let fits = try #require(detail.components(separatedBy: "at most ").last?.split(separator: " ").first.flatMap { Int($0) },
                                        "the 413 says the largest body: \(detail)")
                #expect(try await g.send(JSONObject([("user_id", "u1")]), body: String(repeating: "x", count: fits)).status == 202)
                #expect(try await g.send(JSONObject([("user_id", "u1")]), body: String(repeating: "x", count: fits + 1)).status == 413)

                let nobody = try await g.send(JSONObject([("user_id", "never-registered")]))
                #expect(nobody.status == 404 && nobody.code == "not_found")
                let p2 = try Phone(in: g.directory, name: "p2", token: hexToken(6))
                let p3 = try Phone(in: g.directory, name: "p3", token: hexToken(8))
                try await g.register(p2, device: "d2", user: "u1")
                let tooMany = try await g.register(p3, device: "d3", user: "u1")
                #expect(tooMany.status == 409 && tooMany.code == "conflict")
                #expect(try await g.api.call(.GET, "/v1/apps/chat/nothing-here").status == 404)

                let ready = try await g.admin.call(.GET, "/readyz", key: nil)
                #expect(ready.status == 200 && ready.json["apps"]?.arrayValue?.count == 2)
                #expect(try await g.admin.call(.GET, "/healthz", key: nil).status == 200)
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains("sealedpush_gateway_http_requests_total"))
                #expect(metrics.contains("sealedpush_gateway_messages_total"))
                #expect(!metrics.contains("\"u1\"") && !metrics.contains("\"d1\"") && !metrics.contains(hexToken(4)), "no label holds a user id, device id or token")
            }
        }

        @Test func theRateLimitAnswers429WithHeaders() async throws {
            try await InProcessGateway.with("rate", extraApp: JSONObject([("rate_limit", .int(3))])) { g in
                // 40 at once, not one after another: under ThreadSanitizer on two cores each request can take
                // longer than the bucket (3 a second) takes to refill, and 8 in a row all passed.
                let answers = try await withThrowingTaskGroup(of: Answer.self) { group in
                    for _ in 0..<40 { group.addTask { try await g.api.call(.GET, "/v1/apps/chat/devices") } }
                    var all: [Answer] = []
                    for try await a in group { all.append(a) }
                    return all
                }
                let statuses = answers.map(\.status)
                #expect(statuses.contains(429), "\(statuses)")
                let limited = try #require(answers.first { $0.status == 429 })
                #expect(limited.status == 429 && limited.code == "rate_limited" && limited.header("Retry-After") != nil)
                #expect(limited.header("RateLimit-Limit") == "3" && limited.header("RateLimit-Remaining") == "0")
            }
        }

        @Test func theServedOpenAPIDocumentIsTheRepositorysFile() async throws {
            try await InProcessGateway.with("openapi") { g in
                let served = try await g.api.call(.GET, "/openapi.json", key: nil)
                let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                    .appendingPathComponent("Sources/SealedPushGateway/API/openapi.json")
                #expect(served.status == 200)
                #expect(served.body == Array(try Data(contentsOf: file)), "run `make openapi` after editing openapi.json")
                #expect(served.json["openapi"]?.stringValue == "3.1.0")
            }
        }

        @Test func idempotencyReplaysConflictsAndKeeps4xx() async throws {
            try await withGateway("idempotency") { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(9))
                try await g.register(phone, device: "d1", user: "u1")
                let key = [("Idempotency-Key", "order-17")]
                let first = try await g.send(JSONObject([("user_id", "u1")]), body: "hello", headers: key)
                #expect(first.status == 202 && first.header("Idempotent-Replayed") == nil)
                // The same body with members in another order is the same request (RFC 8785).
                let again = try await g.api.call(.POST, "/v1/apps/chat/messages",
                                                 raw: Array(#"{"body":"hello","to":{"user_id":"u1"}}"#.utf8), headers: key)
                #expect(again.status == 202 && again.header("Idempotent-Replayed") == "true")
                #expect(again.body == first.body)
                let different = try await g.send(JSONObject([("user_id", "u1")]), body: "other", headers: key)
                #expect(different.status == 422 && different.code == "idempotency_conflict")
                // Nothing was sent twice.
                let id = try #require(first.json["message_id"]?.stringValue)
                try await g.waitForStates(id, ["accepted"])
                #expect(g.apns.pushes.count == 1)
                // A 4xx is kept and replayed.
                let bad = [("Idempotency-Key", "bad-1")]
                let refused = try await g.send(JSONObject([("user_id", "never")]), headers: bad)
                #expect(refused.status == 404)
                let replayed = try await g.send(JSONObject([("user_id", "never")]), headers: bad)
                #expect(replayed.status == 404 && replayed.header("Idempotent-Replayed") == "true")
                let invalidKey = try await g.send(JSONObject([("user_id", "u1")]), headers: [("Idempotency-Key", String(repeating: "k", count: 300))])
                #expect(invalidKey.status == 400)
                // The database holds no body and no plaintext.
                let files = try FileManager.default.contentsOfDirectory(atPath: g.directory.path).filter { $0.hasPrefix("gateway.db") }
                for file in files {
                    let bytes = try Data(contentsOf: g.directory.appendingPathComponent(file))
                    #expect(bytes.range(of: Data("hello".utf8)) == nil, "\(file) holds plaintext")
                }
            }
        }
    }
}
