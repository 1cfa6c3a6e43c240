public import SealedPushReceiver
public import SealedPushWire
import AsyncHTTPClient
import NIOCore
import NIOHTTP1

/// Fetches mailbox messages by handle over HTTP(S) with AsyncHTTPClient (mailbox v1 §3, §5): the simulated
/// device's `MailboxFetcher` (an iOS app uses `URLSession`).
///
/// The mailbox URL is `https` (plain `http` only to localhost or 127.0.0.1); no redirects are followed; the whole
/// exchange is bounded by the deadline (at most 10 s); an answer larger than `maximumResponseBytes` fails; the
/// envelope is only ever held in memory, and nothing it logs holds the handle.
public final class HTTPMailboxFetcher: MailboxFetcher, MailboxLister {
    /// The largest answer read: a 64 KiB message's envelope in base64 and its JSON, with room to spare.
    public static let maximumResponseBytes = 128 * 1024
    /// The longest a fetch may take (mailbox v1 §5).
    public static let maximumDeadlineSeconds = 10.0

    /// The gateway's `public_url`, without a trailing slash.
    public let mailboxURL: String
    /// The client, made on the first fetch.
    private let lazy = LazyHTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.redirectConfiguration = .disallow
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(10))
        configuration.tlsConfiguration = .sealedPushClient
        configuration.connectionPool.retryConnectionEstablishment = false
        return configuration
    }

    /// A fetcher for the gateway at `mailboxURL`; throws `MailboxURLError` for a URL that is not https (or http to
    /// loopback).
    public init(mailboxURL: String) throws(MailboxURLError) {
        if let problem = ReceiptRequest.urlProblem(mailboxURL) { throw MailboxURLError(problem: problem) }
        var url = mailboxURL
        while url.hasSuffix("/") { url.removeLast() }
        self.mailboxURL = url
    }

    var client: HTTPClient { lazy.client }

    /// Shuts the client down, if one was made (call once, when done with the fetcher).
    public func shutdown() async { await lazy.shutdown() }

    /// POSTs `{"handle": …}` and reads the answer, all within `deadlineSeconds` (capped at 10 s).
    public func fetch(_ handle: MailboxHandle, deadlineSeconds: Double) async -> MailboxFetchResult {
        let seconds = min(max(deadlineSeconds, 0), Self.maximumDeadlineSeconds)
        guard seconds > 0 else { return .failed("no time left to fetch") }
        var request = HTTPClientRequest(url: mailboxURL + "/v1/mailbox/fetch")
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "sealedpush-device")
        request.body = .bytes(ByteBuffer(bytes: JSON.serialize(.object(JSONObject([("handle", .string(handle.description))])))))
        let deadline = NIODeadline.now() + .nanoseconds(Int64(seconds * 1_000_000_000))
        do {
            let response = try await client.execute(request, deadline: deadline)
            let body: ByteBuffer
            do { body = try await response.body.collect(upTo: Self.maximumResponseBytes) } catch is NIOTooManyBytesError {
                return .failed("the gateway's answer is larger than \(Self.maximumResponseBytes) bytes")
            }
            return MailboxFetchResult.from(status: Int(response.status.code), body: Array(body.readableBytesView))
        } catch {
            return .failed("the fetch did not complete within \(seconds) s or the gateway could not be reached")
        }
    }
}

extension HTTPMailboxFetcher {
    /// The largest list answer read: 100 handles with their message ids and times, with room to spare.
    public static let maximumListResponseBytes = 64 * 1024

    /// `POST /v1/mailbox/challenge`, the challenge opened by `answer`, then `POST /v1/mailbox/list` (mailbox v1 §7), the
    /// whole exchange within `deadlineSeconds` (capped at 10 s).
    public func list(app: String, deviceID: String, deadlineSeconds: Double,
                     answer: @Sendable (String) -> String?) async -> MailboxListResult {
        let seconds = min(max(deadlineSeconds, 0), Self.maximumDeadlineSeconds)
        guard seconds > 0 else { return .failed("no time left to ask for the list") }
        let deadline = NIODeadline.now() + .nanoseconds(Int64(seconds * 1_000_000_000))
        do {
            let (status, body) = try await post("/v1/mailbox/challenge", JSONObject([("app", .string(app)), ("device_id", .string(deviceID))]),
                                                deadline: deadline, limit: 16 * 1024)
            guard status == 200, case let .object(o)? = try? JSON.parse(body), let id = o["challenge_id"]?.stringValue,
                  let sealed = o["sealed"]?.stringValue else {
                return .failed("the gateway answered \(status) to the challenge")
            }
            guard let answered = answer(sealed) else { return .wrongAnswer }
            let (listStatus, listBody) = try await post("/v1/mailbox/list", JSONObject([("challenge_id", .string(id)), ("answer", .string(answered))]),
                                                        deadline: deadline, limit: Self.maximumListResponseBytes)
            return MailboxListResult.from(status: listStatus, body: listBody)
        } catch is NIOTooManyBytesError {
            return .failed("the gateway's answer is too large")
        } catch {
            return .failed("the list did not complete within \(seconds) s or the gateway could not be reached")
        }
    }

    private func post(_ path: String, _ json: JSONObject, deadline: NIODeadline, limit: Int) async throws -> (Int, [UInt8]) {
        var request = HTTPClientRequest(url: mailboxURL + path)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "sealedpush-device")
        request.body = .bytes(ByteBuffer(bytes: JSON.serialize(.object(json))))
        let response = try await client.execute(request, deadline: deadline)
        let body = try await response.body.collect(upTo: limit)
        return (Int(response.status.code), Array(body.readableBytesView))
    }
}

/// A mailbox URL the device cannot use.
public struct MailboxURLError: Error, CustomStringConvertible, Sendable {
    /// What is wrong with it.
    public let problem: String
    /// What happened and what to do.
    public var description: String { "the mailbox URL \(problem); give the gateway's https public_url (http only to localhost or 127.0.0.1)" }
}
