import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOConcurrencyHelpers
import NIOCore
import SealedPushGateway
import SealedPushTestSupport
import SealedPushWire
import ServiceLifecycle

/// A webhook receiver on loopback written for the tests, independent of the gateway's signing code: it
/// recomputes `HMAC-SHA256(secret, "<t>." + body)` with swift-crypto from the shared secret, accepts the header
/// when any of its `v1=` values matches (two during a secret rotation), checks that `t` is within 5 minutes of
/// its own clock, records every arrival, and answers 500 to the first `failFirst` attempts of each event id, 200
/// afterwards. With `stallBody` it answers 200 with its headers and the first bytes of a body it never finishes. With
/// `holdFirst` it keeps the very first POST unanswered (`holding`) until `releaseFirst()`, `stop()` or 30 s.
final class WebhookReceiver: Sendable {
    /// One POST as it arrived.
    struct Arrival: Sendable {
        let id: String
        let type: String
        let t: Int64
        /// The first `v1=` value.
        let v1: String
        /// Every `v1=` value, in order.
        let v1s: [String]
        /// The `SealedPush-Signature` header as received.
        let header: String
        /// A signature matches the body under the secret.
        let signatureValid: Bool
        /// `t` is within 5 minutes of the receiver's clock.
        let fresh: Bool
        let body: [UInt8]
        /// What the receiver answered.
        let status: Int
        var json: JSONObject { (try? JSON.parse(body)).flatMap { if case let .object(o) = $0 { o } else { nil } } ?? JSONObject([]) }
    }

    let arrivals: NIOLockedValueBox<[Arrival]>
    /// Set by `stop()`: stalled bodies are then finished, so the server can shut down.
    let released = NIOLockedValueBox(false)
    /// Whether the first POST is held unanswered now (`holdFirst`).
    let holding = NIOLockedValueBox(false)
    /// Set by `releaseFirst()`: the held first POST is answered.
    let firstReleased = NIOLockedValueBox(false)
    let task: Task<Void, any Error>
    let group: ServiceGroup
    let port: Int

