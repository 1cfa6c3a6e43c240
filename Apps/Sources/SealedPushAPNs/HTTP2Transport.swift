import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS

/// One push as the transport sends it: the request's header block and its body.
struct HTTP2PushRequest: Sendable {
    var headers: HPACKHeaders
    var body: ByteBuffer
}

/// What came back on a push's stream: the status, the two APNs headers, and the body (at most 64 KiB kept).
struct HTTP2PushResponse: Sendable {
    var status: Int
    var apnsID: String?
    var uniqueID: String?
    var body: ByteBuffer
}

/// A try that APNs never processed: its stream was refused or cut by a GOAWAY that named a lower last
/// stream, or could not be opened because the connection was already going away. Sending it again is
/// always safe and does not count against the retry budget.
struct UnprocessedPush: Error {}

/// The provider client's transport: a few long-lived HTTP/2 connections to one APNs host over NIOHTTP2,
/// NIOSSL and NIOPosix.
///
/// - Connections are opened on first use, one slot at a time (Apple asks that they not be opened all at
///   once), kept, and replaced when they close or receive a GOAWAY. Pushes go round-robin over the open ones.
/// - Each push is one stream: its HEADERS and DATA are written with one flush. Streams past the server's
///   `SETTINGS_MAX_CONCURRENT_STREAMS` wait inside NIOHTTP2 until one closes.
/// - The only timer per push is its deadline. Each connection sends a PING when it has been quiet for
///   `pingInterval` and closes itself when the ack does not come within `pingTimeout`.
final class HTTP2Transport: Sendable {
    struct Configuration: Sendable {
        var host: String
        var port: Int
        var tls: TLSConfiguration
        var connections: Int = 2
        var connectTimeout: Duration = .seconds(5)
        /// The least time between opening two connections while another is usable.
        var connectionSpacing: Duration = .seconds(1)
        var pingInterval: Duration = .seconds(60)
        var pingTimeout: Duration = .seconds(20)
    }

    struct State {
        var slots: [HTTP2Connection?]
        /// Connections being opened, by slot: later callers wait for the same one.
        var opening: [Int: EventLoopFuture<HTTP2Connection>] = [:]
        var next = 0
        var lastOpened: ContinuousClock.Instant?
        var shutDown = false
    }

    let configuration: Configuration
    let sslContext: NIOSSLContext
    let state: NIOLockedValueBox<State>
    let group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton

    init(configuration: Configuration) throws {
        var configuration = configuration
        configuration.connections = max(1, configuration.connections)
        configuration.tls.applicationProtocols = ["h2"]
        self.configuration = configuration
        sslContext = try NIOSSLContext(configuration: configuration.tls)
        state = NIOLockedValueBox(State(slots: Array(repeating: nil, count: configuration.connections)))
    }

    /// Sends one push on one stream and returns the answer, or throws: `UnprocessedPush` when the server
    /// never processed it, a NIO, NIOSSL or NIOHTTP2 error otherwise, `HTTP2Deadline` past `timeout`.
    func send(_ request: HTTP2PushRequest, timeout: Duration) async throws -> HTTP2PushResponse {
        let connection = try await connection()
        return try await connection.send(request, timeout: timeout).get()
    }

