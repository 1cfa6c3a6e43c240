// Stand-ins for the URLSession declarations SealedPushApple uses (module-aliased to `FoundationNetworking`
// in the Linux build only; empty elsewhere). On Apple platforms these types are in Foundation; on Linux
// swift-corelibs-foundation keeps them in FoundationNetworking, whose real implementation differs from
// Apple's (Sendable-ness, delegate dispatch), so SealedPushApple is type-checked against these instead.
// Names, signatures, optionality, `@escaping`/`@Sendable` and Sendable-ness follow Apple's documentation
// (developer.apple.com/documentation/foundation/urlsession): `URLSessionDelegate: NSObjectProtocol,
// Sendable`; `init(configuration:delegate:delegateQueue:)`; `downloadTask(with: URLRequest)`;
// `urlSession(_:task:willPerformHTTPRedirection:newRequest:completionHandler:)` with an
// `@escaping @Sendable (URLRequest?) -> Void` handler; `urlSession(_:downloadTask:didFinishDownloadingTo:)`
// (required); `urlSession(_:downloadTask:didWriteData:totalBytesWritten:totalBytesExpectedToWrite:)` and
// `urlSession(_:task:didCompleteWithError:)` (optional: default implementations here stand in for
// Objective-C's `optional`). URLSession, its tasks, responses and configuration are classes not declared
// Sendable here (the strictest reading). Behind them: a server tests program with routes
// (`StandInURLServer`) that writes each body to a temporary file in chunks, as a download task does.
// For URLSessionReceiptTransport, data tasks too: `dataTask(with: URLRequest)`, `URLSessionDataDelegate`'s
// `urlSession(_:dataTask:didReceive:completionHandler:)` with an `@escaping @Sendable
// (URLSession.ResponseDisposition) -> Void` handler and `urlSession(_:dataTask:didReceive:)` (both optional),
// `URLRequest.httpBody`/`httpShouldHandleCookies`/`setValue(_:forHTTPHeaderField:)`, the configuration's cookie,
// credential and cache settings; their routes and records are kept apart (`serveData`, `dataRecords(for:)`), and
// the stand-in honours the request's `timeoutInterval` (`NSURLErrorTimedOut`).
#if os(Linux)
public import Foundation
import Synchronization

/// Stand-in: `URLRequest`.
public struct URLRequest: Sendable, Equatable {
    /// Stand-in: `URLRequest.CachePolicy`.
    public enum CachePolicy: UInt, Sendable {
        /// The protocol's default policy.
        case useProtocolCachePolicy = 0
        /// Load from the origin, ignoring any cache.
        case reloadIgnoringLocalCacheData = 1
    }
    /// The URL.
    public var url: URL?
    /// The cache policy.
    public var cachePolicy: CachePolicy
    /// The timeout in seconds.
    public var timeoutInterval: TimeInterval
    /// The HTTP method (`GET` by default).
    public var httpMethod: String? = "GET"
    /// The request body.
    public var httpBody: Data?
    /// Whether the session's cookies are sent with the request and its response's cookies stored (`true` by default).
    public var httpShouldHandleCookies = true
    /// The header fields (names as set).
    public var allHTTPHeaderFields: [String: String]?
    /// Sets (or with `nil` removes) a header field, its name compared case-insensitively.
    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        var fields = (allHTTPHeaderFields ?? [:]).filter { $0.key.lowercased() != field.lowercased() }
        if let value { fields[field] = value }
        allHTTPHeaderFields = fields
    }
    /// A header field's value, its name compared case-insensitively.
    public func value(forHTTPHeaderField field: String) -> String? {
        allHTTPHeaderFields?.first { $0.key.lowercased() == field.lowercased() }?.value
    }
    /// A request for `url`.
    public init(url: URL, cachePolicy: CachePolicy = .useProtocolCachePolicy, timeoutInterval: TimeInterval = 60) {
        self.url = url
        self.cachePolicy = cachePolicy
        self.timeoutInterval = timeoutInterval
    }
}

/// Stand-in: `URLResponse` (not Sendable here).
open class URLResponse: NSObject {
    /// The response's URL.
    open private(set) var url: URL?
    /// The announced length, `-1` (`NSURLResponseUnknownLength`) when unknown.
    open private(set) var expectedContentLength: Int64
    init(url: URL?, expectedContentLength: Int64) {
        self.url = url
        self.expectedContentLength = expectedContentLength
    }
}

