import Foundation
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import Testing

extension GatewaySuites {
    /// #44 pilot 6, the smaller items.
    @Suite("Gateway pilot: smaller items", .serialized, .timeLimit(.minutes(3)))
    struct GatewayPilotSmallTests {
        /// `HEAD` on `/healthz`, `/readyz` and `/openapi.json` is answered as `GET` without a body, not `405`.
        @Test func headIsAnsweredAsGetWithoutABody() async throws {
            try await InProcessGateway.with("head") { g in
                let get = try await g.api.call(.GET, "/openapi.json", key: nil)
                let head = try await g.api.call(.HEAD, "/openapi.json", key: nil)
                #expect(head.status == 200 && head.body.isEmpty, "\(head.status) \(head.body.count) bytes")
                #expect(head.header("Content-Type") == get.header("Content-Type"))
                for path in ["/healthz", "/readyz"] {
                    let probe = try await g.admin.call(.HEAD, path, key: nil)
                    let full = try await g.admin.call(.GET, path, key: nil)
                    #expect(probe.status == full.status && probe.body.isEmpty && !full.body.isEmpty, "\(path): \(probe.status)")
                }
                // Other methods there are still 405.
                #expect(try await g.api.call(.DELETE, "/openapi.json", key: nil).status == 405)
            }
        }

        /// One API key hash listed in two apps is refused at load, naming both apps.
        @Test func aKeyHashInTwoAppsIsRefused() throws {
            let directory = try GatewayHarness.parseTestDirectory("duplicate-key")
            defer { try? FileManager.default.removeItem(at: directory) }
            func app(_ id: String, _ hash: String) -> String {
                #"{"id": "\#(id)", "topic": "com.example.\#(id)", "apns": {"auth_key": "key.p8", "key_id": "KEY0000001", "team_id": "TEAM000001"}, "api_keys": [{"id": "k-\#(id)", "sha256": "\#(hash)", "scopes": ["send"]}]}"#
            }
            func text(_ second: String) -> [UInt8] {
                Array(#"{"public_url": "https://push.example.com", "apps": [\#(app("chat", String(repeating: "ab", count: 32))), \#(app("shop", second))]}"#.utf8)
            }
            #expect(try GatewayConfiguration.parse(text(String(repeating: "cd", count: 32)), baseDirectory: directory.path).apps.count == 2)
            do {
                _ = try GatewayConfiguration.parse(text(String(repeating: "AB", count: 32)), baseDirectory: directory.path)
                Issue.record("a key hash in two apps was accepted")
            } catch {
                #expect(error.member == "/apps/shop/api_keys" && error.problem.contains("\"chat\"") && error.problem.contains("k-shop"), "\(error)")
            }
        }
    }
}
