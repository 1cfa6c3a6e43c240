import AsyncHTTPClient
public import SealedPushReceiver
import NIOCore
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
                                  location: response.headers.first(name: "location"), body: ResponseBodyStream(response.body))
    }
}

/// A response body read piece by piece.
final class ResponseBodyStream: AttachmentByteStream, @unchecked Sendable {
    // Safe to share: the pipeline reads a body from one task, one `next()` or `cancel()` at a time (the
    // protocol's contract), so the iterator is never touched concurrently.
    private var iterator: HTTPClientResponse.Body.AsyncIterator?

    init(_ body: HTTPClientResponse.Body) { iterator = body.makeAsyncIterator() }

    func next() async throws -> [UInt8]? {
        guard var it = iterator else { return nil }
        iterator = nil
        while let buffer = try await it.next() {
            guard buffer.readableBytes > 0 else { continue }
            iterator = it
            return Array(buffer: buffer)
        }
        return nil
    }

    func cancel() async { iterator = nil }
}