/// Stand-in: `HTTPURLResponse` (not Sendable here).
open class HTTPURLResponse: URLResponse {
    /// The status code.
    open private(set) var statusCode: Int
    private let headers: [String: String]
    /// Apple: `init?(url:statusCode:httpVersion:headerFields:)`.
    public init?(url: URL, statusCode: Int, httpVersion: String?, headerFields: [String: String]?) {
        self.statusCode = statusCode
        headers = headerFields ?? [:]
        let length = headers.first { $0.key.lowercased() == "content-length" }.flatMap { Int64($0.value) } ?? -1
        super.init(url: url, expectedContentLength: length)
    }
    /// A header's value, its name compared case-insensitively (iOS 13+).
    open func value(forHTTPHeaderField field: String) -> String? {
        headers.first { $0.key.lowercased() == field.lowercased() }?.value
    }
}

/// Stand-in: `URLCache` (only its absence is used).
open class URLCache: NSObject {}

/// Stand-in: `URLSessionConfiguration` (not Sendable here).
open class URLSessionConfiguration: NSObject {
    /// A configuration without persistent storage for caches, cookies or credentials (a new object each time).
    open class var ephemeral: URLSessionConfiguration { URLSessionConfiguration() }
    /// The response cache; `nil` for none.
    open var urlCache: URLCache? = URLCache()
    /// The default cache policy of requests.
    open var requestCachePolicy: URLRequest.CachePolicy = .useProtocolCachePolicy
    /// How long a request may wait for more data.
    open var timeoutIntervalForRequest: TimeInterval = 60
    /// How long a whole transfer may take.
    open var timeoutIntervalForResource: TimeInterval = 604_800
    /// Whether a task waits for connectivity instead of failing at once.
    open var waitsForConnectivity = false
    /// The cookie store (`nil`: none; ephemeral: an in-memory one).
    open var httpCookieStorage: HTTPCookieStorage? = HTTPCookieStorage()
    /// Whether requests carry cookies from the store.
    open var httpShouldSetCookies = true
    /// Which cookies the session accepts.
    open var httpCookieAcceptPolicy: HTTPCookie.AcceptPolicy = .onlyFromMainDocumentDomain
    /// The credential store (`nil`: none; ephemeral: an in-memory one).
    open var urlCredentialStorage: URLCredentialStorage? = URLCredentialStorage()
}

/// Stand-in: `HTTPCookie` (only its accept policy is used).
open class HTTPCookie: NSObject {
    /// Stand-in: `HTTPCookie.AcceptPolicy`.
    public enum AcceptPolicy: UInt, Sendable {
        /// Accept all cookies.
        case always = 0
        /// Reject all cookies.
        case never = 1
        /// Accept cookies only from the main document's domain.
        case onlyFromMainDocumentDomain = 2
    }
}

/// Stand-in: `HTTPCookieStorage` (only its absence is used).
open class HTTPCookieStorage: NSObject {}

/// Stand-in: `URLCredentialStorage` (only its absence is used).
open class URLCredentialStorage: NSObject {}

/// Stand-in: `URLSessionDelegate`.
public protocol URLSessionDelegate: NSObjectProtocol, Sendable {}

/// Stand-in: `URLSessionTaskDelegate`.
public protocol URLSessionTaskDelegate: URLSessionDelegate {
    /// Optional: the server asked for a redirect; pass `nil` to receive the redirect response instead.
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void)
    /// Optional: the task finished, with an error or not.
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?)
}

extension URLSessionTaskDelegate {
    /// Objective-C `optional`: not implemented follows the redirect.
    public func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                           newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(request)
    }
    /// Objective-C `optional`.
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {}
}

/// Stand-in: `URLSessionDownloadDelegate`.
public protocol URLSessionDownloadDelegate: URLSessionTaskDelegate {
    /// Required: the download finished to a temporary file, which is removed when this returns.
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL)
    /// Optional: progress.
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64)
}

extension URLSessionDownloadDelegate {
    /// Objective-C `optional`.
    public func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                           totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {}
}

/// Stand-in: `URLSessionDataDelegate`.
public protocol URLSessionDataDelegate: URLSessionTaskDelegate {
    /// Optional: the response head arrived; pass `.allow` to receive the body, `.cancel` to end the task.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void)
    /// Optional: a piece of the body arrived.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data)
}

