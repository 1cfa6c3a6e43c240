import AsyncHTTPClient
import Foundation
import SealedPushAPNsServer
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire
import SealedPushWebPush
import SealedPushTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

extension GatewaySuites {
    /// Mailbox mode end to end against `sealedpush-server gateway` as a process and the simulated iPhone as the built
    /// `sealedpush` binary (mailbox v1 §5, §7, §8): `device config --mailbox-url`, `device push` of what the local APNs
    /// received, `device unlock` / `device fetch` with the list, `device status --json`'s `handles_waiting`, and the
    /// examiner of §8 (with a control that breaks the gateway's deletion on purpose).
    @Suite("mailbox mode: the simulated device against a gateway process", .serialized, .timeLimit(.minutes(10)))
    struct GatewayMailboxDeviceTests {
        /// A gateway process with app `chat` in mailbox mode, its local APNs and an HTTP client.
        struct Setup {
            let apns: TestAPNs
            let process: ChildProcess
            let base: String
            let directory: URL
            let http: HTTPClient
            var client: GatewayClient { GatewayClient(http: http, base: base) }

            static func start(_ name: String, breakDeletion: Bool = false) async throws -> Setup {
                let apns = try await TestAPNs()
                let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mailbox-\(name)-\(UUID().uuidString)")
                let port = try GatewayHarness.freePort()
                let config = try GatewayHarness.writeConfiguration(
                    in: directory, apns: apns, listen: "127.0.0.1:\(port)", publicURL: "http://127.0.0.1:\(port)",
                    extraApp: JSONObject([("mailbox", .object(JSONObject([("enabled", .bool(true)), ("fetch_grace", .int(60))])))]))
                let process = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["gateway", "--config", config],
                                               environment: breakDeletion ? ["SEALEDPUSH_TEST_BREAK_MAILBOX_DELETION": "1"] : [:],
                                               in: directory, readLines: true)
                let listening = try await offPool { process.waitForLine(startingWith: "api listening on", within: .seconds(60)) }
                _ = try #require(listening, "the gateway printed no listening line: \(process.stderrText)")
                return Setup(apns: apns, process: process, base: "http://127.0.0.1:\(port)", directory: directory,
                             http: HTTPClient(eventLoopGroupProvider: .singleton))
            }

            func stop() async {
                let process = self.process
                _ = try? await offPool { process.terminate(grace: .seconds(30)) }
                try? await http.shutdown()
                await apns.stop()
                try? FileManager.default.removeItem(at: directory)
            }

