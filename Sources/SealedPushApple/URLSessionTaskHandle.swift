#if canImport(UserNotifications)
#if canImport(FoundationNetworking)
import Foundation
import FoundationNetworking   // Linux: the URLSession stand-ins (URLSession is in Foundation on Apple platforms)
#else
import Foundation
#endif

/// Starts and cancels one URLSession task from any thread: the handle `URLSessionReceiptTransport` (a data task) and
/// `URLSessionAttachmentFetcher` (a download task) give their continuations, deadlines and cancellation handlers.
///
/// `@unchecked Sendable`: Apple's `URLSessionTask` is not declared Sendable in the strictest reading of its
/// documentation; this handle only calls `resume()` and `cancel()` (which Apple documents as callable at any time,
/// even on a suspended task) and reads the identifier fixed at creation.
final class URLSessionTaskHandle: @unchecked Sendable {
    private let task: URLSessionTask
    /// The task's identifier in its session, fixed at creation.
    let identifier: Int

    /// A handle on `task`.
    init(_ task: URLSessionTask) {
        self.task = task
        identifier = task.taskIdentifier
    }

    /// Starts (or resumes) the task.
    func resume() { task.resume() }

    /// Cancels the task; its delegate then completes it with an error.
    func cancel() { task.cancel() }
}

extension URLSessionConfiguration {
    /// An ephemeral configuration for the small JSON exchanges (receipts, mailbox fetches): no cache, cookie or
    /// credential store, no waiting for connectivity (each exchange has its own deadline).
    static func sealedPushExchange() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.httpCookieStorage = nil
        configuration.httpShouldSetCookies = false
        configuration.httpCookieAcceptPolicy = .never
        configuration.urlCredentialStorage = nil
        configuration.waitsForConnectivity = false
        return configuration
    }
}
#endif
