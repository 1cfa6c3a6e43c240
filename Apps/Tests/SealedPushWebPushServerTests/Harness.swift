import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

/// A simulated browser in a temporary directory: device keys from `keys generate`, Web Push keys from
/// `device subscribe`, driven through the built `sealedpush`.
struct Browser {
    let dir: URL
    let id: String
    var keychain: String { dir.appendingPathComponent("browser").path }
    var recordPath: String { dir.appendingPathComponent("device.json").path }
    /// The subscription `device subscribe` printed.
    var subscription: JSONObject
    /// Its keys, parsed as an application server reads them.
    var keys: WebPushSubscriptionKeys

    /// A browser subscribed with the endpoint `https://127.0.0.1:8443/push/<id>` (the local service checks only the path).
    init(id: String = "browser-1") throws {
        dir = try makeScratchDirectory("browser")
        self.id = id
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", dir.appendingPathComponent("browser").path])
        try #require(generated.status == 0, "keys generate failed: \(generated.stderr)")
        try Data(generated.stdout).write(to: dir.appendingPathComponent("device.json"))
        (subscription, keys) = try Self.subscribe(keychain: dir.appendingPathComponent("browser").path, endpoint: "https://127.0.0.1:8443/push/\(id)")
    }

    /// Runs `device subscribe` and parses what it printed.
    static func subscribe(keychain: String, endpoint: String) throws -> (JSONObject, WebPushSubscriptionKeys) {
        let r = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", keychain, "--endpoint", endpoint])
        try #require(r.status == 0, "device subscribe failed: \(r.stderr)")
        guard case let .object(o) = try JSON.parse(r.stdout) else { throw HarnessFailure("subscribe printed no JSON object: \(r.stdoutText)") }
        let keys = try #require(o["keys"]?.objectValue)
        return (o, try WebPushSubscriptionKeys(p256dh: try #require(keys["p256dh"]?.stringValue), auth: try #require(keys["auth"]?.stringValue)))
    }

    /// Subscribes again (new keys), keeping the endpoint.
    mutating func resubscribe() throws -> String {
        let r = try ChildProcess.sealedpush(["device", "subscribe", "--keychain", keychain, "--endpoint", "https://127.0.0.1:8443/push/\(id)"])
        try #require(r.status == 0, "device subscribe failed: \(r.stderr)")
        guard case let .object(o) = try JSON.parse(r.stdout), let k = o["keys"]?.objectValue else { throw HarnessFailure("no subscription") }
        subscription = o
        keys = try WebPushSubscriptionKeys(p256dh: try #require(k["p256dh"]?.stringValue), auth: try #require(k["auth"]?.stringValue))
        return r.stderr
    }

    /// A sealed envelope for this browser's device key (the `ENCRYPTED_DATA` of `seal`'s APNs payload).
    func envelope(body: String = "The eagle lands at noon.") throws -> String {
        let r = try ChildProcess.sealedpush(["seal", "--to", recordPath, "--title", "Agent K", "--body", body])
        try #require(r.status == 0, "seal failed: \(r.stderr)")
        guard case let .object(payload) = try JSON.parse(r.stdout), let data = payload["ENCRYPTED_DATA"]?.stringValue else {
            throw HarnessFailure("seal printed no ENCRYPTED_DATA")
        }
        return data
    }

    /// The RFC 8291 body a gateway sends this browser for `envelope` (platforms v1 §3).
    func body(envelope: String) throws -> [UInt8] {
        try WebPushEncryptor(subscription: keys).encrypt(WebPushBody.plaintext(encryptedData: envelope))
    }

    /// `device push --platform webpush --json` of `body` (written to a file), and the JSON it printed.
    func push(_ body: [UInt8], _ extra: [String] = []) throws -> (result: ChildProcess.Result, json: JSONObject) {
        let file = dir.appendingPathComponent("body-\(UUID().uuidString).bin")
        try Data(body).write(to: file)
        let r = try ChildProcess.sealedpush(["device", "push", "--platform", "webpush", "--keychain", keychain, "--json"] + extra + [file.path])
        guard case let .object(o) = try JSON.parse(r.stdout) else { throw HarnessFailure("device push printed no JSON object: \(r.stdoutText) \(r.stderr)") }
        return (r, o)
    }
}

/// A test harness failure with a message.
struct HarnessFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// `sealedpush-server webpush serve` as a child process on a free loopback port.
final class ServeProcess {
    let child: ChildProcess
    let origin: String
    let caPath: String
    let dir: URL

    /// Starts the service with `arguments` (besides `--listen`, `--ca-out`) and waits for its `listening on` line.
    init(_ arguments: [String]) throws {
        dir = try makeScratchDirectory("webpush-serve")
        caPath = dir.appendingPathComponent("ca.pem").path
        child = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                 ["webpush", "serve", "--listen", "127.0.0.1:0", "--ca-out", caPath] + arguments, readLines: true)
        guard let line = child.waitForLine(startingWith: "listening on ", within: .seconds(30)) else {
            let result = child.kill()
            throw HarnessFailure("webpush serve did not start: \(result.stderr)")
        }
        // `listening on https://127.0.0.1:PORT (clients trust FILE)`
        origin = String(line.dropFirst("listening on ".count).split(separator: " ")[0])
    }

    /// The endpoint of subscription `id`.
    func endpoint(_ id: String) -> String { origin + "/push/" + id }

    /// The next outcome line on stdout, parsed.
    func nextOutcome(within timeout: Duration = .seconds(30)) throws -> JSONObject {
        guard let line = child.nextLine(within: timeout) else { throw HarnessFailure("no outcome line within \(timeout): \(child.stderrText)") }
        guard case let .object(o) = try JSON.parse(Array(line.utf8)) else { throw HarnessFailure("not a JSON line: \(line)") }
        return o
    }

    /// SIGTERM, then the result (bounded).
    func stop() -> ChildProcess.Result { child.terminate(grace: .seconds(15)) }
}

/// An HTTPS client trusting one CA file.
struct PushClient {
    let client: HTTPClient

    init(caPath: String) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(caPath))
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
    }