extension URLSessionDataDelegate {
    /// Objective-C `optional`: not implemented receives the body.
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                           completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        completionHandler(.allow)
    }
    /// Objective-C `optional`.
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {}
}

/// Stand-in: `URLSessionTask` (not Sendable here).
open class URLSessionTask: NSObject {
    /// The task's identifier, unique within its session.
    open private(set) var taskIdentifier: Int
    /// The response, once it arrived.
    open internal(set) var response: URLResponse?
    let request: URLRequest
    weak var session: URLSession?
    let cancelled = Atomic<Bool>(false)
    let resumed = Atomic<Bool>(false)

    init(identifier: Int, request: URLRequest, session: URLSession) {
        taskIdentifier = identifier
        self.request = request
        self.session = session
    }
    /// Starts (or resumes) the task.
    open func resume() {}
    /// Cancels the task: `didCompleteWithError` follows with `NSURLErrorCancelled`.
    open func cancel() { cancelled.store(true, ordering: .sequentiallyConsistent) }
}

/// Stand-in: `URLSessionDownloadTask` (not Sendable here).
open class URLSessionDownloadTask: URLSessionTask {
    /// Starts the transfer on a thread of the stand-in server.
    open override func resume() {
        guard !resumed.exchange(true, ordering: .sequentiallyConsistent), let session else { return }
        StandInURLServer.start(self, session: session)
    }
}

/// Stand-in: `URLSessionDataTask` (not Sendable here).
open class URLSessionDataTask: URLSessionTask {
    /// Starts the exchange on a thread of the stand-in server.
    open override func resume() {
        guard !resumed.exchange(true, ordering: .sequentiallyConsistent), let session else { return }
        StandInURLServer.startData(self, session: session)
    }
}

/// Stand-in: `URLSession` (not Sendable here).
open class URLSession: NSObject {
    /// The configuration it was made with.
    public let configuration: URLSessionConfiguration
    /// The delegate (held strongly until the session is invalidated).
    open private(set) var delegate: (any URLSessionDelegate)?
    private let nextIdentifier = Atomic<Int>(1)
    let invalidated = Atomic<Bool>(false)

    /// A session calling `delegate` (`queue` ignored by the stand-in: callbacks come on its own threads).
    public init(configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?, delegateQueue queue: OperationQueue?) {
        self.configuration = configuration
        self.delegate = delegate
    }
    /// A download task for `request`, suspended until `resume()`.
    open func downloadTask(with request: URLRequest) -> URLSessionDownloadTask {
        URLSessionDownloadTask(identifier: nextIdentifier.add(1, ordering: .relaxed).oldValue, request: request, session: self)
    }
    /// A data task for `request` (its body is `request.httpBody`), suspended until `resume()`.
    open func dataTask(with request: URLRequest) -> URLSessionDataTask {
        URLSessionDataTask(identifier: nextIdentifier.add(1, ordering: .relaxed).oldValue, request: request, session: self)
    }
    /// Lets running tasks finish, then releases the delegate.
    open func finishTasksAndInvalidate() { invalidated.store(true, ordering: .relaxed) }
    /// Cancels every task and releases the delegate.
    open func invalidateAndCancel() { invalidated.store(true, ordering: .relaxed) }
}

extension URLSession {
    /// Stand-in: `URLSession.ResponseDisposition`, what a data task does after its response head.
    public enum ResponseDisposition: Int, Sendable {
        /// Cancel the task (it completes with `NSURLErrorCancelled`).
        case cancel = 0
        /// Go on: the body follows.
        case allow = 1
        /// Turn it into a download task.
        case becomeDownload = 2
        /// Turn it into a stream task.
        case becomeStream = 3
    }
}

/// Stand-in only: what the stand-in URLSession answers, and what it saw.
public enum StandInURLServer {
    /// How one URL answers.
    public enum Route: Sendable {
        /// Status 200 with `body`, written to the download file in pieces of `chunk` bytes, `delay` apart;
        /// `announce` sends Content-Length.
        case body([UInt8], chunk: Int, delay: Duration = .zero, announce: Bool = true)
        /// A redirect (`status`, 3xx) to `location`, with a small body.
        case redirect(status: Int, location: String)
        /// The connection fails.
        case failure
        /// A data task: status `status` with `body`, after `delay` (the request's `timeoutInterval` and
        /// cancellation end the wait).
        case status(Int, body: [UInt8] = [], delay: Duration = .zero)
        /// A data task: no answer, ever; the task ends only when cancelled or at its `timeoutInterval`.
        case hang
    }

