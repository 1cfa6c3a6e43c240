import Foundation
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

private func outcome(_ o: JSONObject) -> String? { o["outcome"]?.stringValue }
private func reason(_ o: JSONObject) -> String? { o["reason"]?.stringValue }
private func shown(_ o: JSONObject, _ field: String) -> String? { o["notification"]?.objectValue?[field]?.stringValue }

/// `sealedpush device subscribe` and `device push --platform webpush`, as the built binary.
@Suite("CLI: the simulated browser (device subscribe, device push --platform webpush)", .serialized, .timeLimit(.minutes(10)))
struct BrowserCLITests {
    @Test("device subscribe prints PushSubscription.toJSON(): the endpoint, expirationTime null, a P-256 p256dh and a 16-byte auth")
    func subscribePrintsASubscription() throws {
        let b = try Browser()
        #expect(b.subscription["endpoint"] == .string("https://127.0.0.1:8443/push/browser-1"))
        #expect(b.subscription["expirationTime"] == .null)
        #expect(b.subscription.map(\.0).sorted() == ["endpoint", "expirationTime", "keys"])
        #expect(b.keys.publicKey.x963Representation.count == 65 && b.keys.auth.count == 16)
        // The gateway's reader takes it as a registration's webpush member (with the development endpoint rules).
        let parsed = try WebPushSubscription(json: .object(b.subscription), policy: WebPushEndpointPolicy(allowPrivateEndpoints: true))
        #expect(parsed.keys == b.keys)
    }