            /// A phone (device and reveal keys) registered as `deviceID` of user `u1`, configured for the mailbox.
            func phone(_ deviceID: String, token: Int) async throws -> Phone {
                let phone = try Phone(in: directory, name: deviceID, token: hexToken(token), reveal: true)
                let r = try await client.call(.PUT, "/v1/apps/chat/devices/\(deviceID)", json: .object(JSONObject([
                    ("user_id", "u1"), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
                #expect(r.status == 201, "\(r.text)")
                let configured = try device(phone, ["config", "--mailbox-url", base, "--mailbox-app", "chat", "--mailbox-device", deviceID])
                #expect(configured.status == 0, "\(configured.stderr)")
                return phone
            }

            /// Sends one message to user `u1`; its id.
            func send(title: String, body: String) async throws -> String {
                let r = try await client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", "u1")]))), ("title", .string(title)), ("body", .string(body))])))
                #expect(r.status == 202, "\(r.text)")
                return try #require(r.json["message_id"]?.stringValue)
            }

            /// Waits until `count` pushes reached the local APNs for `phone`; they, oldest first.
            func pushes(to phone: Phone, count: Int) async throws -> [AcceptedPush] {
                try await waitUntil("\(count) pushes to reach the local APNs", within: .seconds(60)) {
                    apns.pushes.filter { $0.deviceToken == phone.token }.count >= count
                }
                return apns.pushes.filter { $0.deviceToken == phone.token }
            }

            /// `sealedpush device ARGS --keychain DIR`.
            func device(_ phone: Phone, _ arguments: [String], stdin: [UInt8]? = nil) throws -> ChildProcess.Result {
                try ChildProcess.sealedpush(["device"] + arguments + ["--keychain", phone.store.root.string], stdin: stdin, timeout: 60)
            }

            /// Hands `push` to the phone as iOS would (`device push --json`, its request id from the collapse id).
            func deliver(_ push: AcceptedPush, to phone: Phone) throws -> JSONObject {
                let result = try device(phone, ["push", "--json", "--request-id", push.collapseID ?? push.apnsID, "-"], stdin: push.payload)
                return try #require(try JSON.parse(result.stdout).objectValue, "\(result.stdoutText) \(result.stderr)")
            }

            func status(_ phone: Phone) throws -> JSONObject {
                let result = try device(phone, ["status", "--json"])
                return try #require(try JSON.parse(result.stdout).objectValue, "\(result.stderr)")
            }

            /// `POST /v1/mailbox/fetch` with `handle`: the status and body.
            func fetch(_ handle: String) async throws -> Answer {
                try await client.call(.POST, "/v1/mailbox/fetch", key: nil, json: .object(JSONObject([("handle", .string(handle))])))
            }
        }

        @Test("config --mailbox-url: https, or http only to loopback; a clear error otherwise")
        func mailboxURLMustBeHTTPS() throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mailbox-url-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let phone = try Phone(in: directory, name: "p", token: hexToken(1))
            for bad in ["http://push.example.com", "ftp://push.example.com", "push.example.com", "http://10.0.0.1:8080"] {
                let r = try ChildProcess.sealedpush(["device", "config", "--mailbox-url", bad, "--keychain", phone.store.root.string], timeout: 60)
                #expect(r.status != 0, "\(bad) was taken")
                #expect(r.stderr.contains("--mailbox-url") && r.stderr.contains("https"), "\(r.stderr)")
            }
            for good in ["https://push.example.com", "http://127.0.0.1:8080", "http://localhost:1"] {
                let r = try ChildProcess.sealedpush(["device", "config", "--mailbox-url", good, "--keychain", phone.store.root.string], timeout: 60)
                #expect(r.status == 0, "\(good): \(r.stderr)")
            }
            let status = try ChildProcess.sealedpush(["device", "status", "--json", "--keychain", phone.store.root.string], timeout: 60)
            let o = try #require(try JSON.parse(status.stdout).objectValue)
            #expect(o["mailbox_url"]?.stringValue == "http://localhost:1")
            #expect(o["handles_waiting"] == .int(0))
            // A mailbox push without a mailbox URL is malformedPayload (mailbox v1 §5).
            _ = try ChildProcess.sealedpush(["device", "config", "--no-mailbox-url", "--keychain", phone.store.root.string], timeout: 60)
            let handle = "1.dlv_abc." + Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 32))
            let push = JSON.serialize(.object(JSONObject([
                ("aps", .object(JSONObject([("alert", .object(JSONObject([("title", "Secret Message!"), ("body", "(Encrypted)")]))), ("mutable-content", .int(1))]))),
                ("SEALEDPUSH_FETCH", .string(handle))])))
            let r = try ChildProcess.sealedpush(["device", "push", "--json", "--keychain", phone.store.root.string, "-"], stdin: push, timeout: 60)
            let shown = try #require(try JSON.parse(r.stdout).objectValue)
            #expect(shown["reason"]?.stringValue == "malformedPayload")
            let fetch = try ChildProcess.sealedpush(["device", "fetch", "--keychain", phone.store.root.string], timeout: 60)
            #expect(fetch.status != 0 && fetch.stderr.contains("--mailbox-url"), "\(fetch.stderr)")
        }