    /// What happened to one task.
    public struct Record: Sendable, Equatable {
        /// The URL requested.
        public var url: String
        /// Bytes written to the download file before the task ended.
        public var bytesWritten = 0
        /// Whether it ended cancelled.
        public var cancelled = false
        /// Whether a redirect was followed by the session itself (the delegate passed a request on).
        public var followedRedirect = false
        /// The temporary file the body was written to (removed after `didFinishDownloadingTo`).
        public var file: String?
        /// A data task: the request as the session got it (method, headers, body, timeout, cache and cookie settings).
        public var request: URLRequest?
        /// A data task: the session configuration's cookie and cache settings when the task started.
        public var session: SessionSettings?
        /// A data task: it ended at its request's `timeoutInterval` (`NSURLErrorTimedOut`).
        public var timedOut = false
    }

    /// The cookie, credential and cache settings of the session a data task ran in.
    public struct SessionSettings: Sendable, Equatable {
        /// Whether the configuration had a cookie store.
        public var hasCookieStorage: Bool
        /// `httpShouldSetCookies`.
        public var setsCookies: Bool
        /// `httpCookieAcceptPolicy`.
        public var cookieAcceptPolicy: HTTPCookie.AcceptPolicy
        /// Whether the configuration had a credential store.
        public var hasCredentialStorage: Bool
        /// Whether the configuration had a response cache.
        public var hasURLCache: Bool
        /// `requestCachePolicy`.
        public var requestCachePolicy: URLRequest.CachePolicy
    }

    static let state = Mutex<(routes: [String: Route], records: [Int: Record], next: Int)>(([:], [:], 0))

    /// Serves `routes` (any other URL fails to connect) and forgets earlier records (a task still running
    /// from before no longer records anything).
    public static func serve(_ routes: [String: Route]) { state.withLock { $0.routes = routes; $0.records = [:] } }
    /// What happened to every task since `serve`, in the order they started.
    public static var records: [Record] { state.withLock { $0.records.sorted { $0.key < $1.key }.map(\.value) } }
    /// What happened to the task for `url` (the first since `serve`).
    public static func record(for url: String) -> Record? { records.first { $0.url == url } }

    static func record(_ index: Int, _ change: (inout Record) -> Void) {
        state.withLock { s in if var record = s.records[index] { change(&record); s.records[index] = record } }
    }

    /// Runs `task` on a thread of its own, calling the session's delegate as URLSession does.
    static func start(_ task: URLSessionDownloadTask, session: URLSession) {
        let url = task.request.url?.absoluteString ?? ""
        let (route, index) = state.withLock { s -> (Route?, Int) in
            s.next += 1
            s.records[s.next] = Record(url: url)
            return (s.routes[url], s.next)
        }
        // The stand-in's own thread; the objects are used only by it and the test (the test's cancel is an atomic).
        let work = UncheckedBox((task, session))
        Thread.detachNewThread {
            let (task, session) = work.value
            run(task, session: session, route: route, index: index)
        }
    }