    /// An open connection: the next usable one round-robin. A slot that is empty or whose connection closed
    /// or is going away is (re)opened when no connection is usable, or in the background once
    /// `connectionSpacing` has passed since the last open; one opens at a time.
    func connection() async throws -> HTTP2Connection {
        enum Pick { case ready(HTTP2Connection), wait(EventLoopFuture<HTTP2Connection>) }
        let loop = group.next()
        let now = ContinuousClock.now
        var opening: (slot: Int, promise: EventLoopPromise<HTTP2Connection>)?
        let pick = try state.withLockedValue { s -> Pick in
            guard !s.shutDown else { throw HTTP2TransportShutDown() }
            let usable = s.slots.indices.filter { s.slots[$0]?.isUsable == true }
            if s.opening.isEmpty, let slot = s.slots.indices.first(where: { s.slots[$0]?.isUsable != true }),
               usable.isEmpty || s.lastOpened.map({ $0.duration(to: now) >= configuration.connectionSpacing }) ?? true {
                s.slots[slot] = nil
                s.lastOpened = now
                let promise = loop.makePromise(of: HTTP2Connection.self)
                s.opening[slot] = promise.futureResult
                opening = (slot, promise)
            }
            if !usable.isEmpty {
                let index = usable.first(where: { $0 >= s.next }) ?? usable[0]
                s.next = index + 1
                return .ready(s.slots[index]!)
            }
            if let pending = s.opening.values.first { return .wait(pending) }
            throw ChannelError.ioOnClosedChannel
        }
        if let (slot, promise) = opening {
            let opened = connect(on: loop)
            opened.whenComplete { [state] result in
                let keep = state.withLockedValue { s -> Bool in
                    s.opening[slot] = nil
                    guard case let .success(connection) = result, !s.shutDown else { return false }
                    s.slots[slot] = connection
                    return true
                }
                if !keep, case let .success(connection) = result { connection.channel.close(promise: nil) }
            }
            opened.cascade(to: promise)
        }
        switch pick {
        case let .ready(connection): return connection
        case let .wait(future): return try await future.get()
        }
    }

    /// Opens a TLS connection, waits for its handshake (ALPN must choose `h2`) and sets up HTTP/2.
    func connect(on loop: any EventLoop) -> EventLoopFuture<HTTP2Connection> {
        let configuration = configuration, sslContext = sslContext
        let hostname = configuration.host.isIPAddress ? nil : configuration.host
        let handshake = loop.makePromise(of: String?.self)
        let bootstrap = ClientBootstrap(group: loop)
            .connectTimeout(TimeAmount(configuration.connectTimeout))
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: hostname))
                    try sync.addHandler(HandshakeWatcher(handshake))
                }
            }
        return bootstrap.connect(host: configuration.host, port: configuration.port).flatMap { channel in
            handshake.futureResult.flatMapThrowing { negotiated -> HTTP2Connection in
                guard negotiated == "h2" else { throw HTTP2NotNegotiated() }
                let sync = channel.pipeline.syncOperations
                let multiplexer = try sync.configureHTTP2Pipeline(
                    mode: .client, connectionConfiguration: .init(), streamConfiguration: .init()
                ) { stream in stream.close() }  // APNs opens no streams: refuse any
                let connection = HTTP2Connection(channel: channel, multiplexer: multiplexer)
                try sync.addHandler(ConnectionWatcher(connection, pingInterval: configuration.pingInterval, pingTimeout: configuration.pingTimeout))
                return connection
            }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw error
            }
        }
    }

    /// Closes every connection; streams still open fail.
    func shutdown() async {
        let (slots, opening) = state.withLockedValue { s in
            s.shutDown = true
            defer { s.slots = s.slots.map { _ in nil } }
            return (s.slots.compactMap { $0 }, Array(s.opening.values))
        }
        for future in opening { if let connection = try? await future.get() { try? await connection.channel.close() } }
        for connection in slots { try? await connection.channel.close() }
    }
}

/// The transport was shut down: no push is sent any more.
struct HTTP2TransportShutDown: Error {}

/// The server did not agree to HTTP/2 in the TLS handshake (APNs always does).
struct HTTP2NotNegotiated: Error {}

/// The server ended a stream without a `:status`.
struct HTTP2MissingStatus: Error {}

/// A push's deadline passed before its answer was complete.
struct HTTP2Deadline: Error {}

/// One HTTP/2 connection of the transport.
final class HTTP2Connection: Sendable {
    let channel: any Channel
    let multiplexer: NIOHTTP2Handler.StreamMultiplexer
    /// Set once the server sent GOAWAY or the connection closed: no new streams go here.
    let goingAway = NIOLockedValueBox(false)
    /// The last stream id of the server's GOAWAY: streams above it were not processed (RFC 9113 §6.8).
    let goAwayLastStreamID = NIOLockedValueBox<HTTP2StreamID?>(nil)

    init(channel: any Channel, multiplexer: NIOHTTP2Handler.StreamMultiplexer) {
        self.channel = channel
        self.multiplexer = multiplexer
    }