    init(secret: [UInt8], port: Int = 0, failFirst: Int = 0, stallBody: Bool = false, holdFirst: Bool = false) async throws {
        let arrivals = NIOLockedValueBox<[Arrival]>([])
        self.arrivals = arrivals
        let released = self.released
        let holding = self.holding, firstReleased = self.firstReleased
        let router = Router()
        router.post("hook") { request, _ -> Response in
            let body = Array(try await request.body.collect(upTo: 1 << 20).readableBytesView)
            let header = request.headers[HTTPField.Name("SealedPush-Signature")!] ?? ""
            var t: Int64 = 0
            var v1s: [String] = []
            for part in header.split(separator: ",") {
                if part.hasPrefix("t=") { t = Int64(part.dropFirst(2)) ?? 0 }
                if part.hasPrefix("v1=") { v1s.append(String(part.dropFirst(3))) }
            }
            let expected = HMAC<SHA256>.authenticationCode(for: Array("\(t).".utf8) + body, using: SymmetricKey(data: secret))
                .map { String(format: "%02x", $0) }.joined()
            let now = Int64(Date().timeIntervalSince1970)
            let object = (try? JSON.parse(body)).flatMap { if case let .object(o) = $0 { o } else { nil } } ?? JSONObject([])
            let id = object["id"]?.stringValue ?? ""
            let (status, first) = arrivals.withLockedValue { list -> (Int, Bool) in
                let first = list.isEmpty
                let earlier = list.filter { $0.id == id }.count
                let status = earlier < failFirst ? 500 : 200
                list.append(Arrival(id: id, type: object["type"]?.stringValue ?? "", t: t, v1: v1s.first ?? "", v1s: v1s, header: header,
                                    signatureValid: v1s.contains(expected), fresh: abs(now - t) <= 300, body: body, status: status))
                return (status, first)
            }
            if holdFirst, first {
                holding.withLockedValue { $0 = true }
                for _ in 0..<300 where !released.withLockedValue({ $0 }) && !firstReleased.withLockedValue({ $0 }) {
                    try? await Task.sleep(for: .milliseconds(100))
                }
                holding.withLockedValue { $0 = false }
            }
            if stallBody {
                // The headers and a first chunk go out; the rest of the announced 64 bytes waits until `stop()`.
                return Response(status: .ok, headers: [.contentLength: "64"], body: ResponseBody { writer in
                    try await writer.write(ByteBuffer(string: "{\"ok\":"))
                    for _ in 0..<600 where !released.withLockedValue({ $0 }) { try? await Task.sleep(for: .milliseconds(100)) }
                    try await writer.write(ByteBuffer(string: "true" + String(repeating: " ", count: 64 - 11) + "}"))
                    try await writer.finish(nil)
                })
            }
            return Response(status: .init(code: status))
        }
        var logger = Logger(label: "webhook-receiver")
        logger.logLevel = .critical  // its per-request logs are noise here
        let (ports, continuation) = AsyncStream<Int>.makeStream()
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)),
                                      onServerRunning: { channel in continuation.yield(channel.localAddress?.port ?? 0) }, logger: logger)
        // Stopped by a graceful shutdown, never by cancelling the server's task: a cancelled NIO server can drop a
        // connection it accepted but had not handed over yet, and NIO traps on it (swift-nio #2637).
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [application], logger: logger))
        self.group = group
        let task = Task {
            defer { continuation.finish() }
            try await group.run()
        }
        self.task = task
        self.port = try await boundPort(ports, of: task)
    }

    /// Every arrival so far.
    var all: [Arrival] { arrivals.withLockedValue { $0 } }
    /// The ids acknowledged (answered 200).
    var acknowledged: Set<String> { Set(all.filter { $0.status == 200 }.map(\.id)) }

    /// Answers the POST `holdFirst` holds.
    func releaseFirst() { firstReleased.withLockedValue { $0 = true } }

    func stop() async {
        released.withLockedValue { $0 = true }
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    }

    /// A fresh secret in a 0600 file of its own directory.
    static func writeSecret() throws -> (file: URL, secret: [UInt8]) {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let secret = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let file = directory.appendingPathComponent("webhook.secret")
        try Data((secret + "\n").utf8).write(to: file)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file.path)
        return (file, Array(secret.utf8))
    }

    /// The app members that point app `chat`'s webhook at a receiver on `port`.
    static func appMembers(port: Int, secretFile: URL, extra: JSONObject = JSONObject([])) -> JSONObject {
        var o = JSONObject([("webhook", .object(JSONObject([("url", .string("http://127.0.0.1:\(port)/hook")),
                                                           ("secret_file", .string(secretFile.path))])))])
        for m in extra { o[m.key] = m.value }
        return o
    }
}

/// Options for webhook tests: the scripted APNs, short retry delays, a quick poll.
func webhookOptions(_ apns: ScriptedAPNs, base: Duration = .milliseconds(100), window: Duration = .seconds(86_400)) -> GatewayOptions {
    var options = scriptedOptions(apns)
    options.webhookBaseRetryDelay = base
    options.webhookMaxRetryDelay = max(base, .milliseconds(500))
    options.webhookPollInterval = .milliseconds(50)
    options.webhookRetryWindow = window
    return options
}

extension GatewayHarness {
    /// Every event of app `chat` through `GET …/events`, `pageSize` at a time, following `after`.
    func allEvents(pageSize: Int = 2) async throws -> [JSONObject] {
        var out: [JSONObject] = []
        var after: String?
        for _ in 0..<1000 {
            let page = try await api.call(.GET, "/v1/apps/chat/events?limit=\(pageSize)" + (after.map { "&after=\($0)" } ?? ""), key: Keys.readOnly)
            guard page.status == 200 else { throw WaitTimedOut("a 200 from the events listing, got \(page.status) \(page.text)", waited: .zero) }
            let events = (page.json["events"]?.arrayValue ?? []).compactMap(\.objectValue)
            out += events
            guard events.count == pageSize, let last = events.last?["id"]?.stringValue else { break }
            after = last
        }
        return out
    }
}
