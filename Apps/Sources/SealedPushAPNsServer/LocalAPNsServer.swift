public import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import SealedPushAPNsCore
public import ServiceLifecycle
import NIOConcurrencyHelpers
import Synchronization

/// Why the local APNs could not start.
public struct LocalAPNsServerError: Error, CustomStringConvertible, Sendable {
    /// What went wrong and what to do.
    public let description: String

    init(_ description: String) { self.description = description }
}

/// A local APNs for development and tests: HTTP/2 over TLS (ALPN `h2`) on swift-nio-http2, with APNs's
/// checks (`LocalAPNsRules`), its status codes and reasons, and faults on request. Accepted pushes go to
/// `onAccepted`, which `sealedpush-server apns serve` wires to simulated devices.
///
/// A swift-service-lifecycle `Service`: `run()` binds (unless `start()` already did) and serves until graceful
/// shutdown, then stops accepting, sends GOAWAY on every open connection (once with the highest stream id,
/// then, after the client's PING ack, with the last stream it opened), lets in-flight streams finish for
/// up to `shutdownGracePeriod`, closes what remains and returns. Cancellation closes everything at once.
public final class LocalAPNsServer: Service, Sendable {
    /// The rules every request goes through (also: unregister tokens, read counts).
    public let rules: LocalAPNsRules
    /// The TLS identity; clients trust `authority.caPEM`.
    public let authority: LocalCertificateAuthority
    /// How long in-flight streams may run after a graceful shutdown began before their connections are closed.
    public let shutdownGracePeriod: Duration
    let onAccepted: @Sendable (AcceptedPush) -> Void
    let logger: Logger
    let state = NIOLockedValueBox(ServerState())
    let connectionCount = Atomic<Int>(0)
    let load = RequestLoad()

    /// The listening socket, the open connections, and whether the server is shutting down.
    struct ServerState {
        var listener: (any Channel)?
        var port: Int?
        var connections: [ObjectIdentifier: any Channel] = [:]
        var stopping = false
    }

    /// A server with `configuration`; `onAccepted` receives every accepted push after it was answered.
    /// On graceful shutdown, in-flight streams get `shutdownGracePeriod` to finish.
    public init(configuration: LocalAPNsConfiguration, authority: LocalCertificateAuthority,
                shutdownGracePeriod: Duration = .seconds(10),
                logger: Logger = Logger(label: "sealedpush.apns-serve"),
                onAccepted: @escaping @Sendable (AcceptedPush) -> Void = { _ in }) {
        rules = LocalAPNsRules(configuration: configuration)
        self.authority = authority
        self.shutdownGracePeriod = shutdownGracePeriod
        self.onAccepted = onAccepted
        self.logger = logger
    }

    /// How many TLS connections clients have opened so far.
    public var connectionsAccepted: Int { connectionCount.load(ordering: .relaxed) }

    /// How many connections are open now.
    public var openConnections: Int { state.withLockedValue { $0.connections.count } }

    /// The most requests that were being answered at once (from a complete request to its response).
    public var peakConcurrentRequests: Int { load.peak }

    /// The bound port once started, else `nil`.
    public var port: Int? { state.withLockedValue { $0.port } }

