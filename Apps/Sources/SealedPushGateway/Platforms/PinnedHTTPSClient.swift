import NIOConcurrencyHelpers
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import NIOHTTP1

/// HTTPS/1.1 requests to addresses the caller resolved and checked, with the host's name for TLS (SNI and
/// certificate verification) and `Host`: the client of the requests the gateway makes on a device's say-so
/// (Web Push endpoints, platforms v1 §1.1). It never resolves a name itself, never follows a redirect, and
/// reads at most `maximumBody` bytes of an answer. Every step has a hard deadline closed on the connection's event
/// loop (platforms v1 §4.1): the TCP connect and TLS handshake together, then the request until its whole answer is
/// read; at a deadline the connection is closed and the request fails `.timedOut`, so no wait outlives it.
///
/// Connections are kept alive between requests, one request at a time each (no pipelining): after an answer
/// that allows it, the connection waits idle for the next request to the same host and port, for at most
/// `idleLimit`, with at most `maximumIdle` connections waiting in all. A kept connection goes to an address that
/// was checked when it was made, so reusing it keeps §1.1's rule ("every connection MUST go to an address that
/// is public") without resolving the name again; a new connection is only ever made to an address the caller
/// just checked (`post(host:port:address:…)`).
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
    /// The deadline of the TCP connect and the TLS handshake together (platforms v1 §4.1).
    let connectTimeout: Duration
    /// The deadline of one request, from its first byte written to the last byte of its answer read.
    let timeout: Duration
    let maximumBody: Int
    let pool: ConnectionPool

    /// A client trusting the system's roots and `additionalRootsPEM` (the local push service's CA). `timeout` bounds
    /// each request until its whole answer is read, `connectTimeout` (default: `timeout`) the TCP connect and TLS
    /// handshake together; both are closed on the connection's event loop, whatever the far side does.
    init(group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, additionalRootsPEM: [UInt8]? = nil,
         timeout: Duration = .seconds(10), connectTimeout: Duration? = nil, maximumBody: Int = 4096,
         idleLimit: Duration = .seconds(30), maximumAge: Duration = .seconds(600), maximumIdle: Int = 256) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["http/1.1"]
        if let additionalRootsPEM { tls.additionalTrustRoots = [.certificates(try NIOSSLCertificate.fromPEMBytes(additionalRootsPEM))] }
        sslContext = try NIOSSLContext(configuration: tls)
        self.group = group
        self.timeout = timeout
        self.connectTimeout = connectTimeout ?? timeout
        self.maximumBody = maximumBody
        pool = ConnectionPool(idleLimit: idleLimit, maximumAge: maximumAge, maximumIdle: maximumIdle)
    }

    /// POSTs `body` to `https://host:port/path` over a new connection to `address` (4 or 16 bytes, checked by the
    /// caller): the connect and handshake within `connectTimeout`, the request and its whole answer within
    /// `timeout`. The connection is kept for the next request to `host` and `port` when the answer allows it.
    /// Cancelling the calling task closes the connection at once (`.timedOut`).
    func post(host: String, port: Int, address: [UInt8], path: String, headers: [(String, String)], body: [UInt8]) async throws(Failure) -> Response {
        let key = ConnectionPool.key(host: host, port: port)
        let request = self.request(host: host, port: port, path: path, headers: headers, body: body)
        let connection = try await connect(host: host, port: port, address: address, key: key)
        return try await exchange(request, on: connection)
    }

    /// POSTs over a connection kept from an earlier request to `host` and `port`; nil when none is waiting. A kept
    /// connection the server has since closed fails with `.connection` before any answer: the caller then makes a
    /// new one.
    func postOnKeptConnection(host: String, port: Int, path: String, headers: [(String, String)], body: [UInt8]) async -> Result<Response, Failure>? {
        guard let connection = pool.take(ConnectionPool.key(host: host, port: port)) else { return nil }
        let request = self.request(host: host, port: port, path: path, headers: headers, body: body)
        do {
            return .success(try await exchange(request, on: connection))
        } catch {
            return .failure(error)
        }
    }

    /// Closes every kept connection.
    func shutdown() { pool.closeAll() }

    private func request(host: String, port: Int, path: String, headers: [(String, String)], body: [UInt8]) -> (head: HTTPRequestHead, body: ByteBuffer) {
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
        head.headers.add(name: "Host", value: port == 443 ? host : "\(host):\(port)")
        for (name, value) in headers { head.headers.add(name: name, value: value) }
        head.headers.add(name: "Content-Length", value: String(body.count))
        return (head, ByteBuffer(bytes: body))
    }

    /// Sends one request on `connection` within the deadline. The connection goes back to the pool after an answer
    /// that keeps it alive, and is closed after anything else: a late answer never meets the next request, and a
    /// connection whose request timed out is never reused.
    private func exchange(_ request: (head: HTTPRequestHead, body: ByteBuffer), on connection: PooledConnection) async throws(Failure) -> Response {
        do {
            let response = try await connection.send(request.head, request.body, within: timeout)
            pool.give(connection)
            return response
        } catch {
            connection.close()
            throw Self.failure(error)
        }
    }

    /// A connection's error in the client's terms.
    static func failure(_ error: any Error) -> Failure {
        switch error {
        case let failure as Failure: return failure
        case let tls as NIOSSLError:
            if case .handshakeFailed = tls { return .untrusted }
            return .connection
        case is BoringSSLError: return .untrusted
        default: return .connection
        }
    }

    /// A new connection to `address`, its TLS handshake done, within `connectTimeout`: a timer on the channel's event
    /// loop, set before the connect starts, closes it at the deadline however far it got.
    private func connect(host: String, port: Int, address: [UInt8], key: String) async throws(Failure) -> PooledConnection {
        let socket: SocketAddress
        do { socket = try SocketAddress.fromPacked(address, port: port) } catch { throw .connection }
        let sslContext = sslContext
        let tlsName = Self.isIPLiteral(host) ? nil : host
        let maximumBody = maximumBody
        let deadline = TimeAmount(connectTimeout)
        let expired = NIOLockedValueBox(false)
        let connection: PooledConnection
        do {
            connection = try await ClientBootstrap(group: group)
                .connectTimeout(deadline)
                .connect(to: socket) { channel in
                    channel.eventLoop.makeCompletedFuture {
                        let sync = channel.pipeline.syncOperations
                        try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: tlsName))
                        try sync.addHTTPClientHandlers()
                        let exchanger = ResponseExchanger(maximumBody: maximumBody, handshake: channel.eventLoop.makePromise())
                        try sync.addHandler(exchanger)
                        let bound = NIOLoopBound(exchanger, eventLoop: channel.eventLoop)
                        let timer = channel.eventLoop.scheduleTask(in: deadline) {
                            expired.withLockedValue { $0 = true }
                            bound.value.expire(Failure.timedOut)
                            channel.close(promise: nil)
                        }
                        exchanger.handshake.futureResult.whenComplete { _ in timer.cancel() }
                        return PooledConnection(key: key, channel: channel, handler: exchanger)
                    }
                }
        } catch {
            throw expired.withLockedValue { $0 } ? .timedOut : Self.failure(error)
        }
        let handshake = connection.handshake
        do {
            try await withTaskCancellationHandler {
                try await handshake.get()
            } onCancel: {
                connection.expire()
            }
        } catch {
            connection.close()
            throw expired.withLockedValue { $0 } ? .timedOut : Self.failure(error)
        }
        return connection
    }

    /// Whether `host` is an IP literal (dotted IPv4, or IPv6 in brackets), which TLS cannot name (no SNI).
    static func isIPLiteral(_ host: String) -> Bool {
        host.hasPrefix("[") || (!host.isEmpty && host.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2e })
    }
}