    /// An answer: status, headers and the body as JSON (when it is).
    struct Answer {
        let status: Int
        let headers: [(String, String)]
        let json: JSONObject?
        func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
        var reason: String? { json?["reason"]?.stringValue }
    }

    /// POSTs `body` to `url` with `headers`.
    func post(_ url: String, headers: [(String, String)], body: [UInt8], method: HTTPMethod = .POST) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if method == .POST { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        let json: JSONObject? = if case let .object(o)? = try? JSON.parse(Array(buffer: bytes)) { o } else { nil }
        return Answer(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) }, json: json)
    }

    func shutdown() async throws { try await client.shutdown() }
}

/// The headers a gateway sends (platforms v1 §3), with VAPID signed by `key` for `audience`.
func pushHeaders(key: VAPIDKey, audience: String, expiresIn: Int64 = 12 * 3600, ttl: String? = "60",
                 encoding: String? = "aes128gcm", urgency: String? = "high", topic: String? = nil) throws -> [(String, String)] {
    let token = try VAPIDToken.make(key: key, audience: audience, subject: try VAPIDSubject("mailto:ops@example.com"),
                                    expiresAt: Int64(Date().timeIntervalSince1970) + expiresIn)
    var headers: [(String, String)] = [("Authorization", VAPIDToken.authorization(token: token, key: key))]
    if let ttl { headers.append(("TTL", ttl)) }
    if let encoding { headers.append(("Content-Encoding", encoding)) }
    if let urgency { headers.append(("Urgency", urgency)) }
    if let topic { headers.append(("Topic", topic)) }
    return headers
}

/// Python for the independent peer: `$SEALEDPUSH_PYTHON`, else `<repo>/.build/pyenv` (`make pydeps`).
enum Python {
    static var executable: URL { ProjectPaths.python }

    /// Runs `script` with `input` as JSON on stdin; its stdout parsed as a JSON object. A missing Python or module fails
    /// the test, saying to run `make pydeps`.
    static func run(_ script: String, _ input: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        try #require(FileManager.default.isExecutableFile(atPath: executable.path),
                     "no Python at \(executable.path): run `make pydeps` (or `make test`), or set SEALEDPUSH_PYTHON",
                     sourceLocation: sourceLocation)
        let result = try ChildProcess.run(executable, ["-c", script], stdin: JSON.serialize(input), timeout: 60)
        try #require(!result.stderr.contains("ModuleNotFoundError"),
                     "Python at \(executable.path) lacks a module (http_ece or cryptography): run `make pydeps`\n\(result.stderr)",
                     sourceLocation: sourceLocation)
        try #require(result.status == 0, "the Python peer failed: \(result.stderr)", sourceLocation: sourceLocation)
        guard case let .object(o) = try JSON.parse(Array(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines).utf8)) else {
            throw HarnessFailure("the Python peer printed no JSON object: \(result.stdoutText)")
        }
        return o
    }
}