    /// Binds and starts serving; returns the port (useful with port 0). Calling it again returns the same port.
    public func start() async throws -> Int {
        let (started, stopping) = state.withLockedValue { ($0.port, $0.stopping) }
        if stopping { throw LocalAPNsServerError("this local APNs was stopped; make a new LocalAPNsServer to serve again") }
        if let started { return started }
        let configuration = rules.configuration
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMBytes(Array(authority.serverCertificatePEM.utf8)).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(authority.serverKeyPEM.utf8), format: .pem)))
        tls.applicationProtocols = ["h2"]
        let sslContext = try NIOSSLContext(configuration: tls)
        var settings = NIOHTTP2Handler.ConnectionConfiguration()
        settings.initialSettings = [
            HTTP2Setting(parameter: .maxConcurrentStreams, value: configuration.maxConcurrentStreams),
            HTTP2Setting(parameter: .maxHeaderListSize, value: 16 * 1024),
        ]
        let connectionConfiguration = settings
        let streamConfiguration = NIOHTTP2Handler.StreamConfiguration()
        // Graceful close: GOAWAY on ChannelShouldQuiesceEvent, close once the streams are done or the grace ran out.
        let management = NIOHTTP2ServerConnectionManagementHandler.Configuration(
            maxIdleTime: TimeAmount(configuration.idleTimeout), maxAge: nil, maxGraceTime: TimeAmount(shutdownGracePeriod), keepalive: nil)
        let rules = self.rules, logger = self.logger, onAccepted = self.onAccepted, load = self.load
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                guard self.track(channel, limit: configuration.maxConnections) else { return channel.close() }
                self.connectionCount.add(1, ordering: .relaxed)
                let connection = LocalAPNsConnection()
                let handshakeTimeout = TimeAmount(configuration.handshakeTimeout), requestTimeout = TimeAmount(configuration.requestTimeout)
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    let manager = NIOHTTP2ServerConnectionManagementHandler(eventLoop: channel.eventLoop, configuration: management)
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    try sync.addHandler(HandshakeDeadlineHandler(timeout: handshakeTimeout, logger: logger))
                    _ = try sync.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: connectionConfiguration,
                        streamConfiguration: streamConfiguration, streamDelegate: manager.http2StreamDelegate
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            let streamSync = stream.pipeline.syncOperations
                            try streamSync.addHandler(APNsStreamHandler(rules: rules, connection: connection, load: load,
                                                                        requestTimeout: requestTimeout, logger: logger,
                                                                        onAccepted: onAccepted))
                        }
                    }
                    try sync.addHandler(manager)
                    try sync.addHandler(ConnectionErrorHandler(connection: connection, logger: logger))
                }
            }
        let bound = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        let port = bound.localAddress?.port ?? configuration.port
        let kept = state.withLockedValue { s -> Bool in
            guard s.listener == nil, s.port == nil, !s.stopping else { return false }
            s.listener = bound
            s.port = port
            return true
        }
        guard kept else {
            try? await bound.close()
            throw LocalAPNsServerError("this local APNs was already started or stopped; make a new LocalAPNsServer to serve again")
        }
        return port
    }

    /// Registers a new connection (closed when it closes); `false` once the server is shutting down or
    /// `limit` connections are open.
    private func track(_ channel: any Channel, limit: Int) -> Bool {
        let id = ObjectIdentifier(channel)
        let (admitted, full) = state.withLockedValue { s -> (Bool, Bool) in
            if s.stopping { return (false, false) }
            if s.connections.count >= limit { return (false, true) }
            s.connections[id] = channel
            return (true, false)
        }
        if full { logger.notice("refusing a connection: the connection limit is reached", metadata: ["limit": "\(limit)"]) }
        if admitted {
            channel.closeFuture.whenComplete { [self] _ in
                _ = self.state.withLockedValue { $0.connections.removeValue(forKey: id) }
            }
        }
        return admitted
    }

    /// Serves until graceful shutdown (binding first unless `start()` did), then quiesces: see the type's summary.
    public func run() async throws {
        _ = try await start()
        try? await gracefulShutdown()
        await shutdown(gracePeriod: Task.isCancelled ? .zero : shutdownGracePeriod)
    }

    /// Stops accepting, sends GOAWAY on every open connection, waits up to `gracePeriod` for their streams to
    /// finish and closes the connections that remain. Returns once every connection is closed.
    public func shutdown(gracePeriod: Duration) async {
        let (listener, connections) = state.withLockedValue { s in
            s.stopping = true
            defer { s.listener = nil }
            return (s.listener, Array(s.connections.values))
        }
        try? await listener?.close()
        guard !connections.isEmpty else { return }
        logger.info("shutting down", metadata: ["connections": "\(connections.count)"])
        for connection in connections { connection.pipeline.fireUserInboundEventTriggered(ChannelShouldQuiesceEvent()) }
        let loop = MultiThreadedEventLoopGroup.singleton.any()
        let allClosed = EventLoopFuture.andAllComplete(connections.map(\.closeFuture), on: loop)
        // A backstop for clients that never acknowledge the GOAWAY's PING (the handler's grace timer starts after it).
        let backstop = loop.scheduleTask(in: TimeAmount(max(gracePeriod, .zero))) {
            for connection in connections { connection.close(promise: nil) }
        }
        try? await allClosed.get()
        backstop.cancel()
    }

    /// Stops listening and closes every connection now (in-flight streams are cut).
    public func stop() async {
        await shutdown(gracePeriod: .zero)
    }
}

