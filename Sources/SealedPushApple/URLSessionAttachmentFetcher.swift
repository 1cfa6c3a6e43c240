#if canImport(UserNotifications)
public import SealedPushReceiver
import SealedPushCrypto
#if canImport(FoundationNetworking)
import Foundation
public import FoundationNetworking   // Linux: the URLSession stand-ins (URLSession is in Foundation on Apple platforms)
#else
public import Foundation
#endif
import Synchronization

/// An `AttachmentFetcher` over `URLSession` download tasks, for the attachment pipeline of an extension.
///
/// Each `get` runs one download task. The body goes to the temporary file URLSession writes (ciphertext:
/// the pipeline decrypts it), which is opened and unlinked at once in
/// `urlSession(_:downloadTask:didFinishDownloadingTo:)`; the pipeline then reads the open file in 64 KiB
/// pieces, so neither the object nor the file is ever held in memory and no file is left behind. A redirect
/// is not followed: the delegate answers `nil`, and the 3xx status and its `Location` come back to the
/// pipeline, which applies the attachments v1 §4 rules. The body is bounded: the task is cancelled as
/// soon as it has written more than `maximumBytes`, and the body then throws `AttachmentBodyTooLarge`.
/// Cancelling the calling Swift task cancels the download task.
///
/// One fetcher holds one `URLSession` (invalidated when the fetcher is released); make one per extension
/// process, or one per request.
public final class URLSessionAttachmentFetcher: AttachmentFetcher, @unchecked Sendable {
    // `@unchecked Sendable`: `session` is Apple's `URLSession`, not declared Sendable in the strictest
    // reading of its documentation but thread-safe ("NSURLSession instances are thread-safe",
    // NSURLSession.h); it is an immutable `let`, and the only other stored property is Sendable.

    /// The size of the pieces the body is read in: 64 KiB.
    public static let pieceSize = 65_536

    private let session: URLSession
    private let downloads: DownloadDelegate

    /// The process's fetcher: one session for every request of every instance of the extension (iOS runs several
    /// instances in one process, with requests in parallel; a session per instance or per request would multiply
    /// connections and memory). Its task identifiers are per session, and the delegate keys its state by them.
    public static let shared = URLSessionAttachmentFetcher()

    /// A fetcher over an ephemeral session without a response cache (nothing of the object is kept in
    /// memory or on disk by URLSession beyond the download file).
    public convenience init() {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.urlCache = nil
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        self.init(configuration: configuration)
    }

    /// A fetcher over a session made with `configuration` (used as given: set `urlCache` to `nil`).
    public init(configuration: URLSessionConfiguration) {
        downloads = DownloadDelegate()
        session = URLSession(configuration: configuration, delegate: downloads, delegateQueue: nil)
    }

    deinit { session.invalidateAndCancel() }

    /// Downloads `url` and returns its status, announced length, `Location` (for a 3xx) and body.
    ///
    /// Throws `URLSessionFetchError.invalidURL` for a URL URLSession cannot take, the session's error for a
    /// failed connection, and `CancellationError` when the calling task was cancelled.
    public func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        guard let target = URL(string: url), let scheme = target.scheme?.lowercased(), scheme == "https" || scheme == "http" else {
            throw URLSessionFetchError.invalidURL
        }
        var request = URLRequest(url: target, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 30)
        request.httpMethod = "GET"
        let task = URLSessionTaskHandle(session.downloadTask(with: request))
        downloads.register(task.identifier, maximumBytes: maximumBytes)
        let download: Download
        do {
            download = try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Download, any Error>) in
                    downloads.wait(for: task.identifier, continuation)
                    task.resume()
                }
            } onCancel: {
                task.cancel()
            }
        } catch {
            if Task.isCancelled { throw CancellationError() }
            throw error
        }
        if Task.isCancelled {
            await download.body.cancel()
            throw CancellationError()
        }
        return AttachmentResponse(status: download.status, announcedLength: download.announcedLength, location: download.location,
                                  body: download.body)
    }
}

/// Why `URLSessionAttachmentFetcher` could not fetch a URL, and what to do.
public enum URLSessionFetchError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The URL is not an absolute `https` (or `http`) URL that URLSession accepts.
    case invalidURL
    /// The download ended without a response (the session was invalidated).
    case noResponse

    /// What happened, and what to do.
    public var description: String {
        switch self {
        case .invalidURL: return "the attachment URL is not an absolute https URL; the sender must give one"
        case .noResponse: return "the download ended without an HTTP response; keep the fetcher alive while it is used"
        }
    }
}

/// A finished download: the response head and its open, unlinked file.
struct Download: Sendable {
    var status: Int
    var announcedLength: Int?
    var location: String?
    var body: any AttachmentByteStream
}

/// The session's delegate: refuses redirects, bounds each download, and hands each finished file to its caller.
final class DownloadDelegate: NSObject, URLSessionDownloadDelegate {
    private struct Entry {
        var limit: Int
        var overLimit = false
        var file: DownloadedBody?
        var outcome: Result<Download, any Error>?
        var continuation: CheckedContinuation<Download, any Error>?
    }

