#if canImport(UserNotifications)
public import SealedPushReceiver
public import SealedPushWire
#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking   // Linux: the URLSession stand-ins (URLSession is in Foundation on Apple platforms)
#else
public import Foundation
#endif
import Synchronization
import Dispatch

/// The `MailboxFetcher` of an iOS extension and app: `POST {mailbox URL}/v1/mailbox/fetch` with `{"handle": …}` over
/// one `URLSessionDataTask` (mailbox v1 §3, §5).
///
/// - **The URL**: `https`, or `http` to loopback only (`localhost`, `127.0.0.0/8`, `[::1]`: a development gateway);
///   anything else is refused when the fetcher is made (`MailboxURLError`).
/// - **The session** (by default): ephemeral, with no response cache, cookie store or credential store, cookies neither
///   sent nor accepted, not waiting for connectivity. The envelope is held in memory only, never written to disk.
/// - **The deadline**: `deadlineSeconds`, at most 10 s; the task is cancelled then (the request's `timeoutInterval` is
///   an idle timeout, not a bound on the whole exchange) and when the calling Swift task is cancelled; either answers
///   `.failed` at once, whatever URLSession does next.
/// - **The size**: the response body is counted as it streams in; past `maximumResponseBytes` the task is cancelled
///   and the answer is `.failed`.
/// - **No redirects**: a 3xx is the answer (`.failed`): a handle is never carried to another URL.
///
/// It is also the app's `MailboxLister` (mailbox v1 §7): `list(app:deviceID:deadlineSeconds:answer:)` posts
/// `/v1/mailbox/challenge`, has the challenge opened with the device key, then posts `/v1/mailbox/list`, both over the
/// same session with the same rules (no redirects, bounded answers), the two exchanges together within one deadline.
///
/// One fetcher holds one `URLSession` (invalidated when the fetcher is released): keep one per process and mailbox URL
/// (`shared(mailboxURL:)`), as iOS runs several instances of the extension in one process.
public final class URLSessionMailboxFetcher: MailboxFetcher, MailboxLister, @unchecked Sendable {
    // `@unchecked Sendable`: `session` is Apple's `URLSession`, thread-safe ("NSURLSession instances are thread-safe",
    // NSURLSession.h) though not declared Sendable; it and `fetchURL` are immutable `let`s, the delegate is Sendable.

    /// The most response body bytes read before the task is cancelled: 128 KiB (a 64 KiB message's envelope in base64,
    /// with its JSON, is under 90 KiB).
    public static let maximumResponseBytes = 131_072
    /// The longest one fetch may take, whatever the caller asks: 10 s (mailbox v1 §5).
    public static let maximumDeadlineSeconds = 10.0

    /// The most bytes of a challenge answer (`POST /v1/mailbox/challenge`) read: 16 KiB.
    public static let maximumChallengeResponseBytes = 16_384
    /// The most bytes of a list answer (`POST /v1/mailbox/list`) read: 64 KiB (100 handles with their ids and times).
    public static let maximumListResponseBytes = 65_536

    /// The fetch endpoint: the mailbox URL followed by `/v1/mailbox/fetch`.
    public let fetchURL: String
    /// The challenge endpoint of the list (mailbox v1 §7): the mailbox URL followed by `/v1/mailbox/challenge`.
    public let challengeURL: String
    /// The list endpoint (mailbox v1 §7): the mailbox URL followed by `/v1/mailbox/list`.
    public let listURL: String
    private let target: URL
    private let challengeTarget: URL
    private let listTarget: URL
    private let session: URLSession
    private let exchanges: MailboxExchangeDelegate

    private static let sharedFetchers = Mutex<[String: URLSessionMailboxFetcher]>([:])

    /// The process's fetcher for `mailboxURL` (one session per mailbox URL for every instance of the extension).
    public static func shared(mailboxURL: String) throws(MailboxURLError) -> URLSessionMailboxFetcher {
        let made = try URLSessionMailboxFetcher.validated(mailboxURL)
        if let fetcher = sharedFetchers.withLock({ $0[made] }) { return fetcher }
        let fetcher = try URLSessionMailboxFetcher(mailboxURL: mailboxURL)
        return sharedFetchers.withLock { cache in
            if let existing = cache[made] { return existing }
            cache[made] = fetcher
            return fetcher
        }
    }

    /// A fetcher for the gateway at `mailboxURL` (its `public_url`) over an ephemeral session with no cache, cookie
    /// or credential store.
    public convenience init(mailboxURL: String) throws(MailboxURLError) {
        let configuration = URLSessionConfiguration.sealedPushExchange()
        try self.init(mailboxURL: mailboxURL, configuration: configuration)
    }