    @Test("#44 pilot 2: device subscribe --key-out makes the device key without a reveal key unless --reveal, and warns about one")
    func subscribeMakesKeysWithoutReveal() throws {
        let dir = try makeScratchDirectory("subscribe-keys")
        defer { try? FileManager.default.removeItem(at: dir) }
        func record(_ name: String) throws -> JSONObject {
            guard case let .object(o) = try JSON.parse(Array(try Data(contentsOf: dir.appendingPathComponent(name)))) else {
                throw HarnessFailure("\(name) is not a JSON object")
            }
            return o
        }
        // A new store: the device key is made, without a reveal key; stdout is the subscription alone.
        let plain = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", dir.appendingPathComponent("plain").path,
                                                 "--endpoint", "https://127.0.0.1:8444/push/plain", "--key-out", dir.appendingPathComponent("plain.json").path])
        #expect(plain.status == 0, "\(plain.stderr)")
        guard case let .object(subscription)? = try? JSON.parse(plain.stdout) else { Issue.record("no subscription: \(plain.stdoutText)"); return }
        #expect(subscription["endpoint"] == .string("https://127.0.0.1:8444/push/plain"))
        let made = try record("plain.json")
        #expect(made["type"] == .string("sealedpush-device-key") && made["public_key"]?.stringValue != nil, "\(made)")
        #expect(made["reveal"] == nil, "no reveal key unless asked: \(made)")
        #expect(!plain.stderr.contains("reveal key"), "\(plain.stderr)")
        // Subscribing again keeps the device key and writes the same record.
        let again = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", dir.appendingPathComponent("plain").path,
                                                 "--endpoint", "https://127.0.0.1:8444/push/plain", "--key-out", dir.appendingPathComponent("again.json").path])
        #expect(again.status == 0, "\(again.stderr)")
        let kept = try record("again.json")
        #expect(kept["public_key"] == made["public_key"], "the device key is kept: \(kept)")
        // Asked for: a reveal key too, and the warning.
        let revealed = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", dir.appendingPathComponent("reveal").path,
                                                    "--endpoint", "https://127.0.0.1:8444/push/reveal", "--key-out", dir.appendingPathComponent("reveal.json").path, "--reveal"])
        #expect(revealed.status == 0, "\(revealed.stderr)")
        #expect(try record("reveal.json")["reveal"]?.objectValue != nil)
        #expect(revealed.stderr.contains("has a reveal key") && revealed.stderr.contains("--no-reveal"), "\(revealed.stderr)")
        // --reveal alone is a usage error that says what to give.
        let alone = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", dir.appendingPathComponent("x").path,
                                                 "--endpoint", "https://127.0.0.1:8444/push/x", "--reveal"])
        #expect(alone.status != 0 && alone.stderr.contains("--key-out"), "\(alone.stderr)")
    }

    @Test("device push --platform webpush: a gateway's body opens as on an iPhone; replays, the request identifier, userInfo without aps")
    func pushDecryptsAndReplays() throws {
        let b = try Browser()
        let body = try b.body(envelope: try b.envelope())
        let (r, o) = try b.push(body, ["--request-id", "topic-1"])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(outcome(o) == "decrypted" && o["reason"] == .null)
        #expect(shown(o, "title") == "Agent K" && shown(o, "body") == "The eagle lands at noon.")
        #expect(o["request_id"] == .string("topic-1"))
        let userInfo = try #require(o["notification"]?.objectValue?["userInfo"]?.objectValue)
        #expect(userInfo["aps"] == nil && userInfo["ENCRYPTED_DATA"] == nil, "\(userInfo)")
        // The same body again under the same request identifier (a retried delivery): opens again.
        #expect(outcome(try b.push(body, ["--request-id", "topic-1"]).json) == "decrypted")
        // Under another: replayed, the browser's placeholder with (Encrypted).
        let again = try b.push(body).json
        #expect(outcome(again) == "fallback" && reason(again) == "replayed")
        #expect(shown(again, "title") == "Secret Message!" && shown(again, "body") == "(Encrypted)")
        // A person-readable banner without --json.
        let file = b.dir.appendingPathComponent("fresh.bin")
        try Data(try b.body(envelope: try b.envelope(body: "Second message."))).write(to: file)
        let text = try ChildProcess.sealedpush(["device", "push", "--platform", "webpush", "--keychain", b.keychain, file.path])
        #expect(text.status == 0 && text.stdoutText.contains("Second message.") && text.stdoutText.contains("outcome: decrypted"))
    }

    @Test("device push --platform webpush: wire v1 checks fail as on an iPhone (fallback with the reason); a message without ENCRYPTED_DATA passes through")
    func fallbacksAndPassThrough() throws {
        let b = try Browser()
        let other = try Browser(id: "browser-2")
        // Sealed to another device's key, but Web Push-encrypted to this browser: the envelope does not open.
        let foreign = try b.push(try b.body(envelope: try other.envelope())).json
        #expect(outcome(foreign) == "fallback" && reason(foreign) != nil && shown(foreign, "body") == "(Encrypted)", "\(foreign)")
        let plain = try WebPushEncryptor(subscription: b.keys).encrypt(Array(#"{"hello":"world"}"#.utf8))
        let passed = try b.push(plain).json
        #expect(outcome(passed) == "original" && reason(passed) == "notEncrypted", "\(passed)")
        let notString = try WebPushEncryptor(subscription: b.keys).encrypt(Array(#"{"ENCRYPTED_DATA":7,"sealedpush":1}"#.utf8))
        let malformed = try b.push(notString).json
        #expect(outcome(malformed) == "fallback" && reason(malformed) == "malformedPayload", "\(malformed)")
    }

    @Test("device push --platform webpush: bodies a browser drops are rejected (exit 1) with why on stderr, never a crash")
    func rejectedBodies() throws {
        let b = try Browser()
        let other = try Browser(id: "browser-2")
        let envelope = try b.envelope()
        let cases: [(String, [UInt8], String)] = [
            ("empty", [], "invalidPayload"),
            ("garbage", Array("not an aes128gcm body at all, just text".utf8), "invalidPayload"),
            ("for other keys", try other.body(envelope: envelope), "invalidPayload"),
            ("tampered", { var x = try! b.body(envelope: envelope); x[x.count - 1] ^= 1; return x }(), "invalidPayload"),
            ("not JSON", try WebPushEncryptor(subscription: b.keys).encrypt(Array("plain text".utf8)), "invalidPayload"),
            ("too large", [UInt8](repeating: 7, count: 4097), "payloadTooLarge"),
        ]
        for (name, body, expected) in cases {
            let (r, o) = try b.push(body)
            #expect(r.status != 0, "\(name)")
            #expect(outcome(o) == "rejected" && reason(o) == expected && o["notification"] == .null, "\(name): \(o)")
            #expect(r.stderr.contains("--platform webpush"), "\(name): \(r.stderr)")
            #expect(!r.stderr.contains(b.keys.authBase64URL), "\(name): the auth secret is never printed")
        }
    }

    @Test("device push --platform webpush refuses the service-extension options; a device that never subscribed is told to")
    func refusals() throws {
        let b = try Browser()
        let body = try b.body(envelope: try b.envelope())
        let bodyFile = b.dir.appendingPathComponent("refused.bin")
        try Data(body).write(to: bodyFile)
        for extra in [["--extension-crash"], ["--filtering"], ["--time-limit", "5s"], ["--extension-delay", "1s"], ["--expiry-grace", "2s"]] {
            let r = try ChildProcess.sealedpush(["device", "push", "--platform", "webpush", "--keychain", b.keychain] + extra + [bodyFile.path])
            #expect(r.status != 0 && r.stderr.contains(extra[0]) && r.stderr.contains("--platform apns"), "\(extra): \(r.stderr)")
        }
        let unknown = try ChildProcess.sealedpush(["device", "push", "--platform", "fcm", "--keychain", b.keychain, "-"])
        #expect(unknown.status != 0 && unknown.stderr.contains("--platform"))
        // A device with keys but no subscription.
        let bare = try makeScratchDirectory("bare")
        let keychain = bare.appendingPathComponent("k").path
        #expect(try ChildProcess.sealedpush(["keys", "generate", "--keychain", keychain]).status == 0)
        let file = bare.appendingPathComponent("b.bin")
        try Data(body).write(to: file)
        let none = try ChildProcess.sealedpush(["device", "push", "--platform", "webpush", "--keychain", keychain, file.path])
        #expect(none.status != 0 && none.stderr.contains("device subscribe --keychain \(keychain)"), "\(none.stderr)")
        // subscribe: no store, bad endpoints.
        let noStore = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", bare.appendingPathComponent("nothing").path,
                                                   "--endpoint", "https://127.0.0.1:1/push/x"])
        #expect(noStore.status != 0 && noStore.stderr.contains("keys generate"), "\(noStore.stderr)")
        for endpoint in ["http://127.0.0.1:8443/push/x", "not a url", "", "https://user@push.example.net/x"] {
            let r = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", keychain, "--endpoint", endpoint])
            #expect(r.status != 0 && r.stderr.contains("--endpoint"), "\(endpoint): \(r.stderr)")
        }
    }

    @Test("a second subscribe replaces the keys (said on stderr): bodies for the old keys no longer decrypt; the keys are sealed at rest")
    func resubscribeReplacesKeys() throws {
        var b = try Browser()
        let oldBody = try b.body(envelope: try b.envelope())
        let oldAuth = b.keys.auth.unsafeCopyToArray()
        let notice = try b.resubscribe()
        #expect(notice.contains("replaced"))
        #expect(outcome(try b.push(oldBody).json) == "rejected")
        #expect(outcome(try b.push(try b.body(envelope: try b.envelope())).json) == "decrypted")
        // Neither auth secret appears in the clear in any file of the store.
        for auth in [oldAuth, b.keys.auth.unsafeCopyToArray()] {
            let files = FileManager.default.enumerator(atPath: b.keychain)?.compactMap { $0 as? String } ?? []
            for file in files {
                guard let data = FileManager.default.contents(atPath: b.keychain + "/" + file) else { continue }
                #expect(data.range(of: Data(auth)) == nil, "\(file) holds an auth secret in the clear")
            }
        }
    }

    @Test("before the first unlock the push layer still decrypts; the envelope waits (keychainLocked), as on an iPhone")
    func lockedDevice() throws {
        let b = try Browser()
        #expect(try ChildProcess.sealedpush(["device", "reboot", "--keychain", b.keychain]).status == 0)
        let locked = try b.push(try b.body(envelope: try b.envelope())).json
        #expect(outcome(locked) == "fallback" && reason(locked) == "keychainLocked", "\(locked)")
        let unlock = try ChildProcess.sealedpush(["device", "unlock", "--keychain", b.keychain])
        #expect(unlock.status == 0 && unlock.stdoutText.contains("1 opened"), "\(unlock.stdoutText) \(unlock.stderr)")
    }
}

/// `sealedpush-server webpush generate-vapid`.
@Suite("CLI: webpush generate-vapid", .serialized, .timeLimit(.minutes(5)))
struct GenerateVAPIDTests {
    @Test("writes a P-256 PKCS#8 key, mode 0600, created exclusively, and prints its public key (base64url, 65 bytes)")
    func writesKey() throws {
        let dir = try makeScratchDirectory("vapid")
        let path = dir.appendingPathComponent("vapid.p8").path
        let r = try ChildProcess.sealedpushServer(["webpush", "generate-vapid", "--out", path])
        #expect(r.status == 0, "\(r.stderr)")
        let printed = r.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(WebPushBase64URL.decode(printed)?.count == 65)
        let mode = try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
        #expect(mode & 0o777 == 0o600)
        #expect(try VAPIDKey(pemFile: path).publicKeyBase64URL == printed)
        #expect(!r.stdoutText.contains("PRIVATE") && !r.stderr.contains("PRIVATE"))
        let again = try ChildProcess.sealedpushServer(["webpush", "generate-vapid", "--out", path])
        #expect(again.status != 0 && again.stderr.contains("already exists"))
        let nowhere = try ChildProcess.sealedpushServer(["webpush", "generate-vapid", "--out", dir.appendingPathComponent("no/such/dir/k.p8").path])
        #expect(nowhere.status != 0 && nowhere.stderr.contains("--out"))
    }
}
