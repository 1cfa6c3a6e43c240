import Foundation
@testable import SealedPushGateway
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewaySuites {
    /// Issue #44, pilot 7: the server takes every request its OpenAPI document allows (what schemathesis
    /// `--checks all` found it refusing), in process.
    @Suite("Gateway OpenAPI contract: what the document allows is taken", .timeLimit(.minutes(3)))
    struct GatewayContractTests {
        /// JSON Schema's `integer` is a number whose value is an integer: `600.0` is `600`. Every integer member of
        /// a message is read so; a fraction is still `400` at its member.
        @Test func integersWrittenWithAFractionOfZeroAreIntegers() async throws {
            try await InProcessGateway.with("integral") { g in
                let phone = try Phone(in: g.directory, name: "p", token: hexToken(1))
                #expect(try await g.register(phone, device: "d1", user: "u").status == 201)
                let sent = try await g.send(["user_id": "u"], extra: JSONObject([("ttl", .double(600.0)), ("badge", .double(3.0)),
                                                                                  ("priority", .double(5.0))]))
                #expect(sent.status == 202, "\(sent.text)")
                let times = (sent.json["created_at"]?.stringValue).flatMap(GatewayTime.parse).flatMap { created in
                    (sent.json["expires_at"]?.stringValue).flatMap(GatewayTime.parse).map { $0 - created }
                }
                #expect(times == 600_000, "ttl 600.0 is 600 seconds")
                let exponent = try await g.api.call(.POST, "/v1/apps/chat/messages",
                                                    raw: Array(#"{"to": {"user_id": "u"}, "body": "b", "ttl": 6e2}"#.utf8))
                #expect(exponent.status == 202, "\(exponent.text)")
                let fraction = try await g.send(["user_id": "u"], extra: JSONObject([("ttl", .double(600.5))]))
                #expect(fraction.status == 400 && fraction.json["field"]?.stringValue == "/ttl")
                let outOfRange = try await g.send(["user_id": "u"], extra: JSONObject([("badge", .double(1e30))]))
                #expect(outOfRange.status == 400 && outOfRange.json["field"]?.stringValue == "/badge")
            }
        }

        /// `maxLength` counts characters: a `thread_id` of 256 characters is taken however many bytes they are (the
        /// sealed size alone bounds the bytes: 413); 257 are `400` at the member.
        @Test func textLimitsCountCharactersAsTheDocumentDoes() async throws {
            try await InProcessGateway.with("characters") { g in
                #expect(try await g.register(try Phone(in: g.directory, name: "p", token: hexToken(1)), device: "d1", user: "u").status == 201)
                let greek = String(repeating: "λ", count: 256)
                let taken = try await g.send(["user_id": "u"], extra: JSONObject([("thread_id", .string(greek)), ("title", .string("τίτλος"))]))
                #expect(taken.status == 202, "\(taken.text)")
                let long = try await g.send(["user_id": "u"], extra: JSONObject([("sound", .string(greek + "λ"))]))
                #expect(long.status == 400 && long.json["field"]?.stringValue == "/sound")
            }
        }

        /// Receipts and reports: `"count": 9999999.0` and `"at": 250.0` are integers; a receipt's `attachments` is
        /// checked as the document says (`failed` keys are reason codes, counts 1–4) and never loses the receipt
        /// for counts that add up past 4. A receipt that reads is `404` for an unknown id (not `400`).
        @Test func receiptsAndReportsTakeWhatTheDocumentAllows() async throws {
            try await InProcessGateway.with("device-bodies") { g in
                let report = #"{"v": 1, "type": "failed", "reason": "unknownKey", "kid": null, "at": 250.0, "count": 9999999.0}"#
                #expect(try await g.api.call(.POST, "/v1/reports?app=chat", key: nil, raw: Array(report.utf8)).status == 202)
                let token = Base64.encodeURLSafeNoPadding([UInt8](repeating: 7, count: 16))
                func receipt(_ attachments: String) -> [UInt8] {
                    Array(#"{"v": 1.0, "type": "delivered", "id": "019abc0f1d2eAAAAAAAAAAAAAA", "token": "\#(token)", "at": 1795000000.0\#(attachments)}"#.utf8)
                }
                #expect(try await g.api.call(.POST, "/v1/receipts", key: nil, raw: receipt("")).status == 404)
                let past4 = #", "attachments": {"attached": 4, "failed": {"attachmentTooLarge": 3, "attachmentUnavailable": 1.0}}"#
                #expect(try await g.api.call(.POST, "/v1/receipts", key: nil, raw: receipt(past4)).status == 404)
                for bad in [#", "attachments": {"attached": 0, "failed": {"x-unknown": 1}}"#,
                            #", "attachments": {"attached": 5, "failed": {}}"#,
                            #", "attachments": {"attached": 0, "failed": {"attachmentCorrupt": 0}}"#,
                            #", "attachments": {"attached": 0, "failed": {}, "more": 1}"#,
                            #", "attachments": {"attached": 0.5, "failed": {}}"#] {
                    let answer = try await g.api.call(.POST, "/v1/receipts", key: nil, raw: receipt(bad))
                    #expect(answer.status == 400 && answer.code == "invalid_json", "\(bad)")
                }
            }
        }

        /// The device list's cursor has the document's pattern (`<updated_at ms>.<device_id>`): any cursor of that
        /// form is a position to list after; an empty one is `400`; cursors of earlier versions (base64url) still work.
        @Test func anyCursorOfTheDocumentsFormIsAPosition() async throws {
            try await InProcessGateway.with("cursor") { g in
                for n in 1...2 {
                    #expect(try await g.register(try Phone(in: g.directory, name: "p\(n)", token: hexToken(n)), device: "d\(n)", user: "u").status == 201)
                }
                let page1 = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1")
                let cursor = try #require(page1.json["next_cursor"]?.stringValue)
                #expect(cursor.wholeMatch(of: /[0-9]{1,16}\.[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}/) != nil, "\(cursor)")
                let page2 = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1&cursor=\(cursor)")
                #expect(page2.status == 200)
                let second = page2.json["devices"]?.arrayValue?.first?.objectValue?["device_id"]
                #expect(second != nil && second != page1.json["devices"]?.arrayValue?.first?.objectValue?["device_id"])
                // The form of earlier versions: base64url of "<ms>:<device_id>".
                let dot = try #require(cursor.firstIndex(of: "."))
                let old = Base64.encodeURLSafeNoPadding(Array("\(cursor[..<dot]):\(cursor[cursor.index(after: dot)...])".utf8))
                let again = try await g.api.call(.GET, "/v1/apps/chat/devices?limit=1&cursor=\(old)")
                #expect(again.status == 200 && again.json["devices"]?.arrayValue?.first?.objectValue?["device_id"] == second)
                // Made up, but of the document's form: a position before every device.
                let madeUp = try await g.api.call(.GET, "/v1/apps/chat/devices?cursor=0.a")
                #expect(madeUp.status == 200 && madeUp.json["devices"]?.arrayValue?.count == 2)
                for bad in ["", "0.", ".d1", "12345678901234567.d1", "x.d1", "AAAA"] {
                    let answer = try await g.api.call(.GET, "/v1/apps/chat/devices?cursor=\(bad)")
                    #expect(answer.status == 400 && answer.code == "invalid_field", "cursor=\(bad)")
                }
            }
        }

        /// `after` of the document's form that names no event kept now is `410 event_not_kept` (events after it may
        /// be gone: list again without it); one not of that form stays `400`.
        @Test func anAfterNoLongerKeptIsGone() async throws {
            try await InProcessGateway.with("after") { g in
                let gone = try await g.api.call(.GET, "/v1/apps/chat/events?after=evt_" + String(repeating: "0", count: 32))
                #expect(gone.status == 410 && gone.code == "event_not_kept", "\(gone.text)")
                #expect(gone.header("Content-Type") == "application/problem+json")
                let malformed = try await g.api.call(.GET, "/v1/apps/chat/events?after=nope")
                #expect(malformed.status == 400 && malformed.code == "invalid_field")
                #expect(try await g.api.call(.GET, "/v1/apps/chat/events").status == 200)
            }
        }
    }
}
