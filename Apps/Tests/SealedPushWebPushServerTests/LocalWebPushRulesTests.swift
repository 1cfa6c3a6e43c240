import SealedPushWebPush
import SealedPushWebPushServer
import Testing

/// `LocalWebPushRules` in-process (no sockets): the order of the checks and the edges of each.
@Suite("LocalWebPushRules: a push service's checks, in order")
struct LocalWebPushRulesTests {
    static let now: Int64 = 1_800_000_000
    static let origin = "https://127.0.0.1:8443"
    let key = VAPIDKey.generate().key
    let rules = LocalWebPushRules(configuration: LocalWebPushConfiguration(subscriptions: ["b1"], gone: ["old"]), clock: { LocalWebPushRulesTests.now })

    func headers(aud: String = LocalWebPushRulesTests.origin, exp: Int64 = LocalWebPushRulesTests.now + 3600,
                 extra: [(name: String, value: String)] = [("ttl", "0"), ("content-encoding", "aes128gcm")]) throws -> [(name: String, value: String)] {
        let token = try VAPIDToken.make(key: key, audience: aud, subject: try VAPIDSubject("https://example.com/contact"), expiresAt: exp)
        return [("authorization", VAPIDToken.authorization(token: token, key: key))] + extra
    }

    func body() throws -> [UInt8] {
        try WebPushEncryptor(subscription: WebPushUserAgentKeys.generate().subscriptionKeys).encrypt(Array("{}".utf8))
    }

    func status(_ path: String, _ headers: [(name: String, value: String)], body: [UInt8]? = nil, method: String = "POST") throws -> Int {
        switch rules.answer(method: method, path: path, headers: headers, body: try body ?? self.body(), origin: Self.origin) {
        case .success: return 201
        case let .failure(refusal): return refusal.status
        }
    }

    @Test func pathsAndMethods() throws {
        let good = try headers()
        #expect(try status("/push/b1", good) == 201)
        for path in ["/push/b1/", "/push/", "/push", "//push/b1", "/push/b%31", "/message/b1", "/", "/push/b1/x"] {
            #expect(try status(path, good) == 404, "\(path)")
        }
        #expect(try status("/push/b1", good, method: "PUT") == 405)
        #expect(try status("/push/old", good) == 410)
        #expect(try status("/push/other", good) == 404)
    }

    @Test("acceptUnknown accepts an unknown well-formed id only after every other check; gone stays 410")
    func acceptUnknown() throws {
        var configuration = LocalWebPushConfiguration(subscriptions: ["b1"], gone: ["old"])
        configuration.acceptUnknown = true
        let open = LocalWebPushRules(configuration: configuration, clock: { Self.now })
        func answer(_ path: String, _ headers: [(name: String, value: String)], body: [UInt8]) -> Int {
            switch open.answer(method: "POST", path: path, headers: headers, body: body, origin: Self.origin) {
            case .success: return 201
            case let .failure(refusal): return refusal.status
            }
        }
        #expect(answer("/push/anyone-7", try headers(), body: try body()) == 201)
        #expect(answer("/push/old", try headers(), body: try body()) == 410)
        #expect(answer("/push/anyone-7", [("ttl", "0"), ("content-encoding", "aes128gcm")], body: try body()) == 401)
        #expect(answer("/push/anyone-7", try headers(extra: [("content-encoding", "aes128gcm")]), body: try body()) == 400)
        #expect(answer("/push/anyone-7", try headers(), body: [UInt8](repeating: 0, count: 5000)) == 413)
        #expect(answer("/push/b%31", try headers(), body: try body()) == 404)
        #expect(try status("/push/anyone-7", try headers()) == 404, "without acceptUnknown an unknown id stays 404")
    }

    @Test("the subscription is checked before VAPID, VAPID before the headers, the headers before the body")
    func order() throws {
        #expect(try status("/push/nobody", []) == 404)
        #expect(try status("/push/old", []) == 410)
        #expect(try status("/push/b1", [("ttl", "x")], body: []) == 401)
        #expect(try status("/push/b1", try headers(extra: [("ttl", "x")]), body: []) == 400)
        #expect(try status("/push/b1", try headers(extra: [("ttl", "1"), ("content-encoding", "aes128gcm")]), body: [UInt8](repeating: 0, count: 5000)) == 413)
    }