/// Requests being answered now, and the most at once.
final class RequestLoad: Sendable {
    let state = NIOLockedValueBox((current: 0, peak: 0))

    var peak: Int { state.withLockedValue { $0.peak } }

    func begin() {
        state.withLockedValue { s in
            s.current += 1
            s.peak = max(s.peak, s.current)
        }
    }

    func end() { state.withLockedValue { $0.current -= 1 } }
}

/// Closes a connection whose TLS handshake is not done within `timeout` (a client that connects and stalls
/// holds no slot for long), then steps aside.
final class HandshakeDeadlineHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = NIOAny
    let timeout: TimeAmount
    let logger: Logger
    var deadline: Scheduled<Void>?

    init(timeout: TimeAmount, logger: Logger) {
        self.timeout = timeout
        self.logger = logger
    }

    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel, logger = self.logger
        deadline = context.eventLoop.scheduleTask(in: timeout) {
            logger.notice("closing a connection: its TLS handshake did not finish within the handshake timeout")
            channel.close(promise: nil)
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case TLSUserEvent.handshakeCompleted = event {
            deadline?.cancel()
            deadline = nil
            context.pipeline.syncOperations.removeHandler(context: context, promise: nil)
        }
        context.fireUserInboundEventTriggered(event)
    }
}

/// Closes a connection on errors (bad TLS, HTTP/2 protocol errors), logging the error's kind (NIO's
/// errors name the protocol violation, never header values or payloads).
final class ConnectionErrorHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = Never
    let connection: LocalAPNsConnection
    let logger: Logger

    init(connection: LocalAPNsConnection, logger: Logger) {
        self.connection = connection
        self.logger = logger
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if connection.goingAway {
            // After `goawayAfter`'s GOAWAY, NIOHTTP2 turns frames the client sent before it saw the GOAWAY into
            // errors once no stream is open (`IOOnClosedConnection`, then `RaisedGoawayLastStreamID` for its own
            // GOAWAY). Closing here could drop answers still queued for the socket: the drain closes the
            // connection once they are written (or its backstop runs out).
            logger.debug("ignoring an error on a connection going away", metadata: ["error": "\(type(of: error))"])
            return
        }
        logger.notice("closing a connection after an error", metadata: ["error": "\(type(of: error))"])
        logger.debug("connection error", metadata: ["detail": "\(error)"])
        context.close(promise: nil)
    }
}

/// One HTTP/2 stream: collects the request, answers it with the rules' answer, hands accepted pushes on.
final class APNsStreamHandler: ChannelInboundHandler {
    // HTTP/2 frames, not NIO's HTTP/1 codec: responses must be exactly APNs's (a 200 is one HEADERS frame
    // with END_STREAM; the codec adds an empty DATA frame, which aioapns reads as a JSON body and fails on),
    // and a request may carry `host` instead of `:authority` (the codec requires `:authority`).
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    let rules: LocalAPNsRules
    let connection: LocalAPNsConnection
    let load: RequestLoad
    let logger: Logger
    let onAccepted: @Sendable (AcceptedPush) -> Void
    let requestTimeout: TimeAmount
    var requestHeaders: HPACKHeaders?
    var body: [UInt8] = []
    var answered = false
    var deadline: Scheduled<Void>?
    /// This stream's id (every stream the server accepts has one from the start).
    var streamID: Int?
    /// Whether the connection was told this stream is done (answered, refused or ended): exactly once.
    var ended = false
    /// Bodies are kept up to one byte over the limit: enough to answer PayloadTooLarge.
    static let keepLimit = APNsPush.maximumPayloadSize + 1

