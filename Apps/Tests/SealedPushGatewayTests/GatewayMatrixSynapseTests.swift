import Foundation
import SealedPushCrypto
@testable import SealedPushGateway
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// Where the venv with `matrix-synapse` is, and whether it is usable (`make synapse-venv` makes it).
enum SynapseVenv {
    /// `$SEALEDPUSH_SYNAPSE_PYTHON`, else `.build/synapse-venv/bin/python` at the repository root.
    static var python: URL {
        ProcessInfo.processInfo.environment["SEALEDPUSH_SYNAPSE_PYTHON"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? ProjectPaths.root.appendingPathComponent(".build/synapse-venv/bin/python")
    }

    /// Nil when Synapse imports in that venv; otherwise why not (printed, and the test is skipped).
    static let unavailable: String? = {
        guard FileManager.default.isExecutableFile(atPath: python.path) else {
            return "no Python at \(python.path): `make synapse-venv` installs matrix-synapse from PyPI (it needs the network)"
        }
        do {
            let run = try ChildProcess(launching: python, ["-c", "import synapse, yaml"])
            let result = try run.waitForExit(within: .seconds(120))
            return result.status == 0 ? nil : "matrix-synapse does not import in \(python.path): \(result.stderr.suffix(300))"
        } catch {
            return "matrix-synapse could not be checked in \(python.path): \(error)"
        }
    }()

    /// Whether the test can run; prints, once, why it is skipped when it cannot.
    static var available: Bool {
        if let why = unavailable { print("SKIPPED the real-Synapse test (matrix v1 §5): \(why)") }
        return unavailable == nil
    }
}

extension GatewaySuites {
    /// matrix v1 §5: a real Synapse (from PyPI, SQLite, on loopback, started and stopped by the test) sends its own
    /// notify for a message; the simulated iPhone, Android phone and browser open what the local push services got
    /// and show the room and event ids, which appear nowhere in what those services received. A pushkey the gateway
    /// rejects makes Synapse drop its pusher; Synapse's retry after a 503 is queued once. One Synapse start.
    @Suite("Gateway Matrix push gateway against a real Synapse (matrix v1 §5)", .timeLimit(.minutes(6)))
    struct GatewayMatrixSynapseTests {
        @Test(.enabled(if: SynapseVenv.available,
                       "SKIPPED, not passed: matrix-synapse is not installed in .build/synapse-venv (run `make synapse-venv`; it needs PyPI)"))
        func synapsesOwnNotifyIsSealedForEveryPlatformAndARejectedPusherIsDropped() async throws {
            let (fcmSection, account, fcmDirectory) = try GatewayFCMTests.fcmApp()
            let (webSection, webDirectory) = try GatewayPlatformTests.webpushApp()
            defer { for d in [fcmDirectory, webDirectory] { try? FileManager.default.removeItem(at: d) } }
            var section = fcmSection
            for m in webSection { section[m.key] = m.value }
            let appIDs = JSONObject([
                (MatrixFixture.iosApp, .object(JSONObject([("platform", "apns"), ("environment", "sandbox")]))),
                (MatrixFixture.androidApp, .object(JSONObject([("platform", "fcm")]))),
                (MatrixFixture.webApp, .object(JSONObject([("platform", "webpush")]))),
            ])
            section["matrix"] = .object(JSONObject([("app_ids", .object(appIDs)), ("allowed_sources", .array(["127.0.0.0/8", "::1"]))]))
            let fcm = ScriptedFCM()
            let web = CapturingSender()
            var options = GatewayFCMTests.options(fcm, account: account)
            let fcmSender = options.makePlatformSender
            options.makePlatformSender = { config, platform, logger in platform == .webpush ? web : try fcmSender?(config, platform, logger) }
            options.addressResolver = GatewayPlatformTests.options().addressResolver

            try await withGateway("matrix-synapse", options: options, extraApp: section) { g in
                let iphone = try Phone(in: g.directory, name: "iphone", token: hexToken(0x5e))
                let android = try Phone(in: g.directory, name: "android", token: "")
                let browser = try Phone(in: g.directory, name: "browser", token: "")
                let webKeys = WebPushUserAgentKeys.generate()
                let fcmToken = "cSynapse0:APA91bH-synapse-token"
                var pushers: [JSONValue] = [
                    MatrixFixture.device(MatrixFixture.iosApp, iphone.token, record: iphone.record),
                    MatrixFixture.device(MatrixFixture.androidApp, fcmToken, record: android.record),
                    MatrixFixture.webDevice(webKeys, record: browser.record),
                    MatrixFixture.device("im.example.unknown", "rejected-pushkey-1", record: iphone.record),
                ]
                pushers = pushers.map { p in
                    guard case var .object(o) = p else { return p }
                    o["pushkey_ts"] = nil
                    o["tweaks"] = nil
                    return .object(o)
                }
                let spec = JSONObject([
                    ("gateway", .string("http://127.0.0.1:\(g.apiPort)")), ("pushers", .array(pushers)),
                    ("fail_once_app_id", .string(MatrixFixture.iosApp)), ("rejected_app_id", "im.example.unknown"),
                ])
                let specFile = g.directory.appendingPathComponent("synapse-spec.json")
                try Data(JSON.serialize(.object(spec))).write(to: specFile)
                let work = g.directory.appendingPathComponent("synapse")
                let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("synapse_flow.py")
                let started = ContinuousClock.now
                let run = try ChildProcess(launching: SynapseVenv.python, [script.path, specFile.path, work.path])
                let result = try await offPool { try run.waitForExit(within: .seconds(300)) }
                print("the Synapse flow took \(ContinuousClock.now - started) (Synapse \(work.path))")
                let line = result.stdoutLines.last ?? ""
                guard result.status == 0, case let .object(outcome)? = try? JSON.parse(Array(line.utf8)), outcome["error"] == nil else {
                    let log = (try? String(contentsOf: work.appendingPathComponent("homeserver.log"), encoding: .utf8)) ?? ""
                    Issue.record("the Synapse flow failed: \(line)\n\(result.stderr.suffix(2000))\nhomeserver.log:\n\(log.suffix(3000))")
                    return
                }
                let roomID = try #require(outcome["room_id"]?.stringValue)
                let eventID = try #require(outcome["event_id"]?.stringValue)
                let users = [try #require(outcome["alice"]?.stringValue), try #require(outcome["bob"]?.stringValue)]

                // The pusher the gateway rejected is gone from Synapse; the others stay.
                let after = Set(outcome["pushers_after"]?.arrayValue?.compactMap(\.stringValue) ?? [])
                #expect(after == [MatrixFixture.iosApp, MatrixFixture.androidApp, MatrixFixture.webApp], "\(line)")
                #expect(outcome["rejected_seen"] == .array(["rejected-pushkey-1"]), "\(line)")
                // Synapse was told 503 once for the iPhone's pusher and retried the same notification.
                let notifies = try #require(outcome["notifies"]?.objectValue)
                #expect(notifies[MatrixFixture.iosApp] == .array([.int(503), .int(200)]), "\(line)")

                try await waitUntil("each push service to receive its push", within: .seconds(60)) {
                    !g.apns.pushes.isEmpty && !fcm.sent.withLockedValue(\.isEmpty) && !web.claims.withLockedValue(\.isEmpty)
                }
                let secrets = [roomID, eventID] + users
                // APNs: exactly one push for the iPhone although Synapse sent the notification twice.
                let pushes = g.apns.pushes.filter { $0.deviceToken == iphone.token }
                #expect(pushes.count == 1, "the retry after the 503 was queued once")
                let push = try #require(pushes.first)
                let apnsSeen = String(decoding: push.payload, as: UTF8.self) + (push.collapseID ?? "") + push.topic
                let fcmRequest = try #require(fcm.sent.withLockedValue { $0.first })
                let fcmSeen = String(decoding: fcmRequest.body, as: UTF8.self) + fcmRequest.url
                let webClaim = try #require(web.claims.withLockedValue { $0.first })
                let webSeen = String(decoding: webClaim.payload, as: UTF8.self) + webClaim.address + webClaim.collapseID
                for (service, seen) in [("APNs", apnsSeen), ("FCM", fcmSeen), ("Web Push", webSeen)] {
                    for secret in secrets { #expect(!seen.contains(secret), "\(service) received \(secret)") }
                }

                // Each simulated device opens its push and shows the room and the event.
                guard case let .object(fcmRoot)? = try? JSON.parse(fcmRequest.body), let envelope = fcmRoot["message"]?.objectValue?["data"]?.objectValue?["ENCRYPTED_DATA"]?.stringValue else {
                    Issue.record("the FCM request has no ENCRYPTED_DATA")
                    return
                }
                let opened: [(String, Phone, [UInt8])] = [
                    ("iPhone", iphone, push.payload),
                    ("Android", android, MatrixFixture.asAPNs(envelope)),
                    ("browser", browser, try MatrixFixture.openable(webClaim, web: webKeys)),
                ]
                for (name, phone, payload) in opened {
                    let result = await phone.open(payload, transport: g.receipts)
                    let content = try #require(result.notification, "\(name): \(result)")
                    let matrix = content.userInfo["matrix"]?.objectValue
                    #expect(result.outcome == .decrypted && matrix?["room_id"]?.stringValue == roomID && matrix?["event_id"]?.stringValue == eventID,
                            "\(name): \(result)")
                    print("\(name) shows room \(roomID) event \(eventID): \(content.body)")
                }
                let metrics = try await g.admin.call(.GET, "/metrics", key: nil).text
                #expect(metrics.contains("sealedpush_matrix_retries_total{app=\"chat\",platform=\"apns\"} 1"), "\(metrics)")
                #expect(metrics.contains("sealedpush_matrix_notifies_total{app=\"chat\",platform=\"apns\"} 1"))
                #expect(metrics.contains("reason=\"app_id_not_configured\"} 1"))
            }
        }
    }
}
