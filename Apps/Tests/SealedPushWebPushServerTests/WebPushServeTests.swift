import Foundation
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// `sealedpush-server webpush serve` as the built binary over loopback: what it accepts and hands to the simulated
/// browser, what it refuses, its faults, and an independent sender in Python.
@Suite("webpush serve: the local Web Push service over loopback", .serialized, .timeLimit(.minutes(10)))
struct WebPushServeTests {
    @Test("a gateway-shaped POST is accepted (201, Location, TTL) and the browser's outcome is decrypted; a retry under the same Topic opens again")
    func acceptsAndDelivers() async throws {
        let b = try Browser()
        let serve = try ServeProcess(["--subscription", "\(b.id)=\(b.keychain)"])
        let client = try PushClient(caPath: serve.caPath)
        let vapid = VAPIDKey.generate().key
        let body = try b.body(envelope: try b.envelope())
        let topic = WebPushRequest.topic(collapseID: "delivery-1")
        let headers = try pushHeaders(key: vapid, audience: serve.origin, topic: topic)
        let answer = try await client.post(serve.endpoint(b.id), headers: headers, body: body)
        #expect(answer.status == 201, "\(answer.json.map { String(describing: $0) } ?? "")")
        let location = try #require(answer.header("Location"))
        #expect(location.hasPrefix(serve.origin + "/message/"))
        #expect(answer.header("TTL") == "60")
        #expect(answer.header("server")?.contains("sealedpush-local-webpush") == true)
        let first = try serve.nextOutcome()
        #expect(first["subscription"] == .string(b.id) && first["outcome"] == .string("decrypted") && first["reason"] == .null, "\(first)")
        #expect(first["message_id"]?.stringValue.map { location.hasSuffix("/" + $0) } == true)
        #expect(first["request_id"] == .string(topic))
        // The same body again with the same Topic (a retry after a lost answer): the same notification, opened again.
        #expect(try await client.post(serve.endpoint(b.id), headers: headers, body: body).status == 201)
        let retry = try serve.nextOutcome()
        #expect(retry["outcome"] == .string("decrypted"), "\(retry)")
        // Without a Topic it is another notification: replayed.
        let untopiced = try pushHeaders(key: vapid, audience: serve.origin)
        #expect(try await client.post(serve.endpoint(b.id), headers: untopiced, body: body).status == 201)
        let replay = try serve.nextOutcome()
        #expect(replay["outcome"] == .string("fallback") && replay["reason"] == .string("replayed"), "\(replay)")
        // A body the browser cannot decrypt is accepted by the service (it cannot tell) and rejected by the browser.
        let other = try Browser(id: "browser-2")
        #expect(try await client.post(serve.endpoint(b.id), headers: untopiced, body: try other.body(envelope: try other.envelope())).status == 201)
        let dropped = try serve.nextOutcome()
        #expect(dropped["outcome"] == .string("rejected") && dropped["reason"] == .string("invalidPayload"), "\(dropped)")
        try await client.shutdown()
        let result = serve.stop()
        #expect(result.exitedNormally && result.status == 0, "\(result.stderr)")
        // Logs name the subscription by its first four characters only, and never hold the body or a token.
        #expect(!result.stderr.contains(b.id) && result.stderr.contains("brow…"), "\(result.stderr)")
        #expect(!result.stderr.contains("vapid t="))
    }