    private static func run(_ task: URLSessionDownloadTask, session: URLSession, route: Route?, index: Int) {
        let delegate = session.delegate as? any URLSessionDownloadDelegate
        let url = task.request.url!
        func complete(_ error: (any Error)?) { delegate?.urlSession(session, task: task, didCompleteWithError: error) }
        func cancelledError() -> NSError { NSError(domain: "NSURLErrorDomain", code: -999, userInfo: nil) }
        guard let route else { complete(NSError(domain: "NSURLErrorDomain", code: -1004, userInfo: nil)); return }
        var body: [UInt8] = []
        var chunk = 1
        var delay = Duration.zero
        switch route {
        case .failure, .status, .hang:   // data-task routes: a download of them fails to connect
            complete(NSError(domain: "NSURLErrorDomain", code: -1004, userInfo: nil))
            return
        case let .redirect(status, location):
            let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["Location": location])!
            let decision = Mutex<(decided: Bool, request: URLRequest?)>((false, nil))
            let next = URLRequest(url: URL(string: location, relativeTo: url)?.absoluteURL ?? url)
            delegate?.urlSession(session, task: task, willPerformHTTPRedirection: response, newRequest: next) { request in
                decision.withLock { $0 = (true, request) }
            }
            while !decision.withLock({ $0.decided }) { Thread.sleep(forTimeInterval: 0.001) }
            if decision.withLock({ $0.request }) != nil {
                record(index) { $0.followedRedirect = true }
                complete(NSError(domain: "NSURLErrorDomain", code: -1007, userInfo: nil))   // the stand-in does not follow
                return
            }
            task.response = response
            body = Array("redirect".utf8)
            chunk = body.count
        case let .body(bytes, size, pause, announce):
            task.response = HTTPURLResponse(url: url, statusCode: 200, httpVersion: "HTTP/1.1",
                                            headerFields: announce ? ["Content-Length": "\(bytes.count)"] : [:])
            body = bytes
            chunk = max(1, size)
            delay = pause
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("CFNetworkDownload_\(UUID().uuidString).tmp")
        _ = FileManager.default.createFile(atPath: file.path, contents: nil)
        record(index) { $0.file = file.path }
        defer { try? FileManager.default.removeItem(at: file) }
        guard let handle = try? FileHandle(forWritingTo: file) else { complete(cancelledError()); return }
        var written = 0
        let expected = task.response?.expectedContentLength ?? -1
        while written < body.count {
            if task.cancelled.load(ordering: .sequentiallyConsistent) {
                try? handle.close()
                record(index) { $0.cancelled = true }
                complete(cancelledError())
                return
            }
            let piece = body[written..<min(written + chunk, body.count)]
            handle.write(Data(piece))
            written += piece.count
            record(index) { $0.bytesWritten = written }
            delegate?.urlSession(session, downloadTask: task, didWriteData: Int64(piece.count), totalBytesWritten: Int64(written),
                                 totalBytesExpectedToWrite: expected)
            if delay > .zero { Thread.sleep(forTimeInterval: Double(delay.components.seconds) + Double(delay.components.attoseconds) / 1e18) }
        }
        try? handle.close()
        if task.cancelled.load(ordering: .sequentiallyConsistent) {
            record(index) { $0.cancelled = true }
            complete(cancelledError())
            return
        }
        delegate?.urlSession(session, downloadTask: task, didFinishDownloadingTo: file)
        complete(nil)
    }
}

extension StandInURLServer {
    /// Data tasks' routes and records, apart from the download tasks' (`serve` neither reads nor clears them), so
    /// suites of data-task tests run beside the download tests: each test uses URLs of its own.
    static let dataState = Mutex<(routes: [String: Route], records: [Int: Record], next: Int)>(([:], [:], 0))

    /// Answers data tasks for `url` with `route` (other routes stay; any URL without one fails to connect).
    public static func serveData(_ url: String, _ route: Route) { dataState.withLock { $0.routes[url] = route } }

    /// What happened to every data task for `url`, in the order they started.
    public static func dataRecords(for url: String) -> [Record] {
        dataState.withLock { $0.records.sorted { $0.key < $1.key }.map(\.value).filter { $0.url == url } }
    }

    static func dataRecord(_ index: Int, _ change: (inout Record) -> Void) {
        dataState.withLock { s in if var record = s.records[index] { change(&record); s.records[index] = record } }
    }

    /// Runs the data task `task` on a thread of its own, calling the session's delegate as URLSession does.
    static func startData(_ task: URLSessionDataTask, session: URLSession) {
        let url = task.request.url?.absoluteString ?? ""
        let configuration = session.configuration
        let settings = SessionSettings(hasCookieStorage: configuration.httpCookieStorage != nil, setsCookies: configuration.httpShouldSetCookies,
                                       cookieAcceptPolicy: configuration.httpCookieAcceptPolicy,
                                       hasCredentialStorage: configuration.urlCredentialStorage != nil,
                                       hasURLCache: configuration.urlCache != nil, requestCachePolicy: configuration.requestCachePolicy)
        let (route, index) = dataState.withLock { s -> (Route?, Int) in
            s.next += 1
            s.records[s.next] = Record(url: url, request: task.request, session: settings)
            return (s.routes[url], s.next)
        }
        // The stand-in's own thread; the objects are used only by it and the test (the test's cancel is an atomic).
        let work = UncheckedBox((task, session))
        Thread.detachNewThread {
            let (task, session) = work.value
            runData(task, session: session, route: route, index: index)
        }
    }

