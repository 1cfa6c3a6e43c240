import _CryptoExtras
import Foundation
import SealedPushCLI
import SealedPushCrypto
import SealedPushDevice
import SealedPushFCM
import SealedPushFCMServer
import SealedPushKeychain
import SealedPushTestSupport
import SealedPushWire
import Synchronization
import Testing

/// A wall clock the tests move by hand, Unix seconds.
final class FCMTestClock: Sendable {
    let seconds = Mutex<Int64>(Int64(Date().timeIntervalSince1970))
    var now: Int64 { seconds.withLock { $0 } }
    func advance(_ by: Int64) { seconds.withLock { $0 += by } }
}

@Suite("fcm serve: the local FCM over loopback, with the real FCM client", .serialized, .timeLimit(.minutes(10)))
struct LocalFCMServerTests {
    let token = "fcm-token-of-the-android:APA91bH_phone-0123456789abcdef"
    let goneToken = "fcm-token-uninstalled:APA91bH_gone-0123456789abcdef"
    let otherProjectToken = "fcm-token-other-project:APA91bH_other-0123456789"

    func configuration(_ account: FCMServiceAccount, failRate: Double = 0, retryAfter: Int? = nil,
                       now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }) -> LocalFCMConfiguration {
        LocalFCMConfiguration(serviceAccount: account, devices: [token], unregistered: [goneToken], senderMismatch: [otherProjectToken],
                              failRate: failRate, retryAfterSeconds: retryAfter, now: now)
    }

    @Test("the FCM client sends a sealed message: accepted with a name, and the Android device opens it (decrypted)")
    func clientSendsToTheSimulatedDevice() async throws {
        let directory = try fcmScratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let account = try FCMFixtures.account()
        let device = try FCMTestDevice(in: directory)
        let fcm = try await RunningLocalFCM(configuration: configuration(account), directory: directory)
        let client = try fcm.client(account)
        let result = await client.send(try device.messageBody(token: token, collapseID: "thread-7"))
        await client.shutdown()
        #expect(result.status == 200)
        guard case let .accepted(name?) = result.outcome else {
            Issue.record("not accepted with a name: \(result)")
            await fcm.stop()
            return
        }
        #expect(name.hasPrefix("projects/demo-project/messages/0:"))
        let accepted = try #require(try await firstElement(of: fcm.accepted, within: .seconds(30), "the accepted message"))
        await fcm.stop()
        #expect(accepted.name == name && accepted.token == token && accepted.deviceKnown)
        #expect(accepted.collapseKey == "thread-7" && accepted.priority == "HIGH" && accepted.ttlSeconds.map { (3500...3600).contains($0) } == true)
        #expect(accepted.data.map(\.key) == ["ENCRYPTED_DATA", "sealedpush"])
        // The device: the same receiver core as an iPhone's.
        let store = try KeychainStore(url: URL(fileURLWithPath: device.keychain))
        let delivery = await FCMReceiving.deliver(data: accepted.data, store: store, requestIdentifier: accepted.collapseKey)
        #expect(delivery.result.outcome == .decrypted, "\(delivery.result) \(delivery.problem ?? "")")
        #expect(delivery.result.notification?.title == "Agent K")
        #expect(delivery.result.notification?.body == "The eagle lands at noon.")
        #expect(delivery.result.notification?.userInfo["aps"] == nil)
        #expect(fcm.rules.counts.tokensIssued == 1 && fcm.rules.counts.accepted == 1)
        // The same message again under another request identifier: a replay, shown as the placeholder.
        let again = await FCMReceiving.deliver(data: accepted.data, store: store, requestIdentifier: "another")
        #expect(again.result.outcome == .fallback && again.result.reason == .replayed)
        #expect(again.result.notification?.body == "(Encrypted)")
        // ... and under the same one (the same collapse key): the same notification, opened again.
        let same = await FCMReceiving.deliver(data: accepted.data, store: store, requestIdentifier: accepted.collapseKey)
        #expect(same.result.outcome == .decrypted)
    }

    @Test("the token endpoint issues a Bearer token for a good assertion and refuses another key, wrong scope, wrong aud, wrong kid, old iat")
    func tokenEndpointChecksTheAssertion() async throws {
        let directory = try fcmScratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let account = try FCMFixtures.account()
        let fcm = try await RunningLocalFCM(configuration: configuration(account), directory: directory)
        let now = Int64(Date().timeIntervalSince1970)

        let good = try await fcm.exchange(try FCMAssertion.make(account: account, issuedAt: now))
        #expect(good.status == 200)
        let issued = try #require(try JSON.parse(good.body).objectValue)
        #expect(issued["expires_in"] == .int(3600) && issued["token_type"] == .string("Bearer"))
        #expect(issued["access_token"]?.stringValue?.isEmpty == false)

        func refusal(_ response: FCMHTTPResponse) -> (String?, String?) {
            let object = (try? JSON.parse(response.body))?.objectValue
            return (object?["error"]?.stringValue, object?["error_description"]?.stringValue)
        }
        // Signed by another key (same names).
        let other = try FCMFixtures.otherKey.get().account
        let forged = FCMServiceAccount(projectID: account.projectID, privateKeyID: account.privateKeyID, clientEmail: account.clientEmail,
                                       tokenURI: account.tokenURI, privateKey: other.privateKey)
        let wrongKey = try await fcm.exchange(try FCMAssertion.make(account: forged, issuedAt: now))
        #expect(wrongKey.status == 400)
        #expect(refusal(wrongKey).0 == "invalid_grant" && refusal(wrongKey).1?.contains("signature") == true, "\(refusal(wrongKey))")
        // Wrong scope.
        let claims: (String) -> JSONObject = { scope in
            ["iss": .string(account.clientEmail), "scope": .string(scope), "aud": .string(account.tokenURI), "iat": .int(now), "exp": .int(now + 3600)]
        }
        let scope = try await fcm.exchange(try FCMFixtures.jwt(claims: claims("https://www.googleapis.com/auth/cloud-platform.read-only"),
                                                               key: account.privateKey))
        #expect(scope.status == 400 && refusal(scope).0 == "invalid_grant" && refusal(scope).1?.contains("scope") == true, "\(refusal(scope))")
        // Wrong aud: the server's own URL is not the file's token_uri.
        let elsewhere = FCMServiceAccount(projectID: account.projectID, privateKeyID: account.privateKeyID, clientEmail: account.clientEmail,
                                          tokenURI: fcm.tokenURL, privateKey: account.privateKey)
        let aud = try await fcm.exchange(try FCMAssertion.make(account: elsewhere, issuedAt: now))
        #expect(aud.status == 400 && refusal(aud).1?.contains("aud") == true, "\(refusal(aud))")
        // Wrong kid, right key.
        let kid = try await fcm.exchange(try FCMFixtures.jwt(header: ["alg": "RS256", "typ": "JWT", "kid": "0000"],
                                                             claims: claims(FCMAssertion.scope), key: account.privateKey))
        #expect(kid.status == 400 && refusal(kid).1?.contains("kid") == true, "\(refusal(kid))")
        // Issued two hours ago.
        let old = try await fcm.exchange(try FCMAssertion.make(account: account, issuedAt: now - 7200))
        #expect(old.status == 400 && refusal(old).0 == "invalid_grant")
        // alg none, and a form without the JWT-bearer grant.
        let none = try await fcm.exchange(FCMFixtures.base64URL(Array(#"{"alg":"none"}"#.utf8)) + "." + FCMFixtures.base64URL(Array("{}".utf8)) + ".")
        #expect(none.status == 400 && refusal(none).0 == "invalid_grant")
        let grant = try await fcm.exchange(try FCMAssertion.make(account: account, issuedAt: now), grantType: "client_credentials")
        #expect(grant.status == 400 && refusal(grant).0 == "unsupported_grant_type")
        // The gateway's provider reports a refusal in the user's terms (and never the assertion).
        let provider = try fcm.client(forged)
        let refused = await provider.send(Array("{}".utf8))
        await provider.shutdown()
        #expect(refused.outcome == .pauseCredentials(reason: "invalid_grant"), "\(refused)")
        #expect(fcm.rules.counts.tokensIssued == 1)
        await fcm.stop()
    }

    @Test("messages:send refuses a missing, unknown or expired bearer (401), another project (403), bad shapes (400) and bad tokens (404, 403), as FCM does")
    func sendChecksAndAnswersAsFCMDoes() async throws {
        let directory = try fcmScratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let account = try FCMFixtures.account()
        let clock = FCMTestClock()
        let fcm = try await RunningLocalFCM(configuration: configuration(account, now: { clock.now }), directory: directory)
        let bearer = try await fcm.accessToken(account)
        let now = Date()
        func classify(_ response: FCMHTTPResponse) -> FCMOutcome { FCMAnswer.classify(response, now: now) }
        func message(token: String? = nil, data: JSONValue = ["ENCRYPTED_DATA": "AAAA", "sealedpush": "1"],
                     android: JSONValue? = ["priority": "HIGH", "ttl": "3600s", "collapse_key": "c-1"],
                     extra: [(String, JSONValue)] = []) -> [UInt8] {
            var m = JSONObject([("token", .string(token ?? self.token)), ("data", data)])
            if let android { m["android"] = android }
            for (k, v) in extra { m[k] = v }
            return JSON.serialize(.object(JSONObject([("message", .object(m))])))
        }

        let ok = try await fcm.send(message(), bearer: bearer)
        #expect(ok.status == 200 && classify(ok) == .accepted(name: FCMAnswer.acceptedName(ok.body)))

        // 401: none, not one of ours; each is FCM's UNAUTHENTICATED, which the client renews once.
        for bad in [nil, "ya29.not-issued-here"] {
            let r = try await fcm.send(message(), bearer: bad)
            #expect(r.status == 401 && fcmError(r)?.status == "UNAUTHENTICATED" && fcmError(r)?.code == 401, "\(String(decoding: r.body, as: UTF8.self))")
            #expect(classify(r) == .renewTokenAndRetry(reason: fcmError(r)?.reason ?? ""))
        }
        // 403: another project's URL; the gateway pauses the app.
        let project = try await fcm.send(message(), bearer: bearer, project: "someone-else")
        #expect(project.status == 403 && fcmError(project)?.status == "PERMISSION_DENIED")
        #expect(classify(project) == .pauseCredentials(reason: "PERMISSION_DENIED"))

        // 400: the shape, each naming its field, so the client says `rejected` (not `unregistered`).
        let shapes: [(String, [UInt8], String)] = [
            ("a notification block", message(extra: [("notification", ["title": "Hi", "body": "plain text"])]), "message.notification"),
            ("a non-string data value", message(data: ["ENCRYPTED_DATA": "AAAA", "sealedpush": 1]), "message.data[sealedpush]"),
            ("data over 4096 bytes", message(data: ["ENCRYPTED_DATA": .string(String(repeating: "A", count: 4096 - 24)), "sealedpush": "1"]), "message.data"),
            ("a ttl without its unit", message(android: ["ttl": "3600"]), "message.android.ttl"),
            ("an unknown priority", message(android: ["priority": "URGENT"]), "message.android.priority"),
            ("android.notification", message(android: ["notification": ["title": "x"]]), "message.android.notification"),
            ("a reserved data key", message(data: ["ENCRYPTED_DATA": "AAAA", "google.c.a.e": "1"]), "message.data[google.c.a.e]"),
            ("a topic", message(extra: [("topic", "news")]), "message.topic"),
            ("no data", JSON.serialize(["message": ["token": .string(token)]]), "message.data"),
            ("no token", JSON.serialize(["message": ["data": ["sealedpush": "1"]]]), "message"),
            ("not JSON", Array("{\"message\":".utf8), ""),
        ]
        for (what, body, field) in shapes {
            let r = try await fcm.send(body, bearer: bearer)
            #expect(r.status == 400, "\(what): \(r.status)")
            #expect(fcmError(r)?.status == "INVALID_ARGUMENT" && fcmError(r)?.fieldViolations == [field],
                    "\(what): \(String(decoding: r.body, as: UTF8.self))")
            #expect(classify(r).reason == "INVALID_ARGUMENT" && { if case .rejected = classify(r) { true } else { false } }(), "\(what): \(classify(r))")
        }
        // Exactly 4096 bytes of data is within the budget.
        let full = try await fcm.send(message(data: ["ENCRYPTED_DATA": .string(String(repeating: "A", count: 4096 - 25)), "sealedpush": "1"]),
                                      bearer: bearer)
        #expect(full.status == 200)

        // Tokens: not a registration token (400, about the token: unregistered), unknown and uninstalled (404
        // UNREGISTERED), another project's (403 SENDER_ID_MISMATCH).
        let syntax = try await fcm.send(message(token: "not a token!"), bearer: bearer)
        #expect(syntax.status == 400 && classify(syntax) == .unregistered(reason: "INVALID_ARGUMENT"))
        for gone in ["fcm-token-nobody-has:APA91bH_unknown", goneToken] {
            let r = try await fcm.send(message(token: gone), bearer: bearer)
            #expect(r.status == 404 && fcmError(r)?.errorCode == "UNREGISTERED" && fcmError(r)?.status == "NOT_FOUND")
            #expect(classify(r) == .unregistered(reason: "UNREGISTERED"))
        }
        let mismatch = try await fcm.send(message(token: otherProjectToken), bearer: bearer)
        #expect(mismatch.status == 403 && classify(mismatch) == .unregistered(reason: "SENDER_ID_MISMATCH"))
        // Unregistering while running.
        fcm.rules.unregister(token)
        let uninstalled = try await fcm.send(message(), bearer: bearer)
        #expect(uninstalled.status == 404)

        // Bodies past 64 KiB are refused without being read further.
        let huge = Array(repeating: UInt8(ascii: "x"), count: 70_000)
        let hugeSend = try await fcm.send(huge, bearer: bearer)
        #expect(hugeSend.status == 400 && fcmError(hugeSend)?.status == "INVALID_ARGUMENT")
        let hugeToken = try await fcm.post("/token", headers: ["content-type": "application/x-www-form-urlencoded"], body: huge)
        #expect(hugeToken.status == 400 && String(decoding: hugeToken.body, as: UTF8.self).contains("invalid_request"))

        // The token expires after an hour: 401 again.
        clock.advance(3601)
        let expired = try await fcm.send(message(token: goneToken), bearer: bearer)
        #expect(expired.status == 401)
        // Unknown paths are FCM's 404 (rejected, not unregistered).
        let path = try await fcm.post("/v1/projects/demo-project/messages:batchSend", headers: ["authorization": "Bearer \(bearer)"], body: [])
        #expect(path.status == 404 && { if case .rejected = classify(path) { true } else { false } }())
        await fcm.stop()
    }

    @Test("--fail-rate 1: every well-formed message is 503 UNAVAILABLE with Retry-After, which the client retries")
    func failRateOneAnswers503() async throws {
        let directory = try fcmScratchDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let account = try FCMFixtures.account()
        let fcm = try await RunningLocalFCM(configuration: configuration(account, failRate: 1, retryAfter: 7), directory: directory)
        let client = try fcm.client(account)
        let body = try FCMMessage.body(token: token, envelope: Array(repeating: 1, count: 64), priority: 5, messageTTL: 0,
                                       expiresAt: Date().addingTimeInterval(60), now: Date(), collapseID: nil, deliveryID: "d-1")
        for _ in 0..<3 {
            let result = await client.send(body)
            #expect(result.status == 503)
            #expect(result.outcome == .retry(reason: "UNAVAILABLE", retryAfter: .seconds(7)), "\(result)")
        }
        await client.shutdown()
        #expect(fcm.rules.counts.accepted == 0 && fcm.rules.counts.refused == 3)
        await fcm.stop()
    }
}
