// URLSessionReceiptTransport (SealedPushApple) against the stand-in URLSession's data tasks, whose routes and
// records are kept apart from the download tests' (each test here uses URLs of its own, so the suites run side by side).
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
    @Suite("URLSessionReceiptTransport against the stand-in URLSession", .timeLimit(.minutes(5))) struct URLSessionReceiptTransportTests {
        init() { TestLogging.quiet() }

        /// A URL no other test uses.
        func url(_ path: String = "r") -> String { "https://collector-\(UUID().uuidString.lowercased()).example/\(path)" }

        func soon(_ duration: Duration = .seconds(30)) -> ContinuousClock.Instant { ContinuousClock.now.advanced(by: duration) }

        @Test("2xx is accepted: a POST of application/json with the body as given, no cookies, no cache, a timeout from the deadline",
              arguments: [200, 202, 204])
        func accepted(_ status: Int) async throws {
            let target = url()
            StandInURLServer.serveData(target, .status(status))
            let body = ReceiptMessage.delivered(id: "m", token: ReceiptRequest.makeToken(), at: 1, attachments: nil).paddedBody()
            let result = await URLSessionReceiptTransport().post(body, to: target, deadline: soon(.seconds(20)))
            #expect(result == .accepted(status: status))
            let record = try #require(StandInURLServer.dataRecords(for: target).first)
            let request = try #require(record.request)
            #expect(request.httpMethod == "POST")
            #expect(request.value(forHTTPHeaderField: "content-type") == "application/json")
            #expect(request.httpBody == Data(body))
            #expect(request.httpShouldHandleCookies == false)
            #expect(request.cachePolicy == .reloadIgnoringLocalCacheData)
            #expect(request.timeoutInterval > 15 && request.timeoutInterval <= 20)
            let session = try #require(record.session)
            #expect(!session.hasCookieStorage && !session.setsCookies && session.cookieAcceptPolicy == .never)
            #expect(!session.hasCredentialStorage && !session.hasURLCache && session.requestCachePolicy == .reloadIgnoringLocalCacheData)
            #expect(!record.cancelled && !record.followedRedirect)
        }

        @Test("4xx and 5xx are refused with their status", arguments: [400, 401, 403, 404, 410, 413, 429, 500, 503])
        func refused(_ status: Int) async throws {
            let target = url()
            StandInURLServer.serveData(target, .status(status, body: Array("{\"error\":\"no\"}".utf8)))
            #expect(await URLSessionReceiptTransport().post([0x7B, 0x7D], to: target, deadline: soon()) == .refused(status: status))
        }

        @Test("a redirect is refused with its 3xx status and never followed: the receipt goes to no other URL", arguments: [301, 302, 307, 308])
        func redirect(_ status: Int) async throws {
            let target = url()
            let elsewhere = url("elsewhere")
            StandInURLServer.serveData(target, .redirect(status: status, location: elsewhere))
            StandInURLServer.serveData(elsewhere, .status(204))
            #expect(await URLSessionReceiptTransport().post([0x7B, 0x7D], to: target, deadline: soon()) == .refused(status: status))
            #expect(StandInURLServer.dataRecords(for: target).map(\.followedRedirect) == [false])
            #expect(StandInURLServer.dataRecords(for: elsewhere).isEmpty)
        }

        @Test("no answer by the deadline fails: the task is cancelled at the deadline, whatever the server does")
        func deadline() async throws {
            let slow = url()
            StandInURLServer.serveData(slow, .status(204, delay: .seconds(20)))
            let start = ContinuousClock.now
            #expect(await URLSessionReceiptTransport().post([0x7B, 0x7D], to: slow, deadline: soon(.milliseconds(300))) == .failed)
            // The answer came at the deadline, not when the server would have answered (20 s). The measure includes the wait
            // for a thread of the cooperative pool, which other suites' file work can hold for a while on a small machine.
            #expect(ContinuousClock.now - start < .seconds(19))
            // The data task was ended at the deadline (cancelled by the transport, or its own timeout of the same length),
            // not run to its answer.
            let clock = ContinuousClock()
            let wait = clock.now
            while StandInURLServer.dataRecords(for: slow).first.map({ !$0.cancelled && !$0.timedOut }) ?? true, clock.now - wait < .seconds(30) {
                try await Task.sleep(for: .milliseconds(5))
            }
            let record = try #require(StandInURLServer.dataRecords(for: slow).first)
            #expect(record.cancelled || record.timedOut)
            #expect(record.bytesWritten == 0)
            // A server that never answers: the same.
            let silent = url()
            StandInURLServer.serveData(silent, .hang)
            #expect(await URLSessionReceiptTransport().post([0x7B, 0x7D], to: silent, deadline: soon(.milliseconds(200))) == .failed)
        }

        @Test("a refused connection fails; a deadline already past or a URL that is not http(s) fails without a request")
        func failures() async throws {
            let down = url()
            StandInURLServer.serveData(down, .failure)
            let transport = URLSessionReceiptTransport()
            #expect(await transport.post([0x7B, 0x7D], to: down, deadline: soon()) == .failed)
            let late = url()
            StandInURLServer.serveData(late, .status(204))
            #expect(await transport.post([0x7B, 0x7D], to: late, deadline: ContinuousClock.now.advanced(by: .milliseconds(-1))) == .failed)
            #expect(StandInURLServer.dataRecords(for: late).isEmpty)
            #expect(await transport.post([0x7B, 0x7D], to: "ftp://collector.example/r", deadline: soon()) == .failed)
            #expect(await transport.post([0x7B, 0x7D], to: "not a url", deadline: soon()) == .failed)
        }

        @Test("cancelling the Swift task cancels the data task and fails at once")
        func cancellation() async throws {
            let target = url()
            StandInURLServer.serveData(target, .hang)
            let transport = URLSessionReceiptTransport()
            let task = Task { await transport.post([0x7B, 0x7D], to: target, deadline: ContinuousClock.now.advanced(by: .seconds(120))) }
            let clock = ContinuousClock()
            let start = clock.now
            while StandInURLServer.dataRecords(for: target).isEmpty, clock.now - start < .seconds(60) { try await Task.sleep(for: .milliseconds(5)) }
            task.cancel()
            #expect(await task.value == .failed)
            #expect(clock.now - start < .seconds(60))
            while StandInURLServer.dataRecords(for: target).first?.cancelled != true, clock.now - start < .seconds(60) {
                try await Task.sleep(for: .milliseconds(5))
            }
            #expect(StandInURLServer.dataRecords(for: target).first?.cancelled == true)
        }

        @Test("a response body past 64 KiB is not read: the task is cancelled, the status kept")
        func boundedResponse() async throws {
            let target = url()
            StandInURLServer.serveData(target, .status(200, body: [UInt8](repeating: 0x41, count: 1_000_000)))
            #expect(await URLSessionReceiptTransport().post([0x7B, 0x7D], to: target, deadline: soon()) == .accepted(status: 200))
            let record = try #require(StandInURLServer.dataRecords(for: target).first)
            #expect(record.cancelled && record.bytesWritten < 200_000)
        }

        @Test("through ReceiptCourier and the app group outbox: sent on 204; queued when the collector does not answer in time")
        func withCourier() async throws {
            let dir = try AppGroupTempDirectory()
            let outbox = AppGroupReceiptOutbox(directory: dir.url)
            let transport = URLSessionReceiptTransport()
            // The courier's own timer never fires (a manual clock): what is measured is the transport's deadline, 2 s away.
            let courier = ReceiptCourier(transport: transport, outbox: outbox, timer: ManualClock())
            let ok = url()
            StandInURLServer.serveData(ok, .status(204))
            let token = ReceiptRequest.makeToken()
            let deadline = soon()
            #expect(await courier.sendReceipt(ReceiptRequest(url: ok, token: token), messageID: "m1", attachments: nil, now: 1, deadline: deadline) == .sent)
            let body = try #require(StandInURLServer.dataRecords(for: ok).first?.request?.httpBody)
            #expect(body.count == ReceiptMessage.paddedBodyBytes)
            let slow = url()
            StandInURLServer.serveData(slow, .hang)
            #expect(await courier.sendReceipt(ReceiptRequest(url: slow, token: token), messageID: "m2", attachments: nil, now: 1, deadline: deadline) == .queued)
            #expect(try outbox.entries().entries.map(\.url) == [slow])
        }
    }
}
#endif
