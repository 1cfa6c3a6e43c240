import NIOCore
import NIOPosix
import NIOSSL
import NIOHTTP1

/// One HTTPS/1.1 request to an address the caller resolved and checked, with the host's name for TLS (SNI and
/// certificate verification) and `Host`: the client of the requests the gateway makes on a device's say-so
/// (Web Push endpoints, platforms v1 §1.1). It never resolves a name itself, never follows a redirect, and
/// reads at most `maximumBody` bytes of an answer. One connection per request.
struct PinnedHTTPSClient: Sendable {
    /// An answer: its status, headers, and at most `maximumBody` bytes of its body.
    struct Response: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
    }

    /// Why a request got no answer.
    enum Failure: Error, Sendable, Equatable {
        /// No answer within the deadline.
        case timedOut
        /// The connection could not be made, or was lost before the answer.
        case connection
        /// The server's certificate was refused.
        case untrusted
    }

    let group: any EventLoopGroup
    let sslContext: NIOSSLContext
    let timeout: Duration
    let maximumBody: Int

    /// A client trusting the system's roots and `additionalRootsPEM` (the local push service's CA).
    init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, additionalRootsPEM: [UInt8]? = nil,
         timeout: Duration = .seconds(10), maximumBody: Int = 4096) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["http/1.1"]
        if let additionalRootsPEM { tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(additionalRootsPEM))] }
        sslContext = try NIOSSLContext(configuration: tls)
        self.group = group
        self.timeout = timeout
        self.maximumBody = maximumBody
    }

    /// POSTs `body` to `https://host:port/path` at `address` (4 or 16 bytes), within the deadline.
    func post(host: String, port: Int, address: [UInt8], path: String, headers: [(String, String)], body: [UInt8]) async throws(Failure) -> Response {
        let deadline = timeout
        do {
            return try await withThrowingTaskGroup(of: Response?.self) { group in
                group.addTask { try await self.exchange(host: host, port: port, address: address, path: path, headers: headers, body: body) }
                group.addTask {
                    try await Task.sleep(for: deadline)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let response = first else { throw Failure.timedOut }
                return response
            }
        } catch let failure as Failure {
            throw failure
        } catch let error as NIOSSLError {
            if case .handshakeFailed = error { throw .untrusted }
            throw .connection
        } catch is BoringSSLError {
            throw .untrusted
        } catch {
            throw Task.isCancelled ? .timedOut : .connection
        }
    }

    private func exchange(host: String, port: Int, address: [UInt8], path: String, headers: [(String, String)], body: [UInt8]) async throws -> Response {
        let socket = try SocketAddress.fromPacked(address, port: port)
        let sslContext = sslContext
        let tlsName = Self.isIPLiteral(host) ? nil : host
        let channel = try await ClientBootstrap(group: group)
            .connectTimeout(.seconds(Int64(max(1, timeout.components.seconds))))
            .connect(to: socket) { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: tlsName))
                    try sync.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
            head.headers.add(name: "Host", value: port == 443 ? host : "\(host):\(port)")
            for (name, value) in headers { head.headers.add(name: name, value: value) }
            head.headers.add(name: "Content-Length", value: String(body.count))
            head.headers.add(name: "Connection", value: "close")
            try await outbound.write(.head(head))
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
            try await outbound.write(.end(nil))
            var response: Response?
            for try await part in inbound {
                switch part {
                case let .head(h):
                    response = Response(status: Int(h.status.code), headers: h.headers, body: [])
                case var .body(buffer):
                    if let r = response, r.body.count < maximumBody {
                        let take = min(buffer.readableBytes, maximumBody - r.body.count)
                        response?.body += buffer.readBytes(length: take) ?? []
                    }
                case .end:
                    if let response { return response }
                }
            }
            throw Failure.connection
        }
    }

    /// Whether `host` is an IP literal (dotted IPv4, or IPv6 in brackets), which TLS cannot name (no SNI).
    static func isIPLiteral(_ host: String) -> Bool {
        host.hasPrefix("[") || (!host.isEmpty && host.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e })
    }
}