    /// A fetcher for `mailboxURL` over a session made with `configuration`, used as given.
    public init(mailboxURL: String, configuration: URLSessionConfiguration) throws(MailboxURLError) {
        fetchURL = try Self.validated(mailboxURL)
        let base = String(fetchURL.dropLast(Self.fetchPath.count))
        challengeURL = base + "/v1/mailbox/challenge"
        listURL = base + "/v1/mailbox/list"
        guard let target = URL(string: fetchURL), let challengeTarget = URL(string: challengeURL), let listTarget = URL(string: listURL) else {
            throw .invalid
        }
        self.target = target
        self.challengeTarget = challengeTarget
        self.listTarget = listTarget
        exchanges = MailboxExchangeDelegate()
        session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    private static let fetchPath = "/v1/mailbox/fetch"

    /// The fetch endpoint for `mailboxURL`, or why the URL is refused.
    static func validated(_ mailboxURL: String) throws(MailboxURLError) -> String {
        var base = mailboxURL
        while base.hasSuffix("/") { base.removeLast() }
        let endpoint = base + fetchPath
        guard let parts = HTTPURL(endpoint), !parts.pathAndQuery.contains("?") else { throw .invalid }
        guard parts.scheme == "https" || AttachmentURLPolicy.isLoopback(host: parts.host) else { throw .notHTTPS }
        return endpoint
    }

    /// POSTs `{"handle": handle}` and maps the answer (mailbox v1 §3): never throws, never waits past
    /// `min(deadlineSeconds, 10)`.
    public func fetch(_ handle: MailboxHandle, deadlineSeconds: Double) async -> MailboxFetchResult {
        let seconds = min(deadlineSeconds.isNaN ? 0 : deadlineSeconds, Self.maximumDeadlineSeconds)
        guard seconds > 0, !Task.isCancelled else { return .failed("no time was left for the mailbox fetch") }
        let body = JSON.serialize(.object(JSONObject([("handle", .string(handle.description))])))
        switch await exchange(target, body: body, seconds: seconds, limit: Self.maximumResponseBytes, what: "the mailbox fetch") {
        case let .answered(status, answer): return MailboxFetchResult.from(status: status, body: answer)
        case let .failed(why): return .failed(why)
        }
    }

    /// Asks for the device's waiting deliveries (mailbox v1 §7): `POST /v1/mailbox/challenge` with `{"app", "device_id"}`,
    /// the sealed challenge handed to `answer` (the device key opens it: `MailboxChallenge.answer(sealed:with:)`), then
    /// `POST /v1/mailbox/list` with `{"challenge_id", "answer"}`. Both exchanges together within
    /// `min(deadlineSeconds, 10)`; never throws. `answer` returning `nil` is `.wrongAnswer` with nothing more sent.
    public func list(app: String, deviceID: String, deadlineSeconds: Double,
                     answer: @Sendable (String) -> String?) async -> MailboxListResult {
        let seconds = min(deadlineSeconds.isNaN ? 0 : deadlineSeconds, Self.maximumDeadlineSeconds)
        guard seconds > 0, !Task.isCancelled else { return .failed("no time was left to ask for the mailbox list") }
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
        let request = JSON.serialize(.object(JSONObject([("app", .string(app)), ("device_id", .string(deviceID))])))
        let challenge = await exchange(challengeTarget, body: request, seconds: seconds, limit: Self.maximumChallengeResponseBytes,
                                       what: "the mailbox challenge")
        let (status, body): (Int, [UInt8])
        switch challenge {
        case let .answered(code, bytes): (status, body) = (code, bytes)
        case let .failed(why): return .failed(why)
        }
        guard status == 200, case let .object(o)? = try? JSON.parse(body), let id = o["challenge_id"]?.stringValue,
              let sealed = o["sealed"]?.stringValue else {
            return .failed("the gateway answered \(status) to the mailbox challenge without a challenge")
        }
        guard let answered = answer(sealed) else { return .wrongAnswer }
        let left = clock.now.duration(to: end)
        let remaining = Double(left.components.seconds) + Double(left.components.attoseconds) / 1e18
        guard remaining > 0, !Task.isCancelled else { return .failed("no time was left to ask for the mailbox list") }
        let listRequest = JSON.serialize(.object(JSONObject([("challenge_id", .string(id)), ("answer", .string(answered))])))
        switch await exchange(listTarget, body: listRequest, seconds: remaining, limit: Self.maximumListResponseBytes, what: "the mailbox list") {
        case let .answered(status, answer): return MailboxListResult.from(status: status, body: answer)
        case let .failed(why): return .failed(why)
        }
    }

    /// POSTs `body` (JSON) to `url` over one data task and waits for its status and body (at most `limit` bytes), never
    /// longer than `seconds`: a Dispatch timer, and the calling task's cancellation, end it with `.failed` at once.
    private func exchange(_ url: URL, body: [UInt8], seconds: Double, limit: Int, what: String) async -> MailboxExchangeAnswer {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: seconds)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.httpShouldHandleCookies = false
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        let task = URLSessionTaskHandle(session.dataTask(with: request))
        let exchanges = self.exchanges
        exchanges.register(task.identifier, limit: limit)
        // The deadline, whatever URLSession does: a Dispatch timer, so it fires on time even while every thread of the
        // cooperative pool is busy.
        let timer = DispatchWorkItem {
            exchanges.finish(task.identifier, with: .failed("\(what) did not finish within \(seconds) s"))
            task.cancel()
        }
        DispatchQueue.global(qos: .userInitiated).asyncAfter(deadline: .now() + .milliseconds(max(1, Int(seconds * 1000))), execute: timer)
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<MailboxExchangeAnswer, Never>) in
                exchanges.wait(for: task.identifier, continuation)
                task.resume()
            }
        } onCancel: {
            exchanges.finish(task.identifier, with: .failed("\(what) was cancelled"))
            task.cancel()
        }
    }
}

