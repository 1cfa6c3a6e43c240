// URLSessionMailboxFetcher (SealedPushApple) against the stand-in URLSession's data tasks; each test uses URLs of its
// own, so the suite runs beside the receipt transport's.
#if os(Linux)
import Testing
import Foundation
import FoundationNetworking
import SealedPushApple
import SealedPushReceiver
import SealedPushWire
import SealedPushCrypto
import SealedPushTestSupport

extension AppGroupAndReceiptTests {
    @Suite("URLSessionMailboxFetcher against the stand-in URLSession", .timeLimit(.minutes(5))) struct URLSessionMailboxFetcherTests {
        init() { TestLogging.quiet() }

        /// A gateway URL no other test uses, and its fetch endpoint.
        func gateway() -> (base: String, endpoint: String) {
            let base = "https://gateway-\(UUID().uuidString.lowercased()).example"
            return (base, base + "/v1/mailbox/fetch")
        }

        let handle = MailboxHandle.make(deliveryID: "d_1")!

        static func json(_ pairs: [(String, JSONValue)]) -> [UInt8] { JSON.serialize(.object(JSONObject(pairs))) }

        @Test("200: a POST of {\"handle\"} as application/json, no cookies, no cache, ephemeral; the envelope comes back")
        func fetches() async throws {
            let (base, endpoint) = gateway()
            let envelope = CryptoLibrary.randomBytes(count: 700)
            StandInURLServer.serveData(endpoint, .status(200, body: Self.json([("envelope", .string(Base64.encode(envelope))), ("message_id", "m-1"),
                                                                              ("expires_at", "2026-12-02T00:00:00Z")])))
            let fetcher = try URLSessionMailboxFetcher(mailboxURL: base + "/")
            #expect(fetcher.fetchURL == endpoint)
            #expect(await fetcher.fetch(handle, deadlineSeconds: 5) == .envelope(envelope, messageID: "m-1"))
            let record = try #require(StandInURLServer.dataRecords(for: endpoint).first)
            let request = try #require(record.request)
            #expect(request.httpMethod == "POST")
            #expect(request.value(forHTTPHeaderField: "content-type") == "application/json")
            #expect(request.httpBody.map { Array($0) } == Self.json([("handle", .string(handle.description))]))
            #expect(request.httpShouldHandleCookies == false && request.cachePolicy == .reloadIgnoringLocalCacheData)
            #expect(request.timeoutInterval > 0 && request.timeoutInterval <= 5)
            let session = try #require(record.session)
            #expect(!session.hasCookieStorage && !session.setsCookies && session.cookieAcceptPolicy == .never)
            #expect(!session.hasCredentialStorage && !session.hasURLCache && session.requestCachePolicy == .reloadIgnoringLocalCacheData)
        }

        @Test("410 and 404 map to their outcomes; a redirect is never followed")
        func answers() async throws {
            for (status, body, expected) in [(410, Self.json([("reason", "retracted")]), MailboxFetchResult.retracted),
                                             (410, Self.json([("reason", "collected")]), .collected),
                                             (410, Self.json([("reason", "expired")]), .expired)] {
                let (base, endpoint) = gateway()
                StandInURLServer.serveData(endpoint, .status(status, body: body))
                #expect(await (try URLSessionMailboxFetcher(mailboxURL: base)).fetch(handle, deadlineSeconds: 5) == expected)
            }
            let (base, endpoint) = gateway()
            StandInURLServer.serveData(endpoint, .status(404, body: Self.json([("type", "unknown_handle")])))
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: base)).fetch(handle, deadlineSeconds: 5) else {
                Issue.record("404 is not a failure"); return
            }
            let (redirecting, redirectingEndpoint) = gateway()
            let elsewhere = gateway().endpoint
            StandInURLServer.serveData(redirectingEndpoint, .redirect(status: 307, location: elsewhere))
            StandInURLServer.serveData(elsewhere, .status(200, body: Self.json([("envelope", "AAAA"), ("message_id", "m")])))
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: redirecting)).fetch(handle, deadlineSeconds: 5) else {
                Issue.record("a redirect was followed"); return
            }
            #expect(StandInURLServer.dataRecords(for: elsewhere).isEmpty)
        }

        @Test("an answer over the limit fails: cancelled as it streams (no Content-Length) and at once when announced")
        func overTheLimit() async throws {
            let big = Array(repeating: UInt8(ascii: "A"), count: URLSessionMailboxFetcher.maximumResponseBytes + 5000)
            let (base, endpoint) = gateway()
            StandInURLServer.serveData(endpoint, .body(big, chunk: 1024, announce: false))
            guard case let .failed(why) = await (try URLSessionMailboxFetcher(mailboxURL: base)).fetch(handle, deadlineSeconds: 5) else {
                Issue.record("an overlong answer was taken"); return
            }
            #expect(why.contains("over"))
            let record = try #require(StandInURLServer.dataRecords(for: endpoint).first)
            #expect(record.bytesWritten < big.count, "the task was cancelled before the whole body came")
            let (announcedBase, announcedEndpoint) = gateway()
            StandInURLServer.serveData(announcedEndpoint, .status(200, body: big))
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: announcedBase)).fetch(handle, deadlineSeconds: 5) else {
                Issue.record("an announced overlong answer was taken"); return
            }
            #expect(StandInURLServer.dataRecords(for: announcedEndpoint).first?.bytesWritten == 0)
        }

        @Test("a hanging gateway: the deadline holds (at most 10 s whatever is asked), the task is ended")
        func deadline() async throws {
            let (base, endpoint) = gateway()
            StandInURLServer.serveData(endpoint, .hang)
            let start = ContinuousClock.now
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: base)).fetch(handle, deadlineSeconds: 0.3) else {
                Issue.record("a hanging gateway answered"); return
            }
            #expect(ContinuousClock.now - start < .seconds(9))
            let clock = ContinuousClock()
            let wait = clock.now
            while StandInURLServer.dataRecords(for: endpoint).first.map({ !$0.cancelled && !$0.timedOut }) ?? true, clock.now - wait < .seconds(30) {
                try await Task.sleep(for: .milliseconds(5))
            }
            let record = try #require(StandInURLServer.dataRecords(for: endpoint).first)
            #expect(record.cancelled || record.timedOut)
            // Asked for a minute: the request's timeout is still 10 s.
            let (slowBase, slowEndpoint) = gateway()
            StandInURLServer.serveData(slowEndpoint, .status(404, body: Self.json([("type", "x")])))
            _ = await (try URLSessionMailboxFetcher(mailboxURL: slowBase)).fetch(handle, deadlineSeconds: 60)
            #expect(try #require(StandInURLServer.dataRecords(for: slowEndpoint).first?.request).timeoutInterval <= 10)
        }

        @Test("cancelling the calling task fails the fetch at once and cancels the data task")
        func cancellation() async throws {
            let (base, endpoint) = gateway()
            StandInURLServer.serveData(endpoint, .hang)
            let fetcher = try URLSessionMailboxFetcher(mailboxURL: base)
            let handle = self.handle
            let task = Task { await fetcher.fetch(handle, deadlineSeconds: 8) }
            try await Task.sleep(for: .milliseconds(50))
            task.cancel()
            guard case .failed = await task.value else { Issue.record("a cancelled fetch answered"); return }
        }

        /// A gateway's challenge and list endpoints (mailbox v1 §7).
        func listGateway() -> (base: String, challenge: String, list: String) {
            let base = gateway().base
            return (base, base + "/v1/mailbox/challenge", base + "/v1/mailbox/list")
        }

        @Test("the list (§7): challenge, the device key opens it, the answer posted; the fresh handles come back oldest first")
        func lists() async throws {
            let device = BoxKeyPair.generate()
            let secret = CryptoLibrary.randomBytes(count: 32)
            let sealed = Base64.encode(try SealedBox.seal(SecureBytes(secret), to: device.publicKey))
            let (base, challenge, list) = listGateway()
            let first = MailboxHandle.make(deliveryID: "d_1")!, second = MailboxHandle.make(deliveryID: "d_2")!
            StandInURLServer.serveData(challenge, .status(200, body: Self.json([("challenge_id", "ch-1"), ("sealed", .string(sealed)), ("expires_in", .int(60))])))
            StandInURLServer.serveData(list, .status(200, body: Self.json([("handles", .array([
                .object(JSONObject([("handle", .string(first.description)), ("message_id", "m-1"), ("created_at", "2026-12-01T00:00:00Z")])),
                .object(JSONObject([("handle", "1.not a handle"), ("message_id", "m-x")])),
                .object(JSONObject([("handle", .string(second.description)), ("message_id", "m-2")])),
            ]))])))
            let fetcher = try URLSessionMailboxFetcher(mailboxURL: base + "/")
            #expect(fetcher.challengeURL == challenge && fetcher.listURL == list)
            let result = await fetcher.list(app: "chat", deviceID: "d1", deadlineSeconds: 5) { MailboxChallenge.answer(sealed: $0, with: device) }
            // A handle that does not parse is left out, never used partly.
            #expect(result == .handles([MailboxListedHandle(handle: first, messageID: "m-1"), MailboxListedHandle(handle: second, messageID: "m-2")]))
            let asked = try #require(StandInURLServer.dataRecords(for: challenge).first?.request)
            #expect(asked.httpMethod == "POST" && asked.value(forHTTPHeaderField: "content-type") == "application/json")
            #expect(asked.httpBody.map { Array($0) } == Self.json([("app", "chat"), ("device_id", "d1")]))
            let answered = try #require(StandInURLServer.dataRecords(for: list).first)
            let request = try #require(answered.request)
            #expect(request.httpMethod == "POST" && request.httpShouldHandleCookies == false && request.cachePolicy == .reloadIgnoringLocalCacheData)
            #expect(request.httpBody.map { Array($0) } == Self.json([("challenge_id", "ch-1"), ("answer", .string(Base64.encodeURLSafeNoPadding(secret)))]))
            #expect(request.timeoutInterval > 0 && request.timeoutInterval <= 5)
            let session = try #require(answered.session)
            #expect(!session.hasCookieStorage && !session.hasCredentialStorage && !session.hasURLCache)
        }

        @Test("the list's refusals: 403 (a replayed or wrong answer) is wrongAnswer; a challenge no key opens sends nothing more; other answers fail")
        func listRefusals() async throws {
            let device = BoxKeyPair.generate()
            let sealed = Base64.encode(try SealedBox.seal(SecureBytes(CryptoLibrary.randomBytes(count: 32)), to: device.publicKey))
            let challengeBody = Self.json([("challenge_id", "ch-1"), ("sealed", .string(sealed)), ("expires_in", .int(60))])
            // 403 wrong_answer (the gateway's answer to a replayed challenge answer).
            let (base, challenge, list) = listGateway()
            StandInURLServer.serveData(challenge, .status(200, body: challengeBody))
            StandInURLServer.serveData(list, .status(403, body: Self.json([("type", "wrong_answer")])))
            let fetcher = try URLSessionMailboxFetcher(mailboxURL: base)
            #expect(await fetcher.list(app: "chat", deviceID: "d1", deadlineSeconds: 5) { MailboxChallenge.answer(sealed: $0, with: device) } == .wrongAnswer)
            // Sealed to another key: nothing is posted to the list.
            let (otherBase, otherChallenge, otherList) = listGateway()
            StandInURLServer.serveData(otherChallenge, .status(200, body: challengeBody))
            StandInURLServer.serveData(otherList, .status(200, body: Self.json([("handles", .array([]))])))
            let other = BoxKeyPair.generate()
            #expect(await (try URLSessionMailboxFetcher(mailboxURL: otherBase)).list(app: "chat", deviceID: "d1", deadlineSeconds: 5) {
                MailboxChallenge.answer(sealed: $0, with: other)
            } == .wrongAnswer)
            #expect(StandInURLServer.dataRecords(for: otherList).isEmpty)
            // A 429 to the challenge, a challenge answer without its members, a list answer without handles, a redirect,
            // an unreachable gateway: each fails, never a partial list.
            let routes: [(StandInURLServer.Route, StandInURLServer.Route?)] = [
                (.status(429, body: Self.json([("type", "rate_limited")])), nil),
                (.status(200, body: Self.json([("challenge_id", "x")])), nil),
                (.status(200, body: challengeBody), .status(200, body: Self.json([("items", .array([]))]))),
                (.status(200, body: challengeBody), .status(500, body: Self.json([("type", "x")]))),
                (.redirect(status: 307, location: gateway().endpoint), nil),
                (.failure, nil),
            ]
            for (index, (first, second)) in routes.enumerated() {
                let (b, c, l) = listGateway()
                StandInURLServer.serveData(c, first)
                if let second { StandInURLServer.serveData(l, second) }
                guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: b)).list(app: "chat", deviceID: "d1", deadlineSeconds: 5, answer: {
                    MailboxChallenge.answer(sealed: $0, with: device)
                }) else { Issue.record("case \(index) did not fail"); continue }
            }
        }

        @Test("the list's answers are bounded (an overlong list fails as it streams) and one deadline holds both exchanges")
        func listLimitsAndDeadline() async throws {
            let device = BoxKeyPair.generate()
            let sealed = Base64.encode(try SealedBox.seal(SecureBytes(CryptoLibrary.randomBytes(count: 32)), to: device.publicKey))
            let challengeBody = Self.json([("challenge_id", "ch-1"), ("sealed", .string(sealed)), ("expires_in", .int(60))])
            let big = Array(repeating: UInt8(ascii: "A"), count: URLSessionMailboxFetcher.maximumListResponseBytes + 4096)
            let (base, challenge, list) = listGateway()
            StandInURLServer.serveData(challenge, .status(200, body: challengeBody))
            StandInURLServer.serveData(list, .body(big, chunk: 1024, announce: false))
            guard case let .failed(why) = await (try URLSessionMailboxFetcher(mailboxURL: base)).list(app: "chat", deviceID: "d1", deadlineSeconds: 5, answer: {
                MailboxChallenge.answer(sealed: $0, with: device)
            }) else { Issue.record("an overlong list was taken"); return }
            #expect(why.contains("over"))
            #expect(try #require(StandInURLServer.dataRecords(for: list).first).bytesWritten < big.count)
            // An overlong challenge answer, announced: refused before its body is read.
            let (bigBase, bigChallenge, _) = listGateway()
            StandInURLServer.serveData(bigChallenge, .status(200, body: Array(repeating: UInt8(ascii: " "), count: URLSessionMailboxFetcher.maximumChallengeResponseBytes + 1)))
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: bigBase)).list(app: "chat", deviceID: "d1", deadlineSeconds: 5, answer: {
                MailboxChallenge.answer(sealed: $0, with: device)
            }) else { Issue.record("an overlong challenge answer was taken"); return }
            // A challenge that takes most of the deadline, then a hanging list: the whole exchange still ends by the deadline.
            let (slowBase, slowChallenge, slowList) = listGateway()
            StandInURLServer.serveData(slowChallenge, .status(200, body: challengeBody, delay: .seconds(1)))
            StandInURLServer.serveData(slowList, .hang)
            let clock = ContinuousClock()
            let start = clock.now
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: slowBase)).list(app: "chat", deviceID: "d1", deadlineSeconds: 3, answer: {
                MailboxChallenge.answer(sealed: $0, with: device)
            }) else { Issue.record("a hanging list answered"); return }
            #expect(clock.now - start < .seconds(9))
            let listRequest = try #require(StandInURLServer.dataRecords(for: slowList).first?.request)
            #expect(listRequest.timeoutInterval < 2.5, "the list gets what is left of the deadline, not a new one: \(listRequest.timeoutInterval)")
            // A hanging challenge: the deadline holds; asked for a minute, the request's timeout is still 10 s.
            let (hangBase, hangChallenge, _) = listGateway()
            StandInURLServer.serveData(hangChallenge, .hang)
            guard case .failed = await (try URLSessionMailboxFetcher(mailboxURL: hangBase)).list(app: "chat", deviceID: "d1", deadlineSeconds: 0.3, answer: {
                MailboxChallenge.answer(sealed: $0, with: device)
            }) else { Issue.record("a hanging challenge answered"); return }
            let (longBase, longChallenge, _) = listGateway()
            StandInURLServer.serveData(longChallenge, .status(429, body: Self.json([("type", "x")])))
            _ = await (try URLSessionMailboxFetcher(mailboxURL: longBase)).list(app: "chat", deviceID: "d1", deadlineSeconds: 60) { _ in nil }
            #expect(try #require(StandInURLServer.dataRecords(for: longChallenge).first?.request).timeoutInterval <= 10)
        }

        @Test("the mailbox URL is https, or http to loopback only; anything else is refused when the fetcher is made")
        func urls() throws {
            #expect(throws: MailboxURLError.notHTTPS) { try URLSessionMailboxFetcher(mailboxURL: "http://gateway.example") }
            #expect(throws: MailboxURLError.notHTTPS) { try URLSessionMailboxFetcher(mailboxURL: "http://10.0.0.2:8080") }
            for bad in ["ftp://gateway.example", "gateway.example", "", "https://user@gateway.example", "https://gateway.example/#x",
                        "https://gateway.example/?a=b"] {
                #expect(throws: MailboxURLError.self, "\(bad)") { try URLSessionMailboxFetcher(mailboxURL: bad) }
            }
            #expect(try URLSessionMailboxFetcher(mailboxURL: "http://127.0.0.1:8080").fetchURL == "http://127.0.0.1:8080/v1/mailbox/fetch")
            #expect(try URLSessionMailboxFetcher(mailboxURL: "http://localhost:8080/base").fetchURL == "http://localhost:8080/base/v1/mailbox/fetch")
            #expect(try URLSessionMailboxFetcher(mailboxURL: "http://[::1]:8080").fetchURL == "http://[::1]:8080/v1/mailbox/fetch")
            #expect(try URLSessionMailboxFetcher(mailboxURL: "http://localhost:8080/base/").listURL == "http://localhost:8080/base/v1/mailbox/list")
            #expect(try URLSessionMailboxFetcher.shared(mailboxURL: "https://g.example") === URLSessionMailboxFetcher.shared(mailboxURL: "https://g.example/"))
        }
    }
}
#endif