    @Test("refusals: unknown 404, --gone 410, bad VAPID 401, wrong Content-Encoding/TTL/Urgency/Topic 400, too big 413, GET 405")
    func refusals() async throws {
        let b = try Browser()
        let serve = try ServeProcess(["--subscription", "\(b.id)=\(b.keychain)", "--gone", "old-1"])
        let client = try PushClient(caPath: serve.caPath)
        let vapid = VAPIDKey.generate().key, other = VAPIDKey.generate().key
        let body = try b.body(envelope: try b.envelope())
        let url = serve.endpoint(b.id)
        func post(_ headers: [(String, String)], body: [UInt8] = body, to url: String = url) async throws -> PushClient.Answer {
            try await client.post(url, headers: headers, body: body)
        }
        let good = try pushHeaders(key: vapid, audience: serve.origin)
        // Another key signed the token, but k names ours: the signature does not verify.
        let stolenToken = try VAPIDToken.make(key: other, audience: serve.origin, subject: try VAPIDSubject("mailto:x@example.com"),
                                              expiresAt: Int64(Date().timeIntervalSince1970) + 3600)
        let mixed = [("Authorization", "vapid t=\(stolenToken), k=\(vapid.publicKeyBase64URL)")] + good.filter { $0.0 != "Authorization" }
        let cases: [(String, [(String, String)], [UInt8], String, Int, String)] = [
            ("unknown subscription", good, body, serve.endpoint("nobody"), 404, "unknown_subscription"),
            ("gone", good, body, serve.endpoint("old-1"), 410, "subscription_gone"),
            ("wrong aud", try pushHeaders(key: vapid, audience: "https://push.example.net"), body, url, 401, "vapid_wrong_audience"),
            ("another port's aud", try pushHeaders(key: vapid, audience: "https://127.0.0.1:1"), body, url, 401, "vapid_wrong_audience"),
            ("signed by another key", mixed, body, url, 401, "vapid_bad_signature"),
            ("no Authorization", good.filter { $0.0 != "Authorization" }, body, url, 401, "vapid_missing"),
            ("Bearer", [("Authorization", "Bearer abc")] + good.filter { $0.0 != "Authorization" }, body, url, 401, "vapid_malformed_header"),
            ("expired", try pushHeaders(key: vapid, audience: serve.origin, expiresIn: -60), body, url, 401, "vapid_expired"),
            ("exp over 24 h", try pushHeaders(key: vapid, audience: serve.origin, expiresIn: 25 * 3600), body, url, 401, "vapid_expiry_too_far"),
            ("aesgcm", try pushHeaders(key: vapid, audience: serve.origin, encoding: "aesgcm"), body, url, 400, "content_encoding"),
            ("no Content-Encoding", try pushHeaders(key: vapid, audience: serve.origin, encoding: nil), body, url, 400, "content_encoding"),
            ("no TTL", try pushHeaders(key: vapid, audience: serve.origin, ttl: nil), body, url, 400, "missing_ttl"),
            ("TTL not an integer", try pushHeaders(key: vapid, audience: serve.origin, ttl: "1.5"), body, url, 400, "invalid_ttl"),
            ("TTL negative", try pushHeaders(key: vapid, audience: serve.origin, ttl: "-1"), body, url, 400, "invalid_ttl"),
            ("two TTLs", good + [("TTL", "5")], body, url, 400, "duplicate_header"),
            ("Urgency", try pushHeaders(key: vapid, audience: serve.origin, urgency: "urgent"), body, url, 400, "invalid_urgency"),
            ("Topic too long", try pushHeaders(key: vapid, audience: serve.origin, topic: String(repeating: "a", count: 33)), body, url, 400, "invalid_topic"),
            ("Topic not base64url", try pushHeaders(key: vapid, audience: serve.origin, topic: "a+b"), body, url, 400, "invalid_topic"),
            ("too big", good, [UInt8](repeating: 1, count: 4097), url, 413, "payload_too_large"),
            ("much too big", good, [UInt8](repeating: 1, count: 200_000), url, 413, "payload_too_large"),
            ("empty body", good, [], url, 400, "invalid_body"),
            ("not aes128gcm", good, Array("hello, push service".utf8), url, 400, "invalid_body"),
            ("header only", good, Array(body.prefix(86)), url, 400, "invalid_body"),
            ("not /push/ID", good, body, serve.origin + "/other/" + b.id, 404, "not_found"),
        ]
        for (name, headers, requestBody, target, status, reason) in cases {
            let answer = try await post(headers, body: requestBody, to: target)
            #expect(answer.status == status && answer.reason == reason, "\(name): \(answer.status) \(answer.json.map { String(describing: $0) } ?? "-")")
            #expect(answer.json?["message"]?.stringValue?.isEmpty == false, "\(name): a refusal says why")
            #expect(answer.json.map { String(describing: $0).contains(b.id) } != true, "\(name): the subscription id is not echoed")
        }
        let get = try await client.post(url, headers: good, body: [], method: .GET)
        #expect(get.status == 405 && get.header("Allow") == "POST")
        // Nothing refused reached the browser; a good message afterwards still does.
        #expect(try await post(good).status == 201)
        let delivered = try serve.nextOutcome()
        #expect(delivered["outcome"] == .string("decrypted"), "only the accepted message reached the browser: \(delivered)")
        try await client.shutdown()
        #expect(serve.stop().status == 0)
    }

