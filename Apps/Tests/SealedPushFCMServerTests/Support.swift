import _CryptoExtras
import Foundation
import Logging
import SealedPushAPNsServer
import SealedPushCrypto
import SealedPushFCM
import SealedPushFCMServer
import SealedPushTestSupport
import SealedPushWire
import ServiceLifecycle
import Testing

/// Shared fixtures: service accounts (RSA key generation is slow: made once), a device made through the CLI, Python.
enum FCMFixtures {
    /// The token URI of the generated accounts (the default of `fcm generate-service-account`).
    static let tokenURI = "https://127.0.0.1:8443/token"

    static let generated: Result<(account: FCMServiceAccount, json: SecureBytes), FCMServiceAccountError> = Result {
        () throws(FCMServiceAccountError) in try FCMServiceAccount.generate(project: "demo-project", tokenURI: tokenURI)
    }

    /// Another key, the same names: what an assertion signed by the wrong key looks like.
    static let otherKey: Result<(account: FCMServiceAccount, json: SecureBytes), FCMServiceAccountError> = Result {
        () throws(FCMServiceAccountError) in try FCMServiceAccount.generate(project: "demo-project", tokenURI: tokenURI)
    }

    static func account() throws -> FCMServiceAccount { try generated.get().account }

    /// `$SEALEDPUSH_PYTHON`, else the venv `make pydeps` makes (with `cryptography`).
    static var python: URL { ProjectPaths.python }

    /// Runs `script` under the test Python with `input` on stdin; fails the test (never skips) when there is no Python.
    static func runPython(_ script: String, input: [UInt8]) throws -> ChildProcess.Result {
        try #require(FileManager.default.isExecutableFile(atPath: python.path),
                     "no Python at \(python.path): run `make pydeps` (or `make test`), or set SEALEDPUSH_PYTHON to a Python with `cryptography`")
        return try ChildProcess.run(python, ["-c", script], stdin: input, timeout: 60)
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// A JWT over `header` and `claims`, RS256 with `key` (for assertions `FCMAssertion.make` would never make).
    static func jwt(header: JSONObject = ["alg": "RS256", "typ": "JWT"], claims: JSONObject, key: _RSA.Signing.PrivateKey) throws -> String {
        let input = base64URL(JSON.serialize(.object(header))) + "." + base64URL(JSON.serialize(.object(claims)))
        let signature = try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + base64URL(Array(signature.rawRepresentation))
    }
}

/// A simulated device made with the CLI (`keys generate`), and messages sealed to it (`seal`).
struct FCMTestDevice {
    let directory: URL
    var keychain: String { directory.appendingPathComponent("android").path }
    var record: String { directory.appendingPathComponent("device.json").path }

    init(in directory: URL) throws {
        self.directory = directory
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", keychain])
        try #require(generated.status == 0, "keys generate failed: \(generated.stderr)")
        try Data(generated.stdout).write(to: URL(fileURLWithPath: record))
    }

    /// A sealed wire v1 envelope for this device (`seal`'s `ENCRYPTED_DATA`, decoded).
    func envelope(title: String = "Agent K", body: String = "The eagle lands at noon.") throws -> [UInt8] {
        let sealed = try ChildProcess.sealedpush(["seal", "--to", record, "--title", title, "--body", body])
        try #require(sealed.status == 0, "seal failed: \(sealed.stderr)")
        let payload = try #require(try JSON.parse(sealed.stdout).objectValue)
        let encrypted = try #require(payload["ENCRYPTED_DATA"]?.stringValue)
        return try #require(Data(base64Encoded: encrypted).map { [UInt8]($0) })
    }

    /// An FCM request body (`FCMMessage.body`) carrying a fresh envelope to `token`.
    func messageBody(token: String, title: String = "Agent K", body: String = "The eagle lands at noon.", collapseID: String? = nil) throws -> [UInt8] {
        let now = Date()
        return try FCMMessage.body(token: token, envelope: try envelope(title: title, body: body), priority: 10, messageTTL: 3600,
                                   expiresAt: now.addingTimeInterval(3600), now: now, collapseID: collapseID,
                                   deliveryID: "d-" + UUID().uuidString.prefix(8).lowercased())
    }
}

/// `fcm serve`'s server run in-process in a service group, on a free loopback port.
final class RunningLocalFCM: Sendable {
    let server: LocalFCMServer
    let group: ServiceGroup
    let task: Task<Void, any Error>
    let port: Int
    let caFile: String
    /// The messages accepted, in order.
    let accepted: AsyncStream<AcceptedFCMMessage>

