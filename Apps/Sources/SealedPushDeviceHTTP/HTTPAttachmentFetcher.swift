import AsyncHTTPClient
public import SealedPushReceiver
import NIOCore
import NIOConcurrencyHelpers
import NIOHTTP1

/// The simulated device's `AttachmentFetcher`: plain HTTP GETs over AsyncHTTPClient, redirects not followed
/// (they are returned, and the attachment pipeline applies the §4 rules to them).
///
/// Owns an `HTTPClient`: call `shutdown()` once done. Cancelling the calling task cancels the request.
public final class HTTPAttachmentFetcher: AttachmentFetcher {
    private let client: HTTPClient

    /// A fetcher with its own client (connect timeout `connectTimeout`, no connect retries, no redirects
    /// followed, no decompression, TLS 1.2 at least).
    public init(connectTimeout: Duration = .seconds(10)) {
        let milliseconds = connectTimeout.components.seconds * 1000 + connectTimeout.components.attoseconds / 1_000_000_000_000_000
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(milliseconds)),
            decompression: .disabled)
        configuration.httpVersion = .http1Only
        configuration.tlsConfiguration = .sealedPushClient
        // A refused connection fails at once: retrying until the connect timeout only eats the extension's budget.
        configuration.connectionPool.retryConnectionEstablishment = false
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    /// Closes the client's connections; the fetcher cannot be used afterwards.
    public func shutdown() async throws { try await client.shutdown() }

    /// Sends `GET url` and returns the response head and its body.
    public func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        let request = HTTPClientRequest(url: url)
        // No overall deadline: the extension's time budget cancels the task.
        let response = try await client.execute(request, deadline: .distantFuture)
        let length = response.headers.first(name: "content-length").flatMap { Int($0) }
        return AttachmentResponse(status: Int(response.status.code), announcedLength: length,
                                  location: response.headers.first(name: "location"),
                                  body: ResponseBodyStream(response.body, maximumBytes: maximumBytes))
    }
}

/// A response body read ahead of the pipeline: a task drains AsyncHTTPClient's body (which asks the connection
/// for the next read only once the previous piece was taken) into a queue of at most `readAhead` bytes, so the
/// connection keeps receiving while the pipeline decrypts and writes; `next()` hands out everything queued as
/// one array. The task stops with `AttachmentBodyTooLarge` once the body passed `maximumBytes`, and when the
/// body is cancelled or released.
final class ResponseBodyStream: AttachmentByteStream, Sendable {
    /// The most body bytes queued ahead of the reader (the task waits for the reader beyond it).
    static let readAhead = 256 * 1024
    private let queue = ReadAheadQueue(limit: ResponseBodyStream.readAhead)
    private let reader: Task<Void, Never>

    init(_ body: HTTPClientResponse.Body, maximumBytes: Int) {
        let queue = self.queue
        reader = Task {
            var total = 0
            do {
                for try await piece in body where piece.readableBytes > 0 {
                    total += piece.readableBytes
                    guard total <= maximumBytes else { throw AttachmentBodyTooLarge(limit: maximumBytes) }
                    guard await queue.push(piece) else { return }
                }
                queue.finish(nil)
            } catch {
                queue.finish(error)
            }
        }
    }

    func next() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await queue.next()
        } onCancel: {
            queue.cancel()
            reader.cancel()
        }
    }

    func cancel() async {
        queue.cancel()
        reader.cancel()
    }

    deinit {
        queue.cancel()
        reader.cancel()
    }
}

/// The bounded queue between a `ResponseBodyStream`'s reading task (one `push` at a time) and its reader (one
/// `next()` at a time).
final class ReadAheadQueue: Sendable {
    private struct State {
        var pieces: [ByteBuffer] = []
        var bytes = 0
        var end: Result<Void, any Error>?
        var reader: CheckedContinuation<[ByteBuffer]?, any Error>?
        var writer: CheckedContinuation<Bool, Never>?
    }
    private let state = NIOLockedValueBox(State())
    private let limit: Int

    init(limit: Int) { self.limit = limit }

    /// Queues `piece` (or hands it to a waiting reader); returns once fewer than `limit` bytes are queued,
    /// `false` if the queue ended.
    func push(_ piece: ByteBuffer) async -> Bool {
        await withCheckedContinuation { (writer: CheckedContinuation<Bool, Never>) in
            let (reader, resume): (CheckedContinuation<[ByteBuffer]?, any Error>?, Bool?) = state.withLockedValue { s in
                if s.end != nil { return (nil, false) }
                if let reader = s.reader {
                    s.reader = nil
                    return (reader, true)
                }
                s.pieces.append(piece)
                s.bytes += piece.readableBytes
                if s.bytes < limit { return (nil, true) }
                s.writer = writer
                return (nil, nil)
            }
            reader?.resume(returning: [piece])
            if let resume { writer.resume(returning: resume) }
        }
    }

    /// Ends the queue: the reader gets what is queued, then `nil` (or `error`).
    func finish(_ error: (any Error)?) {
        let reader = state.withLockedValue { s -> CheckedContinuation<[ByteBuffer]?, any Error>? in
            guard s.end == nil else { return nil }
            s.end = error.map { .failure($0) } ?? .success(())
            defer { s.reader = nil }
            return s.reader
        }
        if let error { reader?.resume(throwing: error) } else { reader?.resume(returning: nil) }
    }

    /// Ends the queue at once, even after the body's end: what is queued is dropped, the reader gets
    /// `CancellationError` (now and from every later `next()`, never a normal end), the writer `false`.
    func cancel() {
        let (reader, writer) = state.withLockedValue { s in
            s.end = .failure(CancellationError())
            s.pieces = []
            s.bytes = 0
            defer {
                s.reader = nil
                s.writer = nil
            }
            return (s.reader, s.writer)
        }
        reader?.resume(throwing: CancellationError())
        writer?.resume(returning: false)
    }

    /// Everything queued, as one array; waits for the next piece when nothing is; `nil` at the end of the body.
    func next() async throws -> [UInt8]? {
        let pieces: [ByteBuffer]? = try await withCheckedThrowingContinuation { (reader: CheckedContinuation<[ByteBuffer]?, any Error>) in
            let (taken, writer, end): ([ByteBuffer]?, CheckedContinuation<Bool, Never>?, Result<Void, any Error>?) = state.withLockedValue { s in
                if !s.pieces.isEmpty {
                    let taken = s.pieces
                    s.pieces = []
                    s.bytes = 0
                    defer { s.writer = nil }
                    return (taken, s.writer, nil)
                }
                if let end = s.end { return (nil, nil, end) }
                s.reader = reader
                return (nil, nil, nil)
            }
            writer?.resume(returning: true)
            if let taken {
                reader.resume(returning: taken)
            } else if let end {
                switch end {
                case let .failure(error): reader.resume(throwing: error)
                case .success: reader.resume(returning: nil)
                }
            }
        }
        guard let pieces else { return nil }
        if pieces.count == 1 { return Array(buffer: pieces[0]) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(pieces.reduce(0) { $0 + $1.readableBytes })
        for piece in pieces { bytes += piece.readableBytesView }
        return bytes
    }
}