    var isUsable: Bool { channel.isActive && !goingAway.withLockedValue { $0 } }

    /// Opens a stream for `request`; the future holds its answer.
    func send(_ request: HTTP2PushRequest, timeout: Duration) -> EventLoopFuture<HTTP2PushResponse> {
        let promise = channel.eventLoop.makePromise(of: HTTP2PushResponse.self)
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        multiplexer.createStreamChannel { stream in
            stream.eventLoop.makeCompletedFuture {
                try stream.pipeline.syncOperations.addHandler(PushStreamHandler(request, on: self, deadline: deadline, promise: promise))
            }
        }.whenFailure { _ in promise.fail(UnprocessedPush()) }  // no stream was opened: nothing was sent
        return promise.futureResult
    }

    /// Whether `error` means the stream never reached the server's processing: refused (`REFUSED_STREAM`,
    /// which a GOAWAY's excluded streams get), opened after a GOAWAY, or written to a connection already closed.
    static func unprocessed(_ error: any Error) -> Bool {
        switch error {
        case let closed as NIOHTTP2Errors.StreamClosed: closed.errorCode == .refusedStream
        case let wrapped as NIOHTTP2Errors.StreamError: unprocessed(wrapped.baseError)
        // A write on a connection already closed: the request never left.
        case is NIOHTTP2Errors.CreatedStreamAfterGoaway, is NIOHTTP2Errors.NoStreamIDAvailable,
             is NIOHTTP2Errors.IOOnClosedConnection: true
        default: false
        }
    }
}

/// Completes `promise` with the TLS handshake's negotiated protocol, or its failure, then leaves the pipeline.
final class HandshakeWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    let promise: EventLoopPromise<String?>
    var done = false

    init(_ promise: EventLoopPromise<String?>) { self.promise = promise }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case let .handshakeCompleted(negotiated)? = event as? TLSUserEvent, !done {
            done = true
            promise.succeed(negotiated)
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if !done { done = true; promise.fail(error) }
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        if !done { done = true; promise.fail(ChannelError.eof) }
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        if !done { done = true; promise.fail(ChannelError.eof) }
    }
}

