public import SealedPushReceiver
import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import Foundation

/// Posts receipts and failure reports over HTTP(S) with AsyncHTTPClient: the simulated device's
/// `ReceiptTransport` (an iOS app would use `URLSession`).
///
/// No redirects are followed (a receipt goes where the sealed body said), the response body is not read
/// past 4 KiB, a refused connection fails at once (no connect retries), a refusal carries the seconds of its
/// `Retry-After`, and nothing it logs holds the body.
public final class HTTPReceiptTransport: ReceiptTransport {
    /// The client, made on the first POST: a delivery that sends nothing starts no event loop.
    private let lazy = LazyHTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(2), read: .seconds(2))
        configuration.httpVersion = .http1Only
        configuration.tlsConfiguration = .sealedPushClient
        // A refused or unreachable origin fails at once instead of being retried until the connect
        // timeout (which cost every later delivery 2 s while such an entry headed the outbox).
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// A transport; its client (on the shared event loop group) is made when first needed.
    public init() {}

    private var client: HTTPClient { lazy.client }

    /// Shuts the client down, if one was made (call once, when done with the transport).
    public func shutdown() async { await lazy.shutdown() }

    /// POSTs `body` as `application/json`; `.connectionRefused` when the connection was refused (nothing listens:
    /// the outbox tries again within seconds), `.failed` on any other error or when `deadline` passes.
    public func post(_ body: [UInt8], to url: String, deadline: ContinuousClock.Instant) async -> ReceiptPostResult {
        let remaining = ContinuousClock.now.duration(to: deadline)
        guard remaining > .zero else { return .failed }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "sealedpush-device")
        request.body = .bytes(ByteBuffer(bytes: body))
        let c = remaining.components
        let nanoseconds = c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000
        do {
            let response = try await client.execute(request, timeout: .nanoseconds(max(1, nanoseconds)))
            _ = try? await response.body.collect(upTo: 4096)
            let status = Int(response.status.code)
            if (200..<300).contains(status) { return .accepted(status: status) }
            // A collector that limits this source says when to come back (gateway v1 §6): the outbox honours it.
            let retryAfter = response.headers.first(name: "Retry-After").flatMap {
                RetryAfter.seconds($0, now: Int64(Date().timeIntervalSince1970))
            }
            return .refused(status: status, retryAfter: retryAfter)
        } catch {
            return Self.isConnectionRefused(error) ? .connectionRefused : .failed
        }
    }

    /// Whether `error` says the connection was refused (`ECONNREFUSED`) at every address tried.
    static func isConnectionRefused(_ error: any Error) -> Bool {
        if let io = error as? IOError { return io.errnoCode == ECONNREFUSED }
        if let connection = error as? NIOConnectionError {
            return !connection.connectionErrors.isEmpty && connection.connectionErrors.allSatisfy { isConnectionRefused($0.error) }
        }
        return false
    }
}