    var base: String { "https://127.0.0.1:\(port)" }
    var tokenURL: String { base + "/token" }
    var rules: LocalFCMRules { server.rules }

    init(configuration: LocalFCMConfiguration, directory: URL, latency: Duration = .zero) async throws {
        let authority = try LocalCertificateAuthority.make()
        caFile = directory.appendingPathComponent("fcm-ca-\(UUID().uuidString.prefix(8)).pem").path
        try Data(authority.caPEM.utf8).write(to: URL(fileURLWithPath: caFile))
        let (ports, portsIn) = AsyncStream.makeStream(of: Int.self)
        let (accepted, acceptedIn) = AsyncStream.makeStream(of: AcceptedFCMMessage.self)
        self.accepted = accepted
        var logger = Logger(label: "test.fcm-serve")
        logger.logLevel = .warning
        let server = LocalFCMServer(rules: LocalFCMRules(configuration: configuration), authority: authority, host: "127.0.0.1", port: 0,
                                    latency: latency, logger: logger, onListening: { portsIn.yield($0) },
                                    onAccepted: { acceptedIn.yield($0) })
        self.server = server
        let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [server], logger: logger))
        self.group = group
        task = Task {
            defer {
                portsIn.finish()
                acceptedIn.finish()
            }
            try await group.run()
        }
        port = try await boundPort(ports, of: task)
    }

    /// Shuts the server down gracefully and waits (at most 30 s) for it to return.
    func stop() async {
        await group.triggerGracefulShutdown()
        let task = self.task
        _ = try? await firstElement(of: AsyncStream { continuation in
            Task {
                _ = try? await task.value
                continuation.yield(())
                continuation.finish()
            }
        }, within: .seconds(30), "the local FCM to stop")
    }

    /// A client of this server for `account`.
    func client(_ account: FCMServiceAccount, projectID: String? = nil) throws -> FCMClient {
        try FCMClient(configuration: try FCMClientConfiguration(serviceAccount: account, projectID: projectID, url: base, tokenURL: tokenURL,
                                                                caCertificateFile: caFile),
                      serviceAccount: account)
    }

    /// A raw HTTPS POST to `path` trusting this server's CA.
    func post(_ path: String, headers: [String: String], body: [UInt8]) async throws -> FCMHTTPResponse {
        let transport = try FCMHTTPClientTransport(caCertificateFile: caFile)
        let result: Result<FCMHTTPResponse, FCMTransportError>
        do {
            result = .success(try await transport.post(FCMHTTPRequest(url: base + path, headers: headers, body: body, timeout: .seconds(30),
                                                                      responseBodyLimit: 64 * 1024)))
        } catch {
            result = .failure(error)
        }
        await transport.shutdown()
        return try result.get()
    }

    /// A form POST to `/token` with `assertion`.
    func exchange(_ assertion: String, grantType: String = LocalFCMRules.grantType) async throws -> FCMHTTPResponse {
        try await post("/token", headers: ["content-type": "application/x-www-form-urlencoded"],
                       body: Array("grant_type=\(grantType)&assertion=\(assertion)".utf8))
    }

    /// A current access token for `account`.
    func accessToken(_ account: FCMServiceAccount) async throws -> String {
        let response = try await exchange(try FCMAssertion.make(account: account, issuedAt: Int64(Date().timeIntervalSince1970)))
        try #require(response.status == 200, "token endpoint: \(String(decoding: response.body, as: UTF8.self))")
        return try #require(try JSON.parse(response.body).objectValue?["access_token"]?.stringValue)
    }

    /// `messages:send` for `project` with `bearer` (nil: no Authorization header).
    func send(_ body: [UInt8], bearer: String?, project: String = "demo-project") async throws -> FCMHTTPResponse {
        var headers = ["content-type": "application/json; charset=UTF-8"]
        if let bearer { headers["authorization"] = "Bearer \(bearer)" }
        return try await post("/v1/projects/\(project)/messages:send", headers: headers, body: body)
    }
}

/// A private temporary directory.
func fcmScratchDirectory() throws -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-fcmserve-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    return url
}

/// The FCM error body of `response`.
func fcmError(_ response: FCMHTTPResponse) -> FCMErrorBody? { FCMAnswer.errorBody(response.body) }
