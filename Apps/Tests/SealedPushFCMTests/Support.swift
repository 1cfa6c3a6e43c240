import Foundation
import SealedPushCrypto
import SealedPushFCM
import SealedPushTestSupport
import SealedPushWire
import Synchronization
import Testing
import _CryptoExtras

/// Shared fixtures: one generated service account (RSA key generation is slow), fakes, Python.
enum Fixtures {
    static let tokenURI = "https://oauth2.example.test/token"

    /// One test service account for the whole suite.
    static let generated: Result<(account: FCMServiceAccount, json: SecureBytes), FCMServiceAccountError> = Result {
        () throws(FCMServiceAccountError) in try FCMServiceAccount.generate(project: "demo-project", tokenURI: tokenURI)
    }

    static func account() throws -> FCMServiceAccount { try generated.get().account }

    /// A second account with another key.
    static let other: Result<(account: FCMServiceAccount, json: SecureBytes), FCMServiceAccountError> = Result {
        () throws(FCMServiceAccountError) in try FCMServiceAccount.generate(project: "demo-project", tokenURI: tokenURI)
    }

    /// `$SEALEDPUSH_PYTHON`, else the venv `make pydeps` makes (with `cryptography`).
    static var python: URL { ProjectPaths.python }

    /// Runs `script` under the test Python with `input` on stdin; fails the test (never skips) when there is no Python.
    static func runPython(_ script: String, input: [UInt8]) throws -> ChildProcess.Result {
        try #require(FileManager.default.isExecutableFile(atPath: python.path),
                     "no Python at \(python.path): run `make pydeps` (or `make test`), or set SEALEDPUSH_PYTHON to a Python with `cryptography`")
        return try ChildProcess.run(python, ["-c", script], stdin: input, timeout: 60)
    }

    /// A private temporary directory, removed by the caller.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("sealedpush-fcm-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        return url
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    static func jsonBytes(_ object: JSONObject) -> [UInt8] { JSON.serialize(.object(object)) }
}

/// A wall clock tests move by hand, Unix seconds.
final class TestClock: Sendable {
    let seconds: Mutex<Int64>
    init(_ start: Int64 = 1_800_000_000) { seconds = Mutex(start) }
    var now: Int64 { seconds.withLock { $0 } }
    var date: Date { Date(timeIntervalSince1970: TimeInterval(now)) }
    func advance(_ by: Int64) { seconds.withLock { $0 += by } }
}

/// A transport that answers from a handler and records every request.
final class FakeTransport: FCMTransport {
    typealias Handler = @Sendable (FCMHTTPRequest, Int) async -> Result<FCMHTTPResponse, FCMTransportError>
    let handler: Handler
    let recorded = Mutex<[FCMHTTPRequest]>([])

    init(_ handler: @escaping Handler) { self.handler = handler }

    var requests: [FCMHTTPRequest] { recorded.withLock { $0 } }

    func post(_ request: FCMHTTPRequest) async throws(FCMTransportError) -> FCMHTTPResponse {
        let n = recorded.withLock { list in
            list.append(request)
            return list.count
        }
        return try await handler(request, n).get()
    }
}

/// A token endpoint as Google's behaves: verifies the assertion, answers `tok-<n>` valid for an hour.
struct FakeTokenEndpoint: Sendable {
    let account: FCMServiceAccount
    let clock: TestClock
    let counter = Counter()

    final class Counter: Sendable {
        let value = Mutex(0)
        func next() -> Int { value.withLock { $0 += 1; return $0 } }
    }

    func answer(_ request: FCMHTTPRequest) -> FCMHTTPResponse {
        let form = String(decoding: request.body, as: UTF8.self)
        let prefix = "grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion="
        guard form.hasPrefix(prefix), request.headers["content-type"] == "application/x-www-form-urlencoded" else {
            return FCMHTTPResponse(status: 400, body: Array(#"{"error":"unsupported_grant_type"}"#.utf8))
        }
        let assertion = String(form.dropFirst(prefix.count))
        switch FCMAssertion.verify(assertion, publicKey: account.publicKey, issuer: account.clientEmail, audience: account.tokenURI, now: clock.now) {
        case .success:
            let n = counter.next()
            return FCMHTTPResponse(status: 200, body: Array(#"{"access_token":"tok-\#(n)","expires_in":3600,"token_type":"Bearer"}"#.utf8))
        case let .failure(rejection):
            return FCMHTTPResponse(status: 400, body: Array(#"{"error":"invalid_grant","error_description":"\#(rejection)"}"#.utf8))
        }
    }
}