/// Watches a connection's own frames: a GOAWAY marks it going away; quiet time triggers a PING, and a PING
/// not acknowledged in time closes the connection. Errors close it.
final class ConnectionWatcher: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    let connection: HTTP2Connection
    let pingInterval: TimeAmount
    let pingTimeout: TimeAmount
    var lastActivity = NIODeadline.now()
    var awaitingAck: NIODeadline?
    var timer: RepeatedTask?
    static let pingData = HTTP2PingData(withInteger: 0x5345_414c_4544_5055)  // "SEALEDPU"

    init(_ connection: HTTP2Connection, pingInterval: Duration, pingTimeout: Duration) {
        self.connection = connection
        self.pingInterval = TimeAmount(pingInterval)
        self.pingTimeout = TimeAmount(pingTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let check = min(pingInterval, pingTimeout)
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleRepeatedTask(initialDelay: check, delay: check) { _ in
            let (watcher, context) = loopBound.value
            watcher.tick(context: context)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) { timer?.cancel() }

    func tick(context: ChannelHandlerContext) {
        let now = NIODeadline.now()
        if let due = awaitingAck {
            if now > due + pingTimeout { context.close(promise: nil) }
            return
        }
        guard now - lastActivity >= pingInterval else { return }
        awaitingAck = now
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(Self.pingData, ack: false))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        lastActivity = .now()
        switch frame.payload {
        case let .goAway(lastStreamID, _, _):
            connection.goingAway.withLockedValue { $0 = true }
            connection.goAwayLastStreamID.withLockedValue { last in last = min(last ?? lastStreamID, lastStreamID) }
        case let .ping(data, ack: true) where data == Self.pingData: awaitingAck = nil
        default: break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        context.write(data, promise: promise)
    }

    func channelInactive(context: ChannelHandlerContext) {
        timer?.cancel()
        connection.goingAway.withLockedValue { $0 = true }
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A connection-level protocol error ends the connection; its streams fail on their own.
        context.close(promise: nil)
    }
}

/// One push's stream: writes the request (HEADERS and DATA, one flush) when the stream becomes active, reads
/// the answer, and completes the promise exactly once — with the answer, a stream error, or the deadline.
final class PushStreamHandler: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    static let maximumBody = 64 * 1024
    var request: HTTP2PushRequest?
    let connection: HTTP2Connection
    let deadline: NIODeadline
    let promise: EventLoopPromise<HTTP2PushResponse>
    var response = HTTP2PushResponse(status: 0, apnsID: nil, uniqueID: nil, body: ByteBuffer())
    var timer: Scheduled<Void>?
    var done = false

    init(_ request: HTTP2PushRequest, on connection: HTTP2Connection, deadline: NIODeadline, promise: EventLoopPromise<HTTP2PushResponse>) {
        self.request = request
        self.connection = connection
        self.deadline = deadline
        self.promise = promise
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        timer = context.eventLoop.scheduleTask(deadline: deadline) {
            let (handler, context) = loopBound.value
            handler.finish(.failure(HTTP2Deadline()), context: context)
        }
        if context.channel.isActive { writeRequest(context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        writeRequest(context: context)
        context.fireChannelActive()
    }

    func writeRequest(context: ChannelHandlerContext) {
        guard let request else { return }
        self.request = nil
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let failed: @Sendable (Result<Void, any Error>) -> Void = { result in
            if case let .failure(error) = result {
                let (handler, context) = loopBound.value
                handler.finish(.failure(error), context: context)
            }
        }
        let headersWritten = context.eventLoop.makePromise(of: Void.self)
        headersWritten.futureResult.whenComplete(failed)
        context.write(wrapOutboundOut(.headers(.init(headers: request.headers, endStream: false))), promise: headersWritten)
        let bodyWritten = context.eventLoop.makePromise(of: Void.self)
        bodyWritten.futureResult.whenComplete(failed)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(request.body), endStream: true))), promise: bodyWritten)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case let .headers(headers):
            for (name, value, _) in headers.headers {
                switch name {
                case ":status": if response.status == 0 { response.status = Int(value) ?? 0 }
                case "apns-id": response.apnsID = value
                case "apns-unique-id": response.uniqueID = value
                default: break
                }
            }
            if headers.endStream { finish(.success(response), context: context) }
        case var .data(payload):
            if case var .byteBuffer(buffer) = payload.data, response.body.readableBytes < Self.maximumBody {
                let take = min(buffer.readableBytes, Self.maximumBody - response.body.readableBytes)
                if let slice = buffer.readSlice(length: take) { response.body.writeImmutableBuffer(slice) }
            }
            if payload.endStream { finish(.success(response), context: context) }
            payload.data = .byteBuffer(ByteBuffer())
        default:
            break
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(.failure(error), context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        // Closed without an answer (the connection went away): the server may or may not have processed it.
        finish(.failure(ChannelError.eof), context: context)
        context.fireChannelInactive()
    }

    func finish(_ result: Result<HTTP2PushResponse, any Error>, context: ChannelHandlerContext) {
        guard !done else { return }
        done = true
        timer?.cancel()
        switch result {
        case let .success(response) where response.status != 0:
            promise.succeed(response)
        case .success:
            promise.fail(HTTP2MissingStatus())
        case let .failure(error):
            promise.fail(HTTP2Connection.unprocessed(error) || excludedByGoAway(context: context) ? UnprocessedPush() : error)
            context.close(promise: nil)
        }
    }
}

extension PushStreamHandler {
    /// Whether the server's GOAWAY named a last stream below this one: then it never processed this stream,
    /// however the stream ended.
    func excludedByGoAway(context: ChannelHandlerContext) -> Bool {
        guard let last = connection.goAwayLastStreamID.withLockedValue({ $0 }),
              let id = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID) else { return false }
        return id > last
    }
}

extension String {
    /// Whether the string is an IPv4 or IPv6 literal (no SNI is sent for those).
    var isIPAddress: Bool {
        (try? SocketAddress(ipAddress: self, port: 0)) != nil
    }
}