    private let entries = Mutex<[Int: Entry]>([:])

    /// Registers a task before it starts.
    func register(_ id: Int, maximumBytes: Int) {
        entries.withLock { $0[id] = Entry(limit: maximumBytes) }
    }

    /// Resumes `continuation` with the task's outcome, at once if it is already known.
    func wait(for id: Int, _ continuation: CheckedContinuation<Download, any Error>) {
        let ready = entries.withLock { e -> Result<Download, any Error>? in
            if let outcome = e[id]?.outcome {
                e[id] = nil
                return outcome
            }
            e[id]?.continuation = continuation
            return nil
        }
        if let ready { continuation.resume(with: ready) }
    }

    /// Never follows a redirect: the 3xx response is what the task completes with.
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }

    /// Cancels a task that wrote more than its bound.
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didWriteData bytesWritten: Int64,
                    totalBytesWritten: Int64, totalBytesExpectedToWrite: Int64) {
        let over = entries.withLock { e -> Bool in
            guard let limit = e[downloadTask.taskIdentifier]?.limit, totalBytesWritten > Int64(limit) else { return false }
            e[downloadTask.taskIdentifier]?.overLimit = true
            return true
        }
        if over { downloadTask.cancel() }
    }

    /// Opens the downloaded file and unlinks it at once: the open descriptor keeps the bytes readable, and
    /// nothing named is left on disk however the process ends.
    func urlSession(_ session: URLSession, downloadTask: URLSessionDownloadTask, didFinishDownloadingTo location: URL) {
        let path = location.path
        let reader = try? MediaFileReader(path: path, followingSymlinks: false)
        _ = PrivateDirectory.removeFile(path)
        guard let reader else { return }
        entries.withLock { e in
            guard let limit = e[downloadTask.taskIdentifier]?.limit else { return }
            e[downloadTask.taskIdentifier]?.file = DownloadedBody(reader, limit: limit)
        }
    }

    /// Settles the task's outcome and resumes its caller.
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let http = task.response as? HTTPURLResponse
        let status = http?.statusCode
        let length = http.flatMap { $0.expectedContentLength >= 0 ? Int(clamping: $0.expectedContentLength) : nil }
        let location = status.flatMap { (300...399).contains($0) ? http?.value(forHTTPHeaderField: "Location") : nil }
        let resume = entries.withLock { e -> (CheckedContinuation<Download, any Error>, Result<Download, any Error>)? in
            guard var entry = e[task.taskIdentifier] else { return nil }
            let outcome: Result<Download, any Error>
            if entry.overLimit {
                outcome = .success(Download(status: status ?? 200, announcedLength: length, location: nil,
                                            body: OverLimitBody(limit: entry.limit)))
            } else if let error {
                outcome = .failure(error)
            } else if let status {
                outcome = .success(Download(status: status, announcedLength: length, location: location,
                                            body: entry.file ?? DownloadedBody(nil, limit: entry.limit)))
            } else {
                outcome = .failure(URLSessionFetchError.noResponse)
            }
            entry.file = nil
            if let continuation = entry.continuation {
                e[task.taskIdentifier] = nil
                return (continuation, outcome)
            }
            entry.outcome = outcome
            e[task.taskIdentifier] = entry
            return nil
        }
        if let (continuation, outcome) = resume { continuation.resume(with: outcome) }
    }
}

/// The downloaded ciphertext: an open file whose name is already gone, read in 64 KiB pieces.
///
/// `@unchecked Sendable`: the `MediaFileReader` (not Sendable: one reader) is used only inside `lock`,
/// so one thread at a time reads or closes it.
final class DownloadedBody: AttachmentByteStream, @unchecked Sendable {
    private let lock = Mutex(())
    private var reader: MediaFileReader?
    private var read = 0
    private let limit: Int

    init(_ reader: MediaFileReader?, limit: Int) {
        self.reader = reader
        self.limit = limit
    }

    /// The next piece (at most 64 KiB), `nil` at the end; throws `AttachmentBodyTooLarge` past the bound.
    func next() async throws -> [UInt8]? {
        if Task.isCancelled {
            close()
            throw CancellationError()
        }
        return try lock.withLock { _ throws(any Error) -> [UInt8]? in
            guard let reader else { return nil }
            let piece = try reader.read(upTo: URLSessionAttachmentFetcher.pieceSize)
            guard !piece.isEmpty else {
                self.reader = nil
                return nil
            }
            read += piece.count
            guard read <= limit else {
                self.reader = nil
                throw AttachmentBodyTooLarge(limit: limit)
            }
            return piece
        }
    }

    /// Closes the file (its bytes are freed with it).
    func cancel() async { close() }

    private func close() { lock.withLock { _ in reader = nil } }
}

/// The body of a download that passed its bound and was cancelled.
struct OverLimitBody: AttachmentByteStream {
    let limit: Int
    func next() async throws -> [UInt8]? { throw AttachmentBodyTooLarge(limit: limit) }
    func cancel() async {}
}
#endif
