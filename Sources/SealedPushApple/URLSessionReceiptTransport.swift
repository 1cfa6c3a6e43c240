#if canImport(UserNotifications)
public import SealedPushReceiver
import SealedPushWire
#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking   // Linux: the URLSession stand-ins (URLSession is in Foundation on Apple platforms)
#else
public import Foundation
#endif
import Synchronization
import Dispatch

/// The `ReceiptTransport` of an iOS app and its extensions: one `URLSessionDataTask` per receipt or failure report
/// (receipts v1 §2, §3).
///
/// - **The request**: `POST`, `Content-Type: application/json`, the body as given (the courier pads it), no cookies
///   (`httpShouldHandleCookies = false`), ignoring any cache, `timeoutInterval` the time left until the deadline.
/// - **The session** (by default): ephemeral, with no response cache, cookie store or credential store, cookies
///   neither sent nor accepted, not waiting for connectivity — a receipt leaves nothing on the device and carries
///   nothing but its body.
/// - **The deadline**: the task is cancelled at `deadline` (the request's `timeoutInterval` is an idle timeout, not a
///   bound on the whole exchange) and when the calling Swift task is cancelled; either answers `.failed` at once,
///   whatever URLSession does next.
/// - **No redirects**: the delegate answers `nil` to a redirect, so the 3xx response is the answer: `.refused(status:)`
///   (the courier keeps the entry and backs its origin off; a receipt is never carried to another URL).
/// - **The answer**: `2xx` is `.accepted(status:)`, any other status `.refused(status:retryAfter:)` (with the seconds
///   of its `Retry-After`, if any), no response (no connection,
///   TLS failure, timeout, cancellation) `.failed`. The response body is read and discarded; past 64 KiB the task is
///   cancelled, the status already known.
///
/// One transport holds one `URLSession` (invalidated when the transport is released): keep one per process, as a
/// stored property, so connections to a collector are reused across a flush.
public final class URLSessionReceiptTransport: ReceiptTransport, @unchecked Sendable {
    // `@unchecked Sendable`: `session` is Apple's `URLSession`, not declared Sendable in the strictest reading of its
    // documentation but thread-safe ("NSURLSession instances are thread-safe", NSURLSession.h); it is an immutable
    // `let`, and the only other stored property, the delegate, is Sendable.

    /// The most response body bytes read before the task is cancelled: 64 KiB (a collector answers with none).
    public static let maximumResponseBytes = 65_536

    private let session: URLSession
    private let exchanges: ReceiptExchangeDelegate

    /// The process's transport: one session for every request of every instance of the extension.
    public static let shared = URLSessionReceiptTransport()

    /// A transport over an ephemeral session with no cache, cookie or credential store.
    public convenience init() {
        let configuration = URLSessionConfiguration.sealedPushExchange()
        self.init(configuration: configuration)
    }

    /// A transport over a session made with `configuration`, used as given.
    public init(configuration: URLSessionConfiguration) {
        exchanges = ReceiptExchangeDelegate()
        session = URLSession(configuration: configuration, delegate: exchanges, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    /// POSTs `body` to `url` as `application/json`, giving up at `deadline`: `.accepted` for `2xx`, `.refused` for any
    /// other status (a redirect included), `.failed` without one. A URL that is not an absolute `http(s)` URL, or a
    /// deadline already past, is `.failed` without a request.
    public func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero, !Task.isCancelled, HTTPURL(url) != nil, let target = URL(string: url) else { return .failed }
        let (seconds, attoseconds) = remaining.components
        var request = URLRequest(url: target, cachePolicy: .reloadIgnoringLocalCacheData,
                                 timeoutInterval: max(0.001, Double(seconds) + Double(attoseconds) / 1e18))
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.httpShouldHandleCookies = false
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let task = URLSessionTaskHandle(session.dataTask(with: request))
        let exchanges = self.exchanges
        exchanges.register(task.identifier)
        // The deadline, whatever URLSession does: answer `.failed` and cancel the task. A Dispatch timer, not a Swift
        // task, so it fires on time even while every thread of the cooperative pool is busy.
        let timer = DispatchWorkItem {
            exchanges.finish(task.identifier, with: .failed)
            task.cancel()
        }
        DispatchQueue.global(qos: .userInitiated).asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: nanoseconds(remaining))), execute: timer)
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<ReceiptPostResult, Never>) in
                exchanges.wait(for: task.identifier, continuation)
                task.resume()
            }
        } onCancel: {
            exchanges.finish(task.identifier, with: .failed)
            task.cancel()
        }
    }
}

/// `duration` in whole nanoseconds (saturating).
private func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
    return overflow ? (seconds < 0 ? .min : .max) : whole.addingReportingOverflow(attoseconds / 1_000_000_000).partialValue
}

/// The session's delegate: refuses redirects, notes each response's status, discards (and bounds) bodies, and
/// answers each exchange's caller once — at completion, at the deadline or at cancellation, whichever is first.
final class ReceiptExchangeDelegate: NSObject, URLSessionDataDelegate {
    private struct Exchange {
        var status: Int?
        var bodyBytes = 0
        var outcome: ReceiptPostResult?
        var continuation: CheckedContinuation<ReceiptPostResult, Never>?
    }

    private let exchanges = Mutex<[Int: Exchange]>([:])

    /// Registers a task before it starts.
    func register(_ id: Int) {
        exchanges.withLock { $0[id] = Exchange() }
    }

    /// Resumes `continuation` with the exchange's answer, at once if it is already known.
    func wait(for id: Int, _ continuation: CheckedContinuation<ReceiptPostResult, Never>) {
        let ready = exchanges.withLock { e -> ReceiptPostResult? in
            guard let exchange = e[id] else { return .failed }
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
    func finish(_ id: Int, with result: ReceiptPostResult) {
        let resume = exchanges.withLock { e -> CheckedContinuation<ReceiptPostResult, Never>? in
            guard var exchange = e[id], exchange.outcome == nil else { return nil }
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

    /// Notes the status and lets the (small) body come, to keep the connection reusable.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let status = (response as? HTTPURLResponse)?.statusCode
        exchanges.withLock { $0[dataTask.taskIdentifier]?.status = status }
        completionHandler(status == nil ? .cancel : .allow)
    }

    /// Discards the body; cancels a task whose body passes `maximumResponseBytes` (the status is known by then).
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let over = exchanges.withLock { e -> Bool in
            guard e[dataTask.taskIdentifier] != nil else { return false }
            e[dataTask.taskIdentifier]?.bodyBytes += data.count
            return (e[dataTask.taskIdentifier]?.bodyBytes ?? 0) > URLSessionReceiptTransport.maximumResponseBytes
        }
        if over { dataTask.cancel() }
    }

    /// Answers the exchange from the status noted, or `.failed` when there was none.
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let status = exchanges.withLock { $0[task.taskIdentifier]?.status } ?? (task.response as? HTTPURLResponse)?.statusCode
        let result: ReceiptPostResult
        switch status {
        case let status? where (200...299).contains(status): result = .accepted(status: status)
        case let status?:
            // A collector that limits this source says when to come back (gateway v1 §6): the outbox honours it.
            let value = (task.response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Retry-After")
            result = .refused(status: status, retryAfter: value.flatMap { RetryAfter.seconds($0, now: Int64(Date().timeIntervalSince1970)) })
        case nil: result = .failed
        }
        // The entry goes when its caller takes the answer (`wait`, or here when it already waits); one answered first
        // at the deadline or at cancellation is gone already, and this answer is dropped.
        finish(task.taskIdentifier, with: result)
    }
}
#endif