    @Test("SIGTERM: the service stops accepting, the browser still opens every message already accepted, and it exits 0")
    func gracefulShutdownDeliversAccepted() async throws {
        let b = try Browser()
        let serve = try ServeProcess(["--subscription", "\(b.id)=\(b.keychain)"])
        let client = try PushClient(caPath: serve.caPath)
        let vapid = VAPIDKey.generate().key
        for index in 0..<3 {
            let body = try b.body(envelope: try b.envelope(body: "message \(index)"))
            #expect(try await client.post(serve.endpoint(b.id), headers: try pushHeaders(key: vapid, audience: serve.origin), body: body).status == 201)
        }
        try await client.shutdown()
        let result = serve.stop()
        #expect(result.exitedNormally && result.status == 0, "\(result.stderr)")
        let outcomes = result.stdoutText.split(separator: "\n").filter { $0.contains("\"outcome\":\"decrypted\"") }
        #expect(outcomes.count == 3, "\(result.stdoutText)")
    }

    @Test("--application-server-key restricts subscriptions: a valid token from another key is 403, from that key 201")
    func restrictedSubscription() async throws {
        let b = try Browser()
        let vapid = VAPIDKey.generate().key, other = VAPIDKey.generate().key
        let serve = try ServeProcess(["--subscription", "\(b.id)=\(b.keychain)", "--application-server-key", vapid.publicKeyBase64URL])
        let client = try PushClient(caPath: serve.caPath)
        let body = try b.body(envelope: try b.envelope())
        let refused = try await client.post(serve.endpoint(b.id), headers: try pushHeaders(key: other, audience: serve.origin), body: body)
        #expect(refused.status == 403 && refused.reason == "vapid_key_mismatch")
        let accepted = try await client.post(serve.endpoint(b.id), headers: try pushHeaders(key: vapid, audience: serve.origin), body: body)
        #expect(accepted.status == 201)
        #expect(try serve.nextOutcome()["outcome"] == .string("decrypted"))
        try await client.shutdown()
        #expect(serve.stop().status == 0)
    }

    @Test("faults: --fail-rate 1 answers every valid message 500 or 503 and hands none over; --latency delays the answer")
    func faults() async throws {
        let b = try Browser()
        let serve = try ServeProcess(["--subscription", "\(b.id)=\(b.keychain)", "--fail-rate", "1", "--latency", "300ms"])
        let client = try PushClient(caPath: serve.caPath)
        let vapid = VAPIDKey.generate().key
        let body = try b.body(envelope: try b.envelope())
        for _ in 0..<4 {
            let start = ContinuousClock.now
            let answer = try await client.post(serve.endpoint(b.id), headers: try pushHeaders(key: vapid, audience: serve.origin), body: body)
            #expect([500, 503].contains(answer.status) && answer.reason == "fault_injected")
            #expect(ContinuousClock.now - start >= .milliseconds(290))
        }
        try await client.shutdown()
        let result = serve.stop()
        #expect(result.status == 0)
        #expect(!result.stdoutText.contains("outcome"), "no message reached the browser: \(result.stdoutText)")
    }