    private static func runData(_ task: URLSessionDataTask, session: URLSession, route: Route?, index: Int) {
        let delegate = session.delegate as? any URLSessionTaskDelegate
        let dataDelegate = session.delegate as? any URLSessionDataDelegate
        let url = task.request.url!
        let clock = ContinuousClock()
        let start = clock.now
        let timeout = Duration.milliseconds(Int64(task.request.timeoutInterval * 1000))
        func complete(_ error: (any Error)?) { delegate?.urlSession(session, task: task, didCompleteWithError: error) }
        func urlError(_ code: Int) -> NSError { NSError(domain: "NSURLErrorDomain", code: code, userInfo: nil) }
        func isCancelled() -> Bool { task.cancelled.load(ordering: .sequentiallyConsistent) }
        /// Waits `delay`, in steps of a millisecond; `false` (and the task completed) when it was cancelled or timed out first.
        func pause(_ delay: Duration) -> Bool {
            let end = clock.now.advanced(by: delay)
            repeat {
                if isCancelled() {
                    dataRecord(index) { $0.cancelled = true }
                    complete(urlError(-999))
                    return false
                }
                if clock.now - start >= timeout {
                    dataRecord(index) { $0.timedOut = true }
                    complete(urlError(-1001))
                    return false
                }
                if clock.now >= end { return true }
                Thread.sleep(forTimeInterval: 0.001)
            } while true
        }
        guard let route else { complete(urlError(-1004)); return }
        var status = 200
        var body: [UInt8] = []
        var headers: [String: String] = [:]
        var announces = true
        switch route {
        case .failure:
            complete(urlError(-1004))
            return
        case .hang:
            _ = pause(.seconds(86_400))
            return
        case let .status(code, bytes, delay):
            guard pause(delay) else { return }
            (status, body) = (code, bytes)
        case let .body(bytes, _, delay, announce):
            guard pause(delay) else { return }
            body = bytes
            announces = announce
        case let .redirect(code, location):
            guard pause(.zero) else { return }
            let response = HTTPURLResponse(url: url, statusCode: code, httpVersion: "HTTP/1.1", headerFields: ["Location": location])!
            let decision = Mutex<(decided: Bool, request: URLRequest?)>((false, nil))
            var next = task.request
            next.url = URL(string: location, relativeTo: url)?.absoluteURL ?? url
            delegate?.urlSession(session, task: task, willPerformHTTPRedirection: response, newRequest: next) { request in
                decision.withLock { $0 = (true, request) }
            }
            while !decision.withLock({ $0.decided }) { Thread.sleep(forTimeInterval: 0.001) }
            if decision.withLock({ $0.request }) != nil {
                dataRecord(index) { $0.followedRedirect = true }
                complete(urlError(-1007))   // the stand-in does not follow
                return
            }
            (status, body, headers) = (code, Array("redirect".utf8), ["Location": location])
        }
        if announces { headers["Content-Length"] = "\(body.count)" }
        let response = HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
        task.response = response
        let disposition = Mutex<URLSession.ResponseDisposition?>(nil)
        if let dataDelegate {
            dataDelegate.urlSession(session, dataTask: task, didReceive: response) { answer in disposition.withLock { $0 = answer } }
            while disposition.withLock({ $0 }) == nil {
                guard pause(.milliseconds(1)) else { return }
            }
        } else {
            disposition.withLock { $0 = .allow }
        }
        guard disposition.withLock({ $0 }) == .allow else {
            dataRecord(index) { $0.cancelled = true }
            complete(urlError(-999))
            return
        }
        var written = 0
        while written < body.count {
            guard pause(.zero) else { return }
            let piece = body[written..<min(written + 1024, body.count)]
            dataDelegate?.urlSession(session, dataTask: task, didReceive: Data(piece))
            written += piece.count
            dataRecord(index) { $0.bytesWritten = written }
        }
        complete(nil)
    }
}

/// Hands the stand-in's own objects to its thread.
///
/// `@unchecked Sendable`: the task and session are used by the stand-in's thread, the test only cancels
/// (an atomic) — as URLSession's own threads do.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
#endif