    init(rules: LocalAPNsRules, connection: LocalAPNsConnection, load: RequestLoad, requestTimeout: TimeAmount, logger: Logger,
         onAccepted: @escaping @Sendable (AcceptedPush) -> Void) {
        self.rules = rules
        self.connection = connection
        self.load = load
        self.requestTimeout = requestTimeout
        self.logger = logger
        self.onAccepted = onAccepted
    }

    /// Every response says what answered it: a development server, never Apple's.
    static let serverHeader = ("server", "sealedpush-local-apns (development only; not Apple's APNs)")

    /// The request must be complete within `requestTimeout`, else the stream is reset.
    func handlerAdded(context: ChannelHandlerContext) {
        let channel = context.channel, logger = self.logger
        deadline = context.eventLoop.scheduleTask(in: requestTimeout) {
            logger.notice("resetting a stream: the request did not arrive within the request timeout")
            channel.close(promise: nil)
        }
        // Known now for a stream the client opened; the connection tracks it until it is answered, so that a
        // GOAWAY's drain knows which streams it still waits for.
        if let id = try? context.channel.syncOptions?.getOption(HTTP2StreamChannelOptions.streamID) {
            streamID = Int(id)
            connection.streamOpened(Int(id))
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        deadline?.cancel()
        deadline = nil
        // Reset or cut before an answer was written: nothing will come for it. (An answer on its way ends the
        // stream once written, in `respond`.)
        if !answered { end(context.channel) }
    }

    /// A promise for the stream's last write: once it is on the socket (or failed), the stream is done (`end`).
    func endOnceWritten(_ stream: any Channel) -> EventLoopPromise<Void> {
        let promise = stream.eventLoop.makePromise(of: Void.self)
        let loopBound = NIOLoopBound(self, eventLoop: stream.eventLoop)
        promise.futureResult.whenComplete { _ in loopBound.value.end(stream) }
        return promise
    }

    /// Tells the connection this stream is done; closes the connection when it is the last stream its GOAWAY
    /// still waited for.
    func end(_ stream: any Channel) {
        guard !ended, let streamID else { return }
        ended = true
        if connection.streamEnded(streamID) { stream.parent?.close(promise: nil) }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var ended = false
        switch unwrapInboundIn(data) {
        case let .headers(frame):
            if requestHeaders == nil { requestHeaders = frame.headers }  // a second block would be trailers
            ended = frame.endStream
        case let .data(frame):
            if case var .byteBuffer(buffer) = frame.data {
                let room = APNsStreamHandler.keepLimit - body.count
                if room > 0, let bytes = buffer.readBytes(length: min(room, buffer.readableBytes)) { body += bytes }
            }
            ended = frame.endStream
        default:
            break
        }
        if ended, !answered, let requestHeaders {
            answered = true
            deadline?.cancel()
            deadline = nil
            respond(context: context, headers: requestHeaders)
        }
    }

    /// A stream-level error: logged by kind, the stream reset.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        logger.notice("resetting a stream after an error", metadata: ["error": "\(type(of: error))"])
        logger.debug("stream error", metadata: ["detail": "\(error)"])
        context.close(promise: nil)
    }

