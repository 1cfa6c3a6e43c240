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
}

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
    /// Lets running tasks finish, then releases the delegate.
    open func finishTasksAndInvalidate() { invalidated.store(true, ordering: .relaxed) }
    /// Cancels every task and releases the delegate.
    open func invalidateAndCancel() { invalidated.store(true, ordering: .relaxed) }
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
        case .failure:
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

/// Hands the stand-in's own objects to its thread.
///
/// `@unchecked Sendable`: the task and session are used by the stand-in's thread, the test only cancels
/// (an atomic) — as URLSession's own threads do.
final class UncheckedBox<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
#endif