/// One HTTPS/1.1 connection: one request at a time, its answer collected by `ResponseExchanger`.
final class PooledConnection: Sendable {
    /// The host and port it was made for.
    let key: String
    let channel: any Channel
    let handler: NIOLoopBound<ResponseExchanger>
    let exchanger: ResponseExchanger.Shared
    /// Completed when the TLS handshake is done (failed when the connection closes first).
    let handshake: EventLoopFuture<Void>
    /// When it was made: a connection is kept at most `ConnectionPool.maximumAge` in all.
    let created = ContinuousClock.now

    init(key: String, channel: any Channel, handler: ResponseExchanger) {
        self.key = key
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        exchanger = handler.shared
        handshake = handler.handshake.futureResult
    }

    /// Writes the request and waits for its whole answer, at most `deadline`: a timer on the event loop fails the
    /// request (`.timedOut`) and closes the connection, so the wait never outlives it. Cancelling the waiting task
    /// does the same at once.
    func send(_ head: HTTPRequestHead, _ body: ByteBuffer, within deadline: Duration) async throws -> PinnedHTTPSClient.Response {
        let promise = channel.eventLoop.makePromise(of: PinnedHTTPSClient.Response.self)
        let handler = handler
        let eventLoop = channel.eventLoop
        eventLoop.execute {
            let timer = eventLoop.scheduleTask(in: TimeAmount(deadline)) { handler.value.expire(PinnedHTTPSClient.Failure.timedOut) }
            promise.futureResult.whenComplete { _ in timer.cancel() }
            handler.value.start(head, body, promise)
        }
        return try await withTaskCancellationHandler {
            try await promise.futureResult.get()
        } onCancel: {
            self.expire()
        }
    }