    func respond(context: ChannelHandlerContext, headers requestHeaders: HPACKHeaders) {
        let configuration = rules.configuration
        let channel = context.channel
        // Every stream processed goes through `admit`; one without an id (never on a server) is not counted.
        let admission = streamID.map { connection.admit($0, goawayAfter: configuration.goawayAfter) } ?? .process(goawayLastStreamID: nil)
        switch admission {
        case .refuse:
            // Above the GOAWAY's last stream id: not processed. REFUSED_STREAM tells the client so (RFC 9113
            // §8.7), and it sends the push again on another connection.
            context.writeAndFlush(wrapOutboundOut(.rstStream(.refusedStream)), promise: endOnceWritten(channel))
            return
        case let .process(goawayLastStreamID?):
            APNsStreamHandler.goAway(channel, lastStreamID: goawayLastStreamID, backstop: requestTimeout + TimeAmount(configuration.latency) + .seconds(1))
        case .process(nil):
            break
        }
        load.begin()
        let request = LocalAPNsRequest(
            method: requestHeaders.first(name: ":method") ?? "", path: requestHeaders.first(name: ":path") ?? "",
            headers: requestHeaders.filter { !$0.name.hasPrefix(":") }.map { (name: $0.name.lowercased(), value: $0.value) },
            body: body)
        let answer = rules.answer(request, on: connection)
        var headers: [(String, String)] = []
        var responseBody: ByteBuffer?
        let token = request.path.split(separator: "/").last.map { String($0.prefix(8)) + "…" } ?? "-"
        switch answer {
        case let .accepted(push, uniqueID):
            headers = [(":status", "200"), ("apns-id", push.apnsID), ("apns-unique-id", uniqueID), APNsStreamHandler.serverHeader]
            logger.info("accepted", metadata: ["token": "\(token)", "apns-id": "\(push.apnsID)", "bytes": "\(push.payload.count)"])
        case let .rejected(reason, apnsID, timestamp):
            headers = [(":status", String(reason.status)), APNsStreamHandler.serverHeader]
            if let apnsID { headers.append(("apns-id", apnsID)) }
            var json = #"{"reason":""# + reason.rawValue + #"""#
            if let timestamp { json += #","timestamp":"# + String(timestamp) }
            json += "}"
            headers.append(("content-type", "application/json"))
            responseBody = context.channel.allocator.buffer(string: json)
            headers.append(("content-length", String(json.utf8.count)))
            logger.info("rejected", metadata: ["token": "\(token)", "status": "\(reason.status)", "reason": "\(reason.rawValue)"])
        }
        // Ids differ on every answer: sent without indexing, so they do not churn the client's HPACK table.
        var responseHeaders = HPACKHeaders()
        for (name, value) in headers {
            responseHeaders.add(name: name, value: value, indexing: name == "apns-id" || name == "apns-unique-id" ? .nonIndexable : .indexable)
        }
        let send = { (context: ChannelHandlerContext) in
            // The stream is done once its answer is on the socket (or failed to get there): a GOAWAY's drain
            // must not close the connection while an answer is still queued.
            let written = self.endOnceWritten(channel)
            if let responseBody {
                context.write(self.wrapOutboundOut(.headers(.init(headers: responseHeaders))), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.data(.init(data: .byteBuffer(responseBody), endStream: true))), promise: written)
            } else {
                context.writeAndFlush(self.wrapOutboundOut(.headers(.init(headers: responseHeaders, endStream: true))), promise: written)
            }
            self.load.end()
            if case let .accepted(push, _) = answer, self.rules.reachesPhone(push) { self.onAccepted(push) }
        }
        if configuration.latency > .zero {
            let loopBound = NIOLoopBound((context, send), eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: TimeAmount(configuration.latency)) {
                let (context, send) = loopBound.value
                send(context)
            }
        } else {
            send(context)
        }
    }

    /// Sends GOAWAY (NO_ERROR, `lastStreamID`) on the stream's connection: streams above it are never processed
    /// (the client sends them again elsewhere), streams at or below it are all answered, and the connection
    /// closes once the last of those is (`end`). `backstop` bounds the drain: by then every stream at or below
    /// it was answered or reset by its request timeout, so whatever is still open is closed with the connection.
    static func goAway(_ stream: any Channel, lastStreamID: Int, backstop: TimeAmount) {
        guard let parent = stream.parent else { return }
        let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: HTTP2StreamID(lastStreamID), errorCode: .noError, opaqueData: nil))
        parent.writeAndFlush(frame, promise: nil)
        let drainEnd = parent.eventLoop.scheduleTask(in: backstop) { parent.close(promise: nil) }
        parent.closeFuture.whenComplete { _ in drainEnd.cancel() }
    }
}