    @Test("start-up refusals: a keychain without Web Push keys, a bad --subscription, a remote --listen, a bad --application-server-key")
    func startRefusals() throws {
        let bare = try makeScratchDirectory("bare")
        let keychain = bare.appendingPathComponent("k").path
        #expect(try ChildProcess.sealedpush(["keys", "generate", "--keychain", keychain]).status == 0)
        let cases: [([String], String)] = [
            (["--subscription", "b1=\(keychain)"], "device subscribe --keychain \(keychain)"),
            (["--subscription", "b1=\(bare.appendingPathComponent("none").path)"], "keys generate"),
            (["--subscription", "bad id=\(keychain)"], "--subscription"),
            (["--subscription", "b1"], "--subscription"),
            (["--subscription", "b1=\(keychain)", "--gone", "b1"], "--gone"),
            (["--listen", "0.0.0.0:0"], "--allow-remote"),
            (["--application-server-key", "abc"], "--application-server-key"),
            (["--fail-rate", "2"], "--fail-rate"),
        ]
        for (arguments, expected) in cases {
            let r = try ChildProcess.sealedpushServer(["webpush", "serve", "--listen", "127.0.0.1:0", "--ca-out", bare.appendingPathComponent("ca.pem").path]
                                                      + arguments, timeout: 60)
            #expect(r.status != 0 && r.stderr.contains(expected), "\(arguments): \(r.stderr)")
        }
        let help = try ChildProcess.sealedpushServer(["webpush", "serve", "--help"])
        #expect(help.status == 0 && help.stdoutText.contains("Example:") && help.stdoutText.contains("--subscription"))
        let subscribeHelp = try ChildProcess.sealedpush(["device", "subscribe", "--help"])
        #expect(subscribeHelp.status == 0 && subscribeHelp.stdoutText.contains("Example:"))
    }

    /// The independent sender: http_ece encrypts, `cryptography` signs the VAPID JWT, urllib POSTs over TLS trusting the CA.
    static let pythonSender = """
    import sys, json, base64, time, ssl, urllib.request, urllib.error
    import http_ece
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    def d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    def e(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    req = json.load(sys.stdin)
    sub = req["subscription"]
    body = http_ece.encrypt(json.dumps({"ENCRYPTED_DATA": req["envelope"], "sealedpush": 1}).encode(),
                            private_key=ec.generate_private_key(ec.SECP256R1()), dh=d(sub["keys"]["p256dh"]),
                            auth_secret=d(sub["keys"]["auth"]), version="aes128gcm")
    vapid = ec.generate_private_key(ec.SECP256R1())
    h = e(json.dumps({"typ": "JWT", "alg": "ES256"}).encode())
    c = e(json.dumps({"aud": req["origin"], "exp": int(time.time()) + 3600, "sub": "mailto:python@example.com"}).encode())
    r, s = decode_dss_signature(vapid.sign((h + "." + c).encode(), ec.ECDSA(hashes.SHA256())))
    k = e(vapid.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint))
    headers = {"TTL": "30", "Urgency": "normal", "Content-Encoding": "aes128gcm", "Topic": "python-topic",
               "Authorization": "vapid t=%s.%s.%s, k=%s" % (h, c, e(r.to_bytes(32, "big") + s.to_bytes(32, "big")), k)}
    context = ssl.create_default_context(cafile=req["ca"])
    request = urllib.request.Request(req["endpoint"], data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            print(json.dumps({"status": response.status, "location": response.headers.get("Location")}))
    except urllib.error.HTTPError as error:
        print(json.dumps({"status": error.code, "location": None, "body": error.read().decode()}))
    """

    @Test("an independent sender (Python: http_ece, cryptography, urllib trusting the CA) is accepted and the browser decrypts it")
    func pythonPeer() throws {
        let b = try Browser()
        let serve = try ServeProcess(["--subscription", "\(b.id)=\(b.keychain)"])
        var subscription = b.subscription
        subscription["endpoint"] = .string(serve.endpoint(b.id))
        let out = try Python.run(Self.pythonSender, .object(JSONObject([
            ("subscription", .object(subscription)), ("envelope", .string(try b.envelope())), ("origin", .string(serve.origin)),
            ("ca", .string(serve.caPath)), ("endpoint", .string(serve.endpoint(b.id))),
        ])))
        #expect(out["status"] == .int(201), "\(out)")
        #expect(out["location"]?.stringValue?.hasPrefix(serve.origin + "/message/") == true)
        let delivered = try serve.nextOutcome()
        #expect(delivered["outcome"] == .string("decrypted") && delivered["request_id"] == .string("python-topic"), "\(delivered)")
        #expect(serve.stop().status == 0)
    }
}
