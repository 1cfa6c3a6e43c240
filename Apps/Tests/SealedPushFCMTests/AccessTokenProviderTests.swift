import Foundation
import SealedPushFCM
import Testing

@Suite("Access tokens")
struct AccessTokenProviderTests {
    func setUp(delay: Duration = .zero) throws -> (FCMAccessTokenProvider, FakeTransport, TestClock) {
        let account = try Fixtures.account()
        let clock = TestClock()
        let endpoint = FakeTokenEndpoint(account: account, clock: clock)
        let transport = FakeTransport { request, _ in
            if delay > .zero { try? await Task.sleep(for: delay) }
            return .success(endpoint.answer(request))
        }
        let provider = FCMAccessTokenProvider(account: account, transport: transport, now: { clock.now })
        return (provider, transport, clock)
    }

    @Test("A token is reused until 5 minutes before it expires, then renewed")
    func reuse() async throws {
        let (provider, transport, clock) = try setUp()
        let first = try await provider.token()
        #expect(first.value == "tok-1")
        #expect(first.expiresAt == clock.now + 3600)
        #expect(transport.requests.first?.url == Fixtures.tokenURI)
        clock.advance(3299)
        #expect(try await provider.token() == first)
        #expect(await provider.exchanges == 1)
        clock.advance(1)  // 5 minutes before expiry
        #expect(try await provider.token().value == "tok-2")
        #expect(await provider.exchanges == 2)
        #expect(transport.requests.count == 2)
    }

    @Test("50 concurrent callers share one exchange")
    func singleFlight() async throws {
        let (provider, transport, _) = try setUp(delay: .milliseconds(200))
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<50 { group.addTask { try await provider.token().value } }
            var all: [String] = []
            for try await token in group { all.append(token) }
            return all
        }
        #expect(tokens.count == 50)
        #expect(Set(tokens) == ["tok-1"])
        #expect(transport.requests.count == 1)
        #expect(await provider.exchanges == 1)
    }

    @Test("invalidate drops a refused token once; a stale invalidate keeps the newer token")
    func invalidate() async throws {
        let (provider, transport, _) = try setUp()
        let first = try await provider.token()
        await provider.invalidate(first)
        let second = try await provider.token()
        #expect(second.value == "tok-2")
        await provider.invalidate(first)  // a second request that saw the same 401
        #expect(try await provider.token() == second)
        #expect(transport.requests.count == 2)
    }

    @Test("Failures are typed, never cached, and hold no secret")
    func failures() async throws {
        let account = try Fixtures.account()
        let clock = TestClock()
        let transport = FakeTransport { _, n in
            switch n {
            case 1: return .success(FCMHTTPResponse(status: 400, body: Array(#"{"error":"invalid_grant","error_description":"Invalid JWT Signature."}"#.utf8)))
            case 2: return .failure(.connection("connection refused"))
            case 3: return .success(FCMHTTPResponse(status: 200, body: Array("<html>".utf8)))
            case 4: return .success(FCMHTTPResponse(status: 200, body: Array(#"{"access_token":"tok","expires_in":3600,"token_type":"MAC"}"#.utf8)))
            case 5: return .success(FCMHTTPResponse(status: 503, body: Array("unavailable".utf8)))
            case 6: return .failure(.timedOut)
            default: return .success(FCMHTTPResponse(status: 200, body: Array(#"{"access_token":"tok-ok","expires_in":3599,"token_type":"Bearer"}"#.utf8)))
            }
        }
        let provider = FCMAccessTokenProvider(account: account, tokenURL: "https://127.0.0.1:8443/token", transport: transport, now: { clock.now })
        await #expect(throws: FCMAccessTokenError.refused(status: 400, error: "invalid_grant", errorDescription: "Invalid JWT Signature.")) {
            try await provider.token()
        }
        await #expect(throws: FCMAccessTokenError.unreachable(.connection("connection refused"))) { try await provider.token() }
        await #expect(throws: FCMAccessTokenError.malformedAnswer(detail: "not a JSON object")) { try await provider.token() }
        await #expect(throws: FCMAccessTokenError.malformedAnswer(detail: #""token_type" is not "Bearer""#)) { try await provider.token() }
        await #expect(throws: FCMAccessTokenError.refused(status: 503, error: nil, errorDescription: nil)) { try await provider.token() }
        await #expect(throws: FCMAccessTokenError.unreachable(.timedOut)) { try await provider.token() }
        let token = try await provider.token()
        #expect(token.value == "tok-ok")
        #expect(token.expiresAt == clock.now + 3599)
        #expect(!"\(token)".contains("tok-ok"))
        #expect(await provider.exchanges == 7)
        // The assertion went to the configured token URL; its audience is still the file's token_uri (§2).
        let request = try #require(transport.requests.last)
        #expect(request.url == "https://127.0.0.1:8443/token")
        let assertion = String(String(decoding: request.body, as: UTF8.self).split(separator: "=").last ?? "")
        #expect(FCMAssertion.verify(assertion, publicKey: account.publicKey, issuer: account.clientEmail, audience: account.tokenURI,
                                    now: clock.now).map { $0.audience } == .success(Fixtures.tokenURI))
        #expect(FCMAccessTokenError.refused(status: 400, error: "invalid_grant", errorDescription: nil).isTransient == false)
        #expect(FCMAccessTokenError.refused(status: 503, error: nil, errorDescription: nil).isTransient)
    }
}