    /// Ends whatever waits on the connection (`.timedOut`) and closes it, on its event loop.
    func expire() {
        let handler = handler
        channel.eventLoop.execute { handler.value.expire(PinnedHTTPSClient.Failure.timedOut) }
    }

    /// Whether the connection is open and its last answer allowed another request.
    var reusable: Bool { channel.isActive && exchanger.keepAlive.withLockedValue { $0 } }

    /// Closes the connection; a request waiting on it fails with `.connection`.
    func close() { channel.close(promise: nil) }
}

/// The last handler of a kept-alive connection's pipeline: writes one request, collects its answer (at most
/// `maximumBody` bytes of body) and completes the request's promise; anything unasked for, or an error, closes
/// the connection.
final class ResponseExchanger: ChannelDuplexHandler {
    typealias InboundIn = HTTPClientResponsePart
    typealias OutboundIn = HTTPClientRequestPart
    typealias OutboundOut = HTTPClientRequestPart

    /// What other threads read of the handler.
    struct Shared: Sendable {
        /// Whether the last answer allowed another request on this connection (set before its promise completes).
        let keepAlive = NIOLockedValueBox(false)
    }

    let maximumBody: Int
    let shared = Shared()
    var context: ChannelHandlerContext?
    var pending: EventLoopPromise<PinnedHTTPSClient.Response>?
    var response: PinnedHTTPSClient.Response?
    var reusable = false {
        didSet { shared.keepAlive.withLockedValue { [reusable] in $0 = reusable } }
    }

    /// Completed once the TLS handshake is done; failed if the connection closes or errs first.
    let handshake: EventLoopPromise<Void>
    var handshakeDone = false

    init(maximumBody: Int, handshake: EventLoopPromise<Void>) {
        self.maximumBody = maximumBody
        self.handshake = handshake
    }