/// What one exchange of the mailbox came to: the gateway's status and body, or why there is none.
enum MailboxExchangeAnswer: Sendable, Equatable {
    /// The gateway answered `status` with `body` (complete, within the exchange's limit).
    case answered(Int, [UInt8])
    /// A network failure, an answer over the limit, the deadline or cancellation.
    case failed(String)
}

/// Why a mailbox URL is refused, and what to do.
public enum MailboxURLError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Not an absolute `http(s)` URL (user info, a fragment or a query are refused too).
    case invalid
    /// `http` to a host that is not loopback.
    case notHTTPS

    /// What happened, and what to do.
    public var description: String {
        switch self {
        case .invalid: "the mailbox URL is not an absolute https URL; set it to the gateway's public_url"
        case .notHTTPS: "the mailbox URL is not https (http only to localhost, 127.0.0.0/8 or [::1]); set it to the gateway's https public_url"
        }
    }
}

/// The session's delegate: refuses redirects, keeps each response's status and body (bounded by the exchange's limit),
/// and answers each exchange's caller once — at completion, at the deadline or at cancellation, whichever is first.
final class MailboxExchangeDelegate: NSObject, URLSessionDataDelegate {
    private struct Exchange {
        var status: Int?
        var body: [UInt8] = []
        var limit: Int
        var overLimit = false
        var outcome: MailboxExchangeAnswer?
        var continuation: CheckedContinuation<MailboxExchangeAnswer, Never>?
    }

    private let exchanges = Mutex<[Int: Exchange]>([:])

    /// Registers a task before it starts; its answer's body may be at most `limit` bytes.
    func register(_ id: Int, limit: Int) { exchanges.withLock { $0[id] = Exchange(limit: limit) } }

    /// Resumes `continuation` with the exchange's answer, at once if it is already known.
    func wait(for id: Int, _ continuation: CheckedContinuation<MailboxExchangeAnswer, Never>) {
        let ready = exchanges.withLock { e -> MailboxExchangeAnswer? in
            guard let exchange = e[id] else { return .failed("the mailbox fetch ended before it started") }
            if let outcome = exchange.outcome {
                e[id] = nil
                return outcome
            }
            e[id]?.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(returning: ready) }
    }

    /// Settles the exchange `id` with `result` unless it is settled already, and resumes its caller.
    func finish(_ id: Int, with result: MailboxExchangeAnswer) {
        let resume = exchanges.withLock { e -> CheckedContinuation<MailboxExchangeAnswer, Never>? in
            guard var exchange = e[id], exchange.outcome == nil else { return nil }
            exchange.body = []
            if let continuation = exchange.continuation {
                e[id] = nil
                return continuation
            }
            exchange.outcome = result
            e[id] = exchange
            return nil
        }
        resume?.resume(returning: result)
    }

    /// Never follows a redirect: the 3xx response is what the task completes with.
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    /// Notes the status; refuses a body announced over the limit.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let http = response as? HTTPURLResponse
        let announced = http.flatMap { $0.expectedContentLength >= 0 ? Int(clamping: $0.expectedContentLength) : nil }
        let over = exchanges.withLock { e -> Bool in
            guard let limit = e[dataTask.taskIdentifier]?.limit else { return false }
            let over = (announced ?? 0) > limit
            e[dataTask.taskIdentifier]?.status = http?.statusCode
            if over { e[dataTask.taskIdentifier]?.overLimit = true }
            return over
        }
        completionHandler(http == nil || over ? .cancel : .allow)
    }

    /// Keeps the body; cancels a task whose body passes its exchange's limit.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let over = exchanges.withLock { e -> Bool in
            guard var exchange = e[dataTask.taskIdentifier], !exchange.overLimit else { return false }
            guard exchange.body.count + data.count <= exchange.limit else {
                exchange.overLimit = true
                exchange.body = []
                e[dataTask.taskIdentifier] = exchange
                return true
            }
            exchange.body += data
            e[dataTask.taskIdentifier] = exchange
            return false
        }
        if over { dataTask.cancel() }
    }

    /// Answers the exchange with the status and body kept, or `.failed`.
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let exchange = exchanges.withLock { $0[task.taskIdentifier] }
        let result: MailboxExchangeAnswer
        if let exchange, exchange.overLimit {
            result = .failed("the gateway's answer is over \(exchange.limit) bytes")
        } else if error != nil {
            result = .failed("the gateway could not be reached")
        } else if let status = exchange?.status {
            result = .answered(status, exchange?.body ?? [])
        } else {
            result = .failed("the gateway gave no HTTP response")
        }
        finish(task.taskIdentifier, with: result)
    }
}
#endif
