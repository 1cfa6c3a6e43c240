/// One HTTPS POST to FCM or its token endpoint.
public struct FCMHTTPRequest: Sendable {
    /// The absolute URL.
    public var url: String
    /// Header fields, names in lower case.
    public var headers: [String: String]
    /// The body.
    public var body: [UInt8]
    /// The longest the whole exchange may take, answer body included.
    public var timeout: Duration
    /// The most answer-body bytes read; a longer body is cut there and marked `bodyTruncated`.
    public var responseBodyLimit: Int

    /// A request from its parts.
    public init(url: String, headers: [String: String], body: [UInt8], timeout: Duration, responseBodyLimit: Int) {
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.responseBodyLimit = responseBodyLimit
    }
}

/// An HTTP answer, its body read up to the request's limit.
public struct FCMHTTPResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// Header fields, names in lower case (repeated fields joined with ", ").
    public var headers: [String: String]
    /// The body, at most the request's `responseBodyLimit` bytes.
    public var body: [UInt8]
    /// Whether the body went on past the limit (then `body` is only its start).
    public var bodyTruncated: Bool

    /// An answer from its parts.
    public init(status: Int, headers: [String: String] = [:], body: [UInt8] = [], bodyTruncated: Bool = false) {
        self.status = status
        self.headers = headers
        self.body = body
        self.bodyTruncated = bodyTruncated
    }
}

/// How `FCMClient` and `FCMAccessTokenProvider` reach the network: AsyncHTTPClient in production
/// (`FCMHTTPClientTransport`), a fake in tests.
public protocol FCMTransport: Sendable {
    /// POSTs `request` and returns the answer, or why there is none.
    func post(_ request: FCMHTTPRequest) async throws(FCMTransportError) -> FCMHTTPResponse
}
