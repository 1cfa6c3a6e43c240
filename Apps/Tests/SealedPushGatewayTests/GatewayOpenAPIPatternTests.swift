import Foundation
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

/// #44 pilot 7: the path ids' rules are in the OpenAPI document's schemas (a pattern and bounds, not prose only),
/// and the server answers as they say: an id the pattern takes is never 400 (404 when it names nothing), one it
/// refuses is 400 on every route.
@Suite("Gateway OpenAPI: path id patterns", .timeLimit(.minutes(3)))
struct GatewayOpenAPIPatternTests {
    static let samples = ["a", "phone-1", "A.b_c:d@e-f", "9", String(repeating: "x", count: 128), String(repeating: "x", count: 129),
                          String(repeating: "m", count: 64), String(repeating: "m", count: 65), "-lead", ".", "_x", "x y", "é", "a%2Fb", "a.b"]

    @Test func pathIdsFollowTheDocumentsPatterns() async throws {
        try await withGateway("openapi-patterns") { g in
            let document = try #require(try await g.api.call(.GET, "/openapi.json", key: nil).json["components"]?.objectValue)
            let parameters = try #require(document["parameters"]?.objectValue)
            func pattern(_ name: String) throws -> NSRegularExpression {
                let schema = try #require(parameters[name]?.objectValue?["schema"]?.objectValue, "\(name) has no schema")
                let text = try #require(schema["pattern"]?.stringValue, "\(name)'s schema has no pattern")
                #expect(schema["maxLength"] != nil || name == "App", "\(name) has no maxLength")
                return try NSRegularExpression(pattern: text)
            }
            func matches(_ regex: NSRegularExpression, _ id: String) -> Bool {
                regex.firstMatch(in: id, range: NSRange(id.startIndex..., in: id)) != nil
            }
            let routes: [(String, (String) -> String)] = [
                ("DeviceId", { "/v1/apps/chat/devices/\($0)" }),
                ("UserId", { "/v1/apps/chat/users/\($0)/devices" }),
                ("MessageId", { "/v1/apps/chat/messages/\($0)" }),
            ]
            for (name, path) in routes {
                let regex = try pattern(name)
                for id in Self.samples {
                    let encoded = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._:@%"))) ?? id
                    let answer = try await g.api.call(.GET, path(encoded))
                    // "a%2Fb" is sent as is: the server reads the id "a/b", which no pattern takes.
                    let taken = id == "a%2Fb" ? false : matches(regex, id)
                    if taken {
                        #expect(answer.status != 400, "\(name) \(id): the document takes it, the server answered \(answer.status) \(answer.text)")
                    } else {
                        #expect(answer.status == 400, "\(name) \(id): the document refuses it, the server answered \(answer.status)")
                    }
                }
            }
            // Percent-encoded, an id is the same id (schemathesis sent `V.c%3A`): a device registered as `V.c:` is found.
            let phone = try Phone(in: g.directory, name: "colon", token: hexToken(0x3a))
            #expect(try await g.register(phone, device: "V.c:", user: "u:1").status == 201)
            #expect(try await g.api.call(.GET, "/v1/apps/chat/devices/V.c%3A").status == 200)
            #expect(try await g.api.call(.GET, "/v1/apps/chat/users/u%3A1/devices").status == 200)
            #expect(try pattern("App").firstMatch(in: "chat", range: NSRange(location: 0, length: 4)) != nil)
        }
    }
}