        @Test("before first unlock: no fetch, the handle waits (handles_waiting); device unlock fetches and shows it")
        func beforeFirstUnlockThenUnlock() async throws {
            let s = try await Setup.start("bfu")
            do {
                let phone = try await s.phone("d1", token: 0x10)
                _ = try s.device(phone, ["reboot"])
                let secret = "bfu-\(UUID().uuidString)"
                let id = try await s.send(title: "Agent K", body: secret)
                let push = try #require(try await s.pushes(to: phone, count: 1).last)
                let shown = try s.deliver(push, to: phone)
                #expect(shown["outcome"]?.stringValue == "fallback" && shown["reason"]?.stringValue == "keychainLocked", "\(shown)")
                #expect(try s.status(phone)["handles_waiting"] == .int(1))
                // Nothing was fetched: the delivery is still `accepted`, not `fetched`.
                let before = try await s.client.call(.GET, "/v1/apps/chat/messages/\(id)")
                #expect(before.json["deliveries"]?.arrayValue?.first?.objectValue?["state"]?.stringValue == "accepted", "\(before.text)")
                let early = try s.device(phone, ["fetch"])
                #expect(early.status != 0 && early.stderr.contains("device unlock"), "\(early.stderr)")
                let unlocked = try s.device(phone, ["unlock"])
                #expect(unlocked.status == 0 && unlocked.stdoutText.contains("mailbox: 1 fetched and shown"), "\(unlocked.stdoutText) \(unlocked.stderr)")
                #expect(try s.status(phone)["handles_waiting"] == .int(0))
                let stored = try NotificationCenterStore(store: phone.store).entry(requestID: push.collapseID ?? push.apnsID)
                #expect(stored?.body == secret)
                #expect(stored?.userInfo["SEALEDPUSH_FETCH"] == nil)
                // The handle the push carried is spent.
                let handle = try #require(try JSON.parse(push.payload).objectValue?["SEALEDPUSH_FETCH"]?.stringValue)
                try await waitUntil("the receipt to collect the delivery", within: .seconds(30)) {
                    (try await s.fetch(handle)).status == 410
                }
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }

        @Test("three messages while the phone is off, APNs keeps the last: the list recovers all three, once")
        func phoneOffListRecoversCoalesced() async throws {
            let s = try await Setup.start("off")
            do {
                let phone = try await s.phone("d1", token: 0x20)
                let texts = (1...3).map { "off-\($0)-\(UUID().uuidString)" }
                for text in texts { _ = try await s.send(title: "Agent K", body: text) }
                let pushes = try await s.pushes(to: phone, count: 3)
                // The phone comes back on: APNs hands it only the last push.
                let last = try s.deliver(try #require(pushes.last), to: phone)
                #expect(last["outcome"]?.stringValue == "decrypted", "\(last)")
                let fetched = try s.device(phone, ["fetch", "--json"])
                #expect(fetched.status == 0, "\(fetched.stderr)")
                let summary = try #require(try JSON.parse(fetched.stdout).objectValue)
                #expect(summary["listed"] == .bool(true) && summary["recovered"] == .int(2), "\(summary)")
                let bodies = try NotificationCenterStore(store: phone.store).entries().map(\.body)
                for text in texts { #expect(bodies.filter { $0 == text }.count == 1, "\(text) not shown exactly once: \(bodies)") }
                // Asked again: nothing new is shown.
                let again = try s.device(phone, ["fetch", "--json"])
                let second = try #require(try JSON.parse(again.stdout).objectValue)
                #expect(second["recovered"] == .int(0), "\(second)")
                #expect(try NotificationCenterStore(store: phone.store).entries().count == 3)
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }

        @Test("a message the list showed, whose receipt is not in (\"receipt\": false), is not shown again by the next list")
        func listShowsOnceWithoutReceipts() async throws {
            let s = try await Setup.start("once")
            do {
                let phone = try await s.phone("d1", token: 0x80)
                let r = try await s.client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                    ("to", .object(JSONObject([("user_id", "u1")]))), ("body", "once"), ("receipt", .bool(false))])))
                #expect(r.status == 202, "\(r.text)")
                _ = try await s.pushes(to: phone, count: 1)   // never handed to the phone
                let first = try #require(try JSON.parse(try s.device(phone, ["fetch", "--json"]).stdout).objectValue)
                #expect(first["recovered"] == .int(1), "\(first)")
                let second = try #require(try JSON.parse(try s.device(phone, ["fetch", "--json"]).stdout).objectValue)
                #expect(second["recovered"] == .int(0) && second["already_shown"] == .int(1), "\(second)")
                #expect(try NotificationCenterStore(store: phone.store).entries().map(\.body) == ["once"])
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }

        /// The examiner of mailbox v1 §8: the phone's notification store, every key readable after the first unlock
        /// (the phone locked again), every handle found in the store and every handle the push service held. Returns
        /// every text it could read: the store's own text, and what each envelope it could fetch or find opens to.
        static func examine(_ s: Setup, phone: Phone, pushHandles: [String]) async throws -> String {
            var recovered = ""
            let entries = try NotificationCenterStore(store: phone.store).entries()
            var handles = pushHandles
            var blobs: [String] = []
            for entry in entries {
                recovered += [entry.title, entry.subtitle, entry.body].joined(separator: "\n") + "\n"
                for value in entry.userInfo.map(\.value) {
                    guard let text = value.stringValue else { continue }
                    if MailboxHandle(text) != nil { handles.append(text) } else { blobs.append(text) }
                }
            }
            for handle in handles {
                let answer = try await s.fetch(handle)
                if answer.status == 200, let envelope = answer.json["envelope"]?.stringValue { blobs.append(envelope) }
            }
            let deviceKeys = DeviceKeyring(store: phone.store)
            let revealKeys = RevealKeyring(store: phone.store)
            for blob in blobs {
                guard let envelope = try? Envelope(base64: blob) else { continue }
                for lookup in [deviceKeys.lookUpKey(id: envelope.keyID), revealKeys.lookUpKey(id: envelope.keyID)] {
                    if case let .found(pair) = lookup, let opened = try? SealedBox.open(envelope.sealedBox, with: pair) {
                        recovered += String(decoding: opened.unsafeCopyToArray(), as: UTF8.self) + "\n"
                    }
                }
            }
            return recovered
        }

        @Test("the examiner of §8 recovers nothing hidden, for every preview policy and before first unlock; the control (deletion broken) does",
              arguments: [false, true])
        func examinerRecoversNothingHidden(deletionBroken: Bool) async throws {
            let s = try await Setup.start("examiner", breakDeletion: deletionBroken)
            do {
                let phone = try await s.phone("d1", token: 0x30)
                var hidden: [String] = []
                var pushHandles: [String] = []
                var sent = 0
                for policy in ["full", "title", "none"] {
                    #expect(try s.device(phone, ["config", "--previews", policy]).status == 0)
                    for beforeFirstUnlock in [false, true] {
                        let title = "title-\(policy)-\(beforeFirstUnlock)-\(UUID().uuidString.prefix(8))"
                        let body = "body-\(policy)-\(beforeFirstUnlock)-\(UUID().uuidString.prefix(8))"
                        if policy != "full" { hidden.append(body) }
                        if policy == "none" { hidden.append(title) }
                        if beforeFirstUnlock { _ = try s.device(phone, ["reboot"]) }
                        _ = try await s.send(title: title, body: body)
                        sent += 1
                        let push = try #require(try await s.pushes(to: phone, count: sent).last)
                        pushHandles.append(try #require(try JSON.parse(push.payload).objectValue?["SEALEDPUSH_FETCH"]?.stringValue))
                        let shown = try s.deliver(push, to: phone)
                        let expected = beforeFirstUnlock ? "fallback" : (policy == "full" ? "decrypted" : "held")
                        #expect(shown["outcome"]?.stringValue == expected || shown["outcome"]?.stringValue == "decrypted", "\(policy): \(shown)")
                        if beforeFirstUnlock {
                            let unlocked = try s.device(phone, ["unlock"])
                            #expect(unlocked.stdoutText.contains("mailbox: 1 fetched and shown"), "\(unlocked.stdoutText) \(unlocked.stderr)")
                        }
                    }
                }
                // Every message processed and its receipt sent: the deliveries are collected at the gateway.
                try await waitUntil("every receipt to reach the gateway", within: .seconds(30)) {
                    var fetches: [Int] = []
                    for handle in pushHandles { fetches.append((try await s.fetch(handle)).status) }
                    return deletionBroken || fetches.allSatisfy { $0 == 410 }
                }
                #expect(try s.status(phone)["handles_waiting"] == .int(0))
                // The examiner: the phone locked after its first unlock (afterFirstUnlock keys read, whenUnlocked ones do not).
                _ = try s.device(phone, ["lock"])
                let recovered = try await Self.examine(s, phone: phone, pushHandles: pushHandles)
                let found = hidden.filter { recovered.contains($0) }
                if deletionBroken {
                    // The control: with the envelopes kept and handed out again, the same examiner reads every hidden text.
                    #expect(found.count == hidden.count, "the control recovered only \(found.count) of \(hidden.count) hidden texts")
                } else {
                    #expect(found.isEmpty, "the examiner recovered hidden text: \(found)")
                }
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }

        @Test("apns serve hands a mailbox push to its simulated phone, which fetches the message from the gateway; --capture keeps the push")
        func apnsServeDeliversMailboxPushes() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("mailbox-serve-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let key = try ChildProcess.sealedpushServer(["apns", "generate-key", "--key-id", "KEY0000001"], in: directory, timeout: 60)
            try #require(key.status == 0, "\(key.stderr)")
            let port = try GatewayHarness.freePort()
            let phone = try Phone(in: directory, name: "phone", token: hexToken(0x50))
            let configured = try ChildProcess.sealedpush(["device", "config", "--mailbox-url", "http://127.0.0.1:\(port)",
                                                          "--keychain", phone.store.root.string], timeout: 60)
            #expect(configured.status == 0, "\(configured.stderr)")
            let serve = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                         ["apns", "serve", "--listen", "127.0.0.1:0", "--ca-out", "ca.pem", "--public-key", "AuthKey_KEY0000001.pub.pem",
                                          "--team-id", "TEAM000001", "--topic", TestAPNs.topic, "--device", "\(phone.token)=\(phone.store.root.string)",
                                          "--capture", "captured.jsonl"],
                                         in: directory, readLines: true)
            defer { _ = serve.terminate() }
            let first = try #require(try await offPool { serve.nextLine(within: .seconds(60)) }, "apns serve printed nothing: \(serve.stderrText)")
            let apnsURL = try #require(first.split(separator: " ").dropFirst(2).first.map(String.init), "\(first)")
            let apnsPort = try #require(apnsURL.split(separator: ":").last.flatMap { Int($0.filter(\.isNumber)) })
            let config = try GatewayHarness.writeConfiguration(
                in: directory.appendingPathComponent("gateway"),
                apnsKeyPEM: try String(contentsOf: directory.appendingPathComponent("AuthKey_KEY0000001.p8"), encoding: .utf8), apnsPort: apnsPort,
                caPEM: try String(contentsOf: directory.appendingPathComponent("ca.pem"), encoding: .utf8),
                listen: "127.0.0.1:\(port)", publicURL: "http://127.0.0.1:\(port)",
                extraApp: JSONObject([("mailbox", .object(JSONObject([("enabled", .bool(true))])))]))
            let gateway = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["gateway", "--config", config],
                                           in: directory.appendingPathComponent("gateway"), readLines: true)
            defer { _ = gateway.terminate(grace: .seconds(30)) }
            _ = try #require(try await offPool { gateway.waitForLine(startingWith: "api listening on", within: .seconds(60)) }, "\(gateway.stderrText)")
            let http = HTTPClient(eventLoopGroupProvider: .singleton)
            defer { Task { try? await http.shutdown() } }
            let client = GatewayClient(http: http, base: "http://127.0.0.1:\(port)")
            let r = try await client.call(.PUT, "/v1/apps/chat/devices/d1", json: .object(JSONObject([
                ("user_id", "u1"), ("apns_token", .string(phone.token)), ("environment", "sandbox"), ("key_record", .object(phone.record))])))
            #expect(r.status == 201, "\(r.text)")
            let secret = "serve-\(UUID().uuidString)"
            let sent = try await client.call(.POST, "/v1/apps/chat/messages", json: .object(JSONObject([
                ("to", .object(JSONObject([("user_id", "u1")]))), ("title", "Agent K"), ("body", .string(secret))])))
            #expect(sent.status == 202, "\(sent.text)")
            let line = try #require(try await offPool { serve.nextLine(within: .seconds(60)) }, "the phone reported nothing: \(serve.stderrText)")
            let outcome = try #require(try JSON.parse(Array(line.utf8)).objectValue)
            #expect(outcome["outcome"]?.stringValue == "decrypted", "\(line) \(serve.stderrText)")
            let stored = try NotificationCenterStore(store: phone.store).entries()
            #expect(stored.last?.body == secret)
            let id = try #require(sent.json["message_id"]?.stringValue)
            try await waitUntil("the delivery to be confirmed", within: .seconds(30)) {
                let m = try await client.call(.GET, "/v1/apps/chat/messages/\(id)")
                return m.json["deliveries"]?.arrayValue?.first?.objectValue?["state"]?.stringValue == "delivered"
            }
            // `--capture`: the push as the local APNs accepted it, one JSON line (0600): the handle alone, now spent.
            let capturePath = directory.appendingPathComponent("captured.jsonl").path
            let captured = try String(contentsOfFile: capturePath, encoding: .utf8).split(separator: "\n")
            try #require(captured.count == 1, "\(captured)")
            let pushLine = try #require(try JSON.parse(Array(captured[0].utf8)).objectValue)
            #expect(pushLine["device_token"]?.stringValue == phone.token && pushLine["topic"]?.stringValue == TestAPNs.topic)
            #expect(pushLine["apns_id"]?.stringValue?.count == 36 && pushLine["collapse_id"] != nil, "\(pushLine)")
            let payload = try #require(pushLine["payload"]?.stringValue.flatMap { try? JSON.parse(Array($0.utf8)).objectValue })
            #expect(payload["ENCRYPTED_DATA"] == nil && !captured[0].contains(secret))
            let handle = try #require(payload["SEALEDPUSH_FETCH"]?.stringValue)
            let spent = try await client.call(.POST, "/v1/mailbox/fetch", key: nil, json: .object(JSONObject([("handle", .string(handle))])))
            #expect(spent.status == 410, "\(spent.text)")
            let mode = try FileManager.default.attributesOfItem(atPath: capturePath)[.posixPermissions] as? Int
            #expect(mode.map { $0 & 0o077 } == 0, "the capture holds mailbox handles: owner-only")
            _ = try await offPool { gateway.terminate(grace: .seconds(30)) }
            _ = try await offPool { serve.terminate() }
        }

        @Test("the simulated Android phone fetches a data message's sealedpush_fetch handle as the iPhone does")
        func androidFetchesByHandle() async throws {
            let s = try await Setup.start("android")
            do {
                let phone = try await s.phone("d1", token: 0x60)
                let secret = "android-\(UUID().uuidString)"
                _ = try await s.send(title: "Agent K", body: secret)
                let push = try #require(try await s.pushes(to: phone, count: 1).last)
                let handle = try #require(try JSON.parse(push.payload).objectValue?["SEALEDPUSH_FETCH"]?.stringValue)
                // The FCM message mailbox v1 §2 sends for the same delivery: data-only, the handle alone.
                let message = JSON.serialize(.object(JSONObject([("message", .object(JSONObject([
                    ("token", "fcm-token"), ("data", .object(JSONObject([("sealedpush_fetch", .string(handle))]))),
                    ("android", .object(JSONObject([("collapse_key", "c1"), ("priority", "HIGH")]))),
                ])))])))
                let r = try s.device(phone, ["push", "--platform", "fcm", "--json", "-"], stdin: message)
                let shown = try #require(try JSON.parse(r.stdout).objectValue, "\(r.stdoutText) \(r.stderr)")
                #expect(shown["outcome"]?.stringValue == "decrypted" && shown["notification"]?.objectValue?["body"]?.stringValue == secret, "\(shown)")
                // Both keys in one message: malformedPayload, nothing fetched (mailbox v1 §5).
                let both = JSON.serialize(.object(JSONObject([("message", .object(JSONObject([
                    ("token", "fcm-token"), ("data", .object(JSONObject([("sealedpush_fetch", .string(handle)), ("ENCRYPTED_DATA", "AAAA")]))),
                ])))])))
                let refused = try s.device(phone, ["push", "--platform", "fcm", "--json", "-"], stdin: both)
                let o = try #require(try JSON.parse(refused.stdout).objectValue, "\(refused.stderr)")
                #expect(o["reason"]?.stringValue == "malformedPayload", "\(o)")
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }

        @Test("the simulated browser fetches a Web Push message's sealedpush_fetch handle as the iPhone does")
        func browserFetchesByHandle() async throws {
            let s = try await Setup.start("browser")
            do {
                let phone = try await s.phone("d1", token: 0x70)
                let subscribed = try s.device(phone, ["subscribe", "--endpoint", "https://127.0.0.1:1/push/b1"])
                let keys = try #require(try JSON.parse(subscribed.stdout).objectValue?["keys"]?.objectValue, "\(subscribed.stderr)")
                let subscription = try WebPushSubscriptionKeys(p256dh: try #require(keys["p256dh"]?.stringValue), auth: try #require(keys["auth"]?.stringValue))
                let secret = "browser-\(UUID().uuidString)"
                _ = try await s.send(title: "Agent K", body: secret)
                let push = try #require(try await s.pushes(to: phone, count: 1).last)
                let handle = try #require(try JSON.parse(push.payload).objectValue?["SEALEDPUSH_FETCH"]?.stringValue)
                // The Web Push plaintext mailbox v1 §2 sends for the same delivery, encrypted to the browser (RFC 8291).
                let body = try WebPushEncryptor(subscription: subscription).encrypt(JSON.serialize(.object(JSONObject([("sealedpush_fetch", .string(handle))]))))
                let r = try s.device(phone, ["push", "--platform", "webpush", "--json", "-"], stdin: body)
                let shown = try #require(try JSON.parse(r.stdout).objectValue, "\(r.stdoutText) \(r.stderr)")
                #expect(shown["outcome"]?.stringValue == "decrypted" && shown["notification"]?.objectValue?["body"]?.stringValue == secret, "\(shown)")
                // Both keys in one plaintext: malformedPayload, nothing fetched (mailbox v1 §5).
                let both = try WebPushEncryptor(subscription: subscription).encrypt(JSON.serialize(.object(JSONObject([
                    ("sealedpush_fetch", .string(handle)), ("ENCRYPTED_DATA", "AAAA")]))))
                let refused = try s.device(phone, ["push", "--platform", "webpush", "--json", "-"], stdin: both)
                let o = try #require(try JSON.parse(refused.stdout).objectValue, "\(refused.stderr)")
                #expect(o["reason"]?.stringValue == "malformedPayload", "\(o)")
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }

        @Test("bad input: overlong, truncated and malformed handles, a wrong token, a replayed challenge answer, a fetch after retraction")
        func badInput() async throws {
            let s = try await Setup.start("bad")
            do {
                let phone = try await s.phone("d1", token: 0x40)
                let id = try await s.send(title: "Agent K", body: "bad-input")
                let push = try #require(try await s.pushes(to: phone, count: 1).last)
                let handle = try #require(try JSON.parse(push.payload).objectValue?["SEALEDPUSH_FETCH"]?.stringValue)
                let parsed = try #require(MailboxHandle(handle))
                var wrong = Array(parsed.token)
                wrong[0] = wrong[0] == "A" ? "B" : "A"
                let bad = [handle + "A", String(handle.dropLast()), String(handle.dropLast(20)), handle + String(repeating: "x", count: 2000),
                           "1.\(parsed.deliveryID).\(String(wrong))", "2" + handle.dropFirst(), "", "1..", "1.\(parsed.deliveryID)"]
                var bodies = Set<String>()
                for text in bad {
                    let a = try await s.fetch(text)
                    #expect(a.status == 404 || (a.status == 413 && text.utf8.count > 1000), "\(text.prefix(20))…: \(a.status) \(a.text)")
                    if a.status == 404 { bodies.insert(a.text) }
                }
                #expect(bodies.count == 1, "the 404s must not differ: \(bodies)")
                // After all that the right handle still fetches (nothing was lost).
                #expect(try await s.fetch(handle).status == 200)
                // A device push whose handle is overlong or truncated: malformedPayload, nothing fetched.
                for broken in [handle + "A", String(handle.dropLast())] {
                    var o = try #require(try JSON.parse(push.payload).objectValue)
                    o["SEALEDPUSH_FETCH"] = .string(broken)
                    let r = try s.device(phone, ["push", "--json", "-"], stdin: JSON.serialize(.object(o)))
                    let shown = try #require(try JSON.parse(r.stdout).objectValue)
                    #expect(shown["reason"]?.stringValue == "malformedPayload", "\(shown)")
                }
                // A replayed challenge answer: the first list answers, the same answer again is 403 wrong_answer.
                let challenge = try await s.client.call(.POST, "/v1/mailbox/challenge", key: nil, json: .object(JSONObject([("app", "chat"), ("device_id", "d1")])))
                let sealed = try #require(challenge.json["sealed"]?.stringValue)
                let challengeID = try #require(challenge.json["challenge_id"]?.stringValue)
                let answer = try #require(MailboxChallenge.answer(sealed: sealed, with: try DeviceKeyring(store: phone.store).activeKeyPair()))
                let body = JSONValue.object(JSONObject([("challenge_id", .string(challengeID)), ("answer", .string(answer))]))
                let first = try await s.client.call(.POST, "/v1/mailbox/list", key: nil, json: body)
                #expect(first.status == 200 && first.json["handles"]?.arrayValue?.count == 1, "\(first.text)")
                let replayed = try await s.client.call(.POST, "/v1/mailbox/list", key: nil, json: body)
                #expect(replayed.status == 403 && replayed.code == "wrong_answer", "\(replayed.status) \(replayed.text)")
                // The list gave a fresh handle: the one from the push is now worthless (404), the listed one fetches.
                let fresh = try #require(first.json["handles"]?.arrayValue?.first?.objectValue?["handle"]?.stringValue)
                #expect(try await s.fetch(handle).status == 404)
                // Retraction: the listed handle then answers 410 retracted, and the device shows (Deleted).
                let retracted = try await s.client.call(.DELETE, "/v1/apps/chat/messages/\(id)")
                #expect(retracted.status == 204 || retracted.status == 200, "\(retracted.text)")
                let after = try await s.fetch(fresh)
                #expect(after.status == 410 && after.json["reason"]?.stringValue == "retracted", "\(after.text)")
                var o = try #require(try JSON.parse(push.payload).objectValue)
                o["SEALEDPUSH_FETCH"] = .string(fresh)
                let r = try s.device(phone, ["push", "--json", "-"], stdin: JSON.serialize(.object(o)))
                let shown = try #require(try JSON.parse(r.stdout).objectValue)
                #expect(shown["reason"]?.stringValue == "retracted" && shown["notification"]?.objectValue?["body"]?.stringValue == "(Deleted)", "\(shown)")
            } catch {
                await s.stop()
                throw error
            }
            await s.stop()
        }
    }
}