    @Test func vapidEdges() throws {
        #expect(try status("/push/b1", try headers(exp: Self.now + 24 * 3600)) == 201)
        #expect(try status("/push/b1", try headers(exp: Self.now + 24 * 3600 + 1)) == 401)
        #expect(try status("/push/b1", try headers(exp: Self.now)) == 401)
        #expect(try status("/push/b1", try headers(aud: "https://127.0.0.1:8443/")) == 401)
        #expect(try status("/push/b1", try headers(aud: "https://localhost:8443")) == 401)
        let restricted = LocalWebPushRules(configuration: LocalWebPushConfiguration(subscriptions: ["b1"], applicationServerKey: VAPIDKey.generate().key.publicKeyBytes),
                                           clock: { Self.now })
        guard case let .failure(refusal) = restricted.answer(method: "POST", path: "/push/b1", headers: try headers(), body: try body(), origin: Self.origin) else {
            Issue.record("another application server key was accepted")
            return
        }
        #expect(refusal.status == 403 && refusal.reason == "vapid_key_mismatch")
    }

    @Test func headerEdges() throws {
        let base = try headers(extra: [])
        func with(_ extra: [(name: String, value: String)]) throws -> Int { try status("/push/b1", base + extra) }
        #expect(try with([("ttl", "2419200"), ("content-encoding", "AES128GCM"), ("urgency", "Very-Low"), ("topic", "abc_DEF-123")]) == 201)
        #expect(try with([("ttl", "0"), ("content-encoding", "aes128gcm"), ("topic", String(repeating: "A", count: 32))]) == 201)
        #expect(try with([("ttl", ""), ("content-encoding", "aes128gcm")]) == 400)
        #expect(try with([("ttl", "12345678901"), ("content-encoding", "aes128gcm")]) == 400)
        #expect(try with([("ttl", "1"), ("content-encoding", "aes128gcm"), ("topic", "")]) == 400)
        #expect(try with([("ttl", "1"), ("content-encoding", "aes128gcm"), ("content-encoding", "aes128gcm")]) == 400)
        #expect(try status("/push/b1", base + [("ttl", "1"), ("content-encoding", "aes128gcm")] + base) == 400)
    }

    @Test func bodyEdges() throws {
        let good = try headers()
        let body = try self.body()
        #expect(try status("/push/b1", good, body: Array(body.prefix(86 + 16))) == 400)
        #expect(try status("/push/b1", good, body: Array(body.prefix(86 + 17))) == 201, "a header and the smallest record pass; the browser judges the rest")
        var wrongIDLength = body
        wrongIDLength[20] = 64
        #expect(try status("/push/b1", good, body: wrongIDLength) == 400)
        var notAPoint = body
        notAPoint[21] = 0x05
        #expect(try status("/push/b1", good, body: notAPoint) == 400)
    }

    @Test func faultsAndIDs() throws {
        let always = LocalWebPushRules(configuration: LocalWebPushConfiguration(subscriptions: ["b1"], failRate: 1))
        for _ in 0..<20 { #expect([500, 503].contains(always.fault()?.status ?? 0)) }
        #expect(rules.fault() == nil)
        #expect(LocalWebPushConfiguration.isValidSubscriptionID(String(repeating: "a", count: 128)))
        #expect(!LocalWebPushConfiguration.isValidSubscriptionID(String(repeating: "a", count: 129)))
        #expect(!LocalWebPushConfiguration.isValidSubscriptionID("a.b"))
        #expect(LocalWebPushConfiguration.redacted("browser-1") == "brow…" && LocalWebPushConfiguration.redacted("abc") == "…")
        guard case let .success(a) = rules.answer(method: "POST", path: "/push/b1", headers: try headers(), body: try body(), origin: Self.origin),
              case let .success(b) = rules.answer(method: "POST", path: "/push/b1", headers: try headers(), body: try body(), origin: Self.origin)
        else { Issue.record("not accepted"); return }
        #expect(a.messageID != b.messageID && a.messageID.count == 36 && a.messageID == a.messageID.lowercased())
        #expect(a.ttl == 0 && a.urgency == .normal && a.topic == nil)
    }
}