    func handlerAdded(context: ChannelHandlerContext) { self.context = context }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
        fail(PinnedHTTPSClient.Failure.connection)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let tls = event as? TLSUserEvent, case .handshakeCompleted = tls, !handshakeDone {
            handshakeDone = true
            handshake.succeed()
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// A deadline passed (or the caller gave up): fails what waits with `error` and closes the connection.
    func expire(_ error: any Error) {
        reusable = false
        fail(error)
        context?.close(promise: nil)
    }

    /// Writes a request; its answer completes `promise`. A connection already busy, or closed, fails it at once.
    func start(_ head: HTTPRequestHead, _ body: ByteBuffer, _ promise: EventLoopPromise<PinnedHTTPSClient.Response>) {
        guard let context, pending == nil, context.channel.isActive else {
            promise.fail(PinnedHTTPSClient.Failure.connection)
            return
        }
        pending = promise
        response = nil
        reusable = false
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(.byteBuffer(body))), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard pending != nil else {
            context.close(promise: nil)  // an answer nobody asked for
            return
        }
        switch unwrapInboundIn(data) {
        case let .head(head):
            response = PinnedHTTPSClient.Response(status: Int(head.status.code), headers: head.headers, body: [])
            reusable = head.isKeepAlive
        case var .body(buffer):
            if let body = response?.body, body.count < maximumBody {
                let take = min(buffer.readableBytes, maximumBody - body.count)
                response?.body += buffer.readBytes(length: take) ?? []
            }
        case .end:
            guard let promise = pending, let answer = response else {
                context.close(promise: nil)
                return
            }
            pending = nil
            response = nil
            if !reusable { context.close(promise: nil) }
            promise.succeed(answer)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        reusable = false
        fail(PinnedHTTPSClient.Failure.connection)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        reusable = false
        fail(error)
        context.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        if !handshakeDone {
            handshakeDone = true
            handshake.fail(error)
        }
        if let promise = pending {
            pending = nil
            promise.fail(error)
        }
    }
}

/// The connections waiting for their next request, by host and port: each waits at most `idleLimit` and is kept
/// at most `maximumAge` since it was made, and at most `maximumIdle` wait in all (the oldest is closed to make room).
final class ConnectionPool: Sendable {
    let idleLimit: Duration
    /// How long a connection is kept in all, from when it was made (platforms v1 §1.1: 10 minutes), so that a
    /// name's new addresses take effect.
    let maximumAge: Duration
    let maximumIdle: Int
    private let idle = NIOLockedValueBox<[(connection: PooledConnection, since: ContinuousClock.Instant)]>([])

    init(idleLimit: Duration, maximumAge: Duration = .seconds(600), maximumIdle: Int) {
        self.idleLimit = idleLimit
        self.maximumAge = maximumAge
        self.maximumIdle = maximumIdle
    }

    /// The pool's key for `host` and `port`.
    static func key(host: String, port: Int) -> String { "\(host.lowercased())|\(port)" }

    /// The connection to `key` that waited least, if one waits; connections past their idle limit, or closed by the
    /// server meanwhile, are dropped.
    func take(_ key: String) -> PooledConnection? {
        let now = ContinuousClock.now
        let (found, expired) = idle.withLockedValue { list -> (PooledConnection?, [PooledConnection]) in
            let stale = { (entry: (connection: PooledConnection, since: ContinuousClock.Instant)) in
                now - entry.since > self.idleLimit || now - entry.connection.created > self.maximumAge || !entry.connection.channel.isActive
            }
            let expired = list.filter(stale).map(\.connection)
            list.removeAll(where: stale)
            guard let index = list.lastIndex(where: { $0.connection.key == key }) else { return (nil, expired) }
            return (list.remove(at: index).connection, expired)
        }
        for connection in expired { connection.close() }
        return found
    }

    /// Keeps `connection` for the next request when its last answer allowed it, else closes it.
    func give(_ connection: PooledConnection) {
        guard connection.reusable, ContinuousClock.now - connection.created <= maximumAge else {
            connection.close()
            return
        }
        let evicted = idle.withLockedValue { list -> PooledConnection? in
            list.append((connection, ContinuousClock.now))
            return list.count > maximumIdle ? list.removeFirst().connection : nil
        }
        evicted?.close()
    }

    /// Closes every waiting connection.
    func closeAll() {
        let all = idle.withLockedValue { list -> [PooledConnection] in
            defer { list.removeAll() }
            return list.map(\.connection)
        }
        for connection in all { connection.close() }
    }

    /// How many connections wait (tests).
    var count: Int { idle.withLockedValue { $0.count } }
}
