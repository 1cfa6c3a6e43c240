import Foundation
import SealedPushFCM
import SealedPushTestSupport
import Synchronization
import Testing

@Suite("FCM client")
struct FCMClientTests {
    /// A client whose fake FCM answers `messages:send` with `answers` in turn (the last repeats); the token endpoint
    /// is `FakeTokenEndpoint`.
    func setUp(_ answers: [Result<FCMHTTPResponse, FCMTransportError>], tokenAnswer: FCMHTTPResponse? = nil) throws
        -> (FCMClient, FakeTransport) {
        TestLogging.quiet()
        let account = try Fixtures.account()
        let clock = TestClock()
        let endpoint = FakeTokenEndpoint(account: account, clock: clock)
        let sends = Mutex(0)
        let transport = FakeTransport { request, _ in
            if request.url == Fixtures.tokenURI { return .success(tokenAnswer ?? endpoint.answer(request)) }
            let n = sends.withLock { $0 += 1; return $0 }
            return answers[min(n, answers.count) - 1]
        }
        let configuration = try FCMClientConfiguration(serviceAccount: account, tokenURL: Fixtures.tokenURI, now: { clock.date })
        return (FCMClient(configuration: configuration, serviceAccount: account, transport: transport), transport)
    }

    let body = Array(#"{"message":{"token":"t"}}"#.utf8)
    let ok = FCMHTTPResponse(status: 200, body: Array(#"{"name":"projects/demo-project/messages/1"}"#.utf8))
    let unauthorized = FCMHTTPResponse(status: 401, body: Array(#"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#.utf8))

    func sends(_ transport: FakeTransport) -> [FCMHTTPRequest] { transport.requests.filter { $0.url != Fixtures.tokenURI } }

    @Test("POSTs the body to {url}/v1/projects/{project_id}/messages:send with the bearer token")
    func request() async throws {
        let (client, transport) = try setUp([.success(ok)])
        #expect(await client.send(body) == FCMSendResult(outcome: .accepted(name: "projects/demo-project/messages/1"), status: 200))
        let request = try #require(sends(transport).first)
        #expect(request.url == "https://fcm.googleapis.com/v1/projects/demo-project/messages:send")
        #expect(request.headers["authorization"] == "Bearer tok-1")
        #expect(request.headers["content-type"] == "application/json; charset=UTF-8")
        #expect(request.body == body)
        #expect(request.responseBodyLimit == 64 * 1024)
        // A second send reuses the token.
        _ = await client.send(body)
        #expect(transport.requests.count == 3)
        #expect(await client.tokens.exchanges == 1)
    }

    @Test("401 → the token is renewed once and the attempt retried")
    func renewOnce() async throws {
        let (client, transport) = try setUp([.success(unauthorized), .success(ok)])
        #expect(await client.send(body) == FCMSendResult(outcome: .accepted(name: "projects/demo-project/messages/1"), status: 200))
        #expect(sends(transport).map { $0.headers["authorization"] } == ["Bearer tok-1", "Bearer tok-2"])
        #expect(await client.tokens.exchanges == 2)
    }

    @Test("A second 401 pauses the app's credentials")
    func secondUnauthorizedPauses() async throws {
        let (client, transport) = try setUp([.success(unauthorized)])
        #expect(await client.send(body) == FCMSendResult(outcome: .pauseCredentials(reason: "UNAUTHENTICATED"), status: 401))
        #expect(sends(transport).count == 2)
        #expect(await client.tokens.exchanges == 2)
    }

    @Test("No answer → retry; a refused service account → pause; a configured URL and project are used")
    func failures() async throws {
        let (timedOut, _) = try setUp([.failure(.timedOut)])
        #expect(await timedOut.send(body) == FCMSendResult(outcome: .retry(reason: "timeout", retryAfter: nil), status: nil))
        let (lost, _) = try setUp([.failure(.connection("connection reset"))])
        #expect(await lost.send(body).outcome == .retry(reason: "connection_failed", retryAfter: nil))
        let refusal = FCMHTTPResponse(status: 400, body: Array(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8))
        let (refused, transport) = try setUp([.success(ok)], tokenAnswer: refusal)
        #expect(await refused.send(body) == FCMSendResult(outcome: .pauseCredentials(reason: "invalid_grant"), status: nil))
        #expect(sends(transport).isEmpty)
        let (down, _) = try setUp([.success(ok)], tokenAnswer: FCMHTTPResponse(status: 503))
        #expect(await down.send(body).outcome == .retry(reason: "access_token_unavailable", retryAfter: nil))

        let account = try Fixtures.account()
        let local = try FCMClientConfiguration(serviceAccount: account, projectID: "other-project", url: "https://127.0.0.1:8443/",
                                               tokenURL: "https://127.0.0.1:8443/token")
        #expect(local.sendURL == "https://127.0.0.1:8443/v1/projects/other-project/messages:send")
        #expect(local.tokenURL == "https://127.0.0.1:8443/token")
        #expect(throws: FCMClientError.self) { try FCMClientConfiguration(serviceAccount: account, url: "http://fcm.googleapis.com") }
        #expect(throws: FCMClientError.self) { try FCMClientConfiguration(serviceAccount: account, url: "https://fcm.googleapis.com/v1") }
        #expect(throws: FCMClientError.self) { try FCMClientConfiguration(serviceAccount: account, projectID: "a/b") }
    }

    /// #44 E: the signed assertion goes to Google's token URL unless `fcm.token_url` names another explicitly; a
    /// project id is Google's syntax.
    @Test("A service account's token_uri is Google's unless token_url is set; project ids are Google's syntax")
    func tokenURIAndProjectID() throws {
        let account = try Fixtures.account()  // token_uri https://oauth2.example.test/token
        #expect(throws: FCMClientError.self) { try FCMClientConfiguration(serviceAccount: account) }
        #expect(try FCMClientConfiguration(serviceAccount: account, tokenURL: "https://oauth2.example.test/token").tokenURL == "https://oauth2.example.test/token")
        let google = FCMServiceAccount(projectID: account.projectID, privateKeyID: account.privateKeyID, clientEmail: account.clientEmail,
                                       tokenURI: "https://oauth2.googleapis.com/token", privateKey: account.privateKey)
        #expect(try FCMClientConfiguration(serviceAccount: google).tokenURL == "https://oauth2.googleapis.com/token")
        for good in ["demo-project", "my-app-12345", "abcdef", String(repeating: "a", count: 30)] {
            #expect(FCMServiceAccount.isValidProjectID(good), "\(good)")
        }
        for bad in ["a.b.c.d.e", "example.com:proj", "Demo-project", "1project", "proj-", "short", String(repeating: "a", count: 31), "proj_ect", "proj ect"] {
            #expect(!FCMServiceAccount.isValidProjectID(bad), "\(bad)")
            #expect(throws: FCMClientError.self) { try FCMClientConfiguration(serviceAccount: google, projectID: bad) }
        }
    }

    @Test("The AsyncHTTPClient transport: a refused connection is a typed failure; a missing CA file is named")
    func httpTransport() async throws {
        #expect(throws: FCMClientError.caCertificate(path: "/nonexistent/ca.pem", problem: "it does not exist or is not readable")) {
            try FCMHTTPClientTransport(caCertificateFile: "/nonexistent/ca.pem")
        }
        let transport = try FCMHTTPClientTransport(connectTimeout: .seconds(2))
        let request = FCMHTTPRequest(url: "https://127.0.0.1:1/v1/projects/p/messages:send", headers: [:], body: [],
                                     timeout: .seconds(5), responseBodyLimit: 1024)
        do {
            _ = try await transport.post(request)
            Issue.record("a POST to port 1 succeeded")
        } catch {
            #expect(error == .connection("connection refused"))
        }
        await transport.shutdown()
    }
}
