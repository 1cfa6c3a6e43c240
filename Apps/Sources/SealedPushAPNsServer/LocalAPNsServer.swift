public import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import SealedPushAPNsCore
import Synchronization

/// A local APNs for development and tests: HTTP/2 over TLS (ALPN `h2`) on swift-nio-http2, with APNs's
/// checks (`LocalAPNsRules`), its status codes and reasons, and faults on request. Accepted pushes go to
/// `onAccepted`, which `sealedpush apns serve` wires to simulated devices.
public final class LocalAPNsServer: Sendable {
    /// The rules every request goes through (also: unregister tokens, read counts).
    public let rules: LocalAPNsRules
    /// The TLS identity; clients trust `authority.caPEM`.
    public let authority: LocalCertificateAuthority
    let onAccepted: @Sendable (AcceptedPush) -> Void
    let logger: Logger
    let channel = Mutex<(any Channel)?>(nil)
    let connectionCount = Atomic<Int>(0)
    let load = RequestLoad()

    /// A server with `configuration`; `onAccepted` receives every accepted push after it was answered.
    public init(configuration: LocalAPNsConfiguration, authority: LocalCertificateAuthority,
                logger: Logger = Logger(label: "sealedpush.apns-serve"),
                onAccepted: @escaping @Sendable (AcceptedPush) -> Void = { _ in }) {
        rules = LocalAPNsRules(configuration: configuration)
        self.authority = authority
        self.onAccepted = onAccepted
        self.logger = logger
    }

    /// How many TLS connections clients have opened so far.
    public var connectionsAccepted: Int { connectionCount.load(ordering: .relaxed) }

    /// The most requests that were being answered at once (from a complete request to its response).
    public var peakConcurrentRequests: Int { load.peak }

    /// Binds and starts serving; returns the port (useful with port 0).
    public func start() async throws -> Int {
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
        let rules = self.rules, logger = self.logger, onAccepted = self.onAccepted, load = self.load
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { [self] channel in
                self.connectionCount.add(1, ordering: .relaxed)
                let connection = LocalAPNsConnection()
                return channel.eventLoop.makeCompletedFuture {
                    let sync = channel.pipeline.syncOperations
                    try sync.addHandler(NIOSSLServerHandler(context: sslContext))
                    _ = try sync.configureHTTP2Pipeline(
                        mode: .server, connectionConfiguration: connectionConfiguration,
                        streamConfiguration: streamConfiguration
                    ) { stream in
                        stream.eventLoop.makeCompletedFuture {
                            let streamSync = stream.pipeline.syncOperations
                            try streamSync.addHandler(APNsStreamHandler(rules: rules, connection: connection, load: load,
                                                                        logger: logger, onAccepted: onAccepted))
                        }
                    }
                    try sync.addHandler(ConnectionErrorHandler(logger: logger))
                }
            }
        let bound = try await bootstrap.bind(host: configuration.host, port: configuration.port).get()
        channel.withLock { $0 = bound }
        return bound.localAddress?.port ?? configuration.port
    }

    /// Stops listening and closes the listening socket.
    public func stop() async {
        let bound = channel.withLock { c -> (any Channel)? in
            defer { c = nil }
            return c
        }
        try? await bound?.close()
    }
}

/// Requests being answered now, and the most at once.
final class RequestLoad: Sendable {
    let state = Mutex((current: 0, peak: 0))

    var peak: Int { state.withLock { $0.peak } }

    func begin() {
        state.withLock { s in
            s.current += 1
            s.peak = max(s.peak, s.current)
        }
    }

    func end() { state.withLock { $0.current -= 1 } }
}

/// Closes a connection on errors (bad TLS, HTTP/2 protocol errors), logging the error's kind (NIO's
/// errors name the protocol violation, never header values or payloads).
final class ConnectionErrorHandler: ChannelInboundHandler, Sendable {
    typealias InboundIn = Never
    let logger: Logger

    init(logger: Logger) { self.logger = logger }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
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
    var requestHeaders: HPACKHeaders?
    var body: [UInt8] = []
    var answered = false
    /// Bodies are kept up to one byte over the limit: enough to answer PayloadTooLarge.
    static let keepLimit = APNsPush.maximumPayloadSize + 1

    init(rules: LocalAPNsRules, connection: LocalAPNsConnection, load: RequestLoad, logger: Logger,
         onAccepted: @escaping @Sendable (AcceptedPush) -> Void) {
        self.rules = rules
        self.connection = connection
        self.load = load
        self.logger = logger
        self.onAccepted = onAccepted
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
        // After GOAWAY the connection takes no new work: the stream is reset unanswered (the push was not taken).
        let (refuse, goaway): (Bool, Bool) = connection.state.withLock { c in
            if c.goawaySent { return (true, false) }
            c.requests += 1
            if let limit = configuration.goawayAfter, c.requests >= limit {
                c.goawaySent = true
                return (false, true)
            }
            return (false, false)
        }
        if refuse {
            context.close(promise: nil)
            return
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
            headers = [(":status", "200"), ("apns-id", push.apnsID), ("apns-unique-id", uniqueID)]
            logger.info("accepted", metadata: ["token": "\(token)", "apns-id": "\(push.apnsID)", "bytes": "\(push.payload.count)"])
        case let .rejected(reason, apnsID, timestamp):
            headers = [(":status", String(reason.status))]
            if let apnsID { headers.append(("apns-id", apnsID)) }
            var json = #"{"reason":""# + reason.rawValue + #"""#
            if let timestamp { json += #","timestamp":"# + String(timestamp) }
            json += "}"
            headers.append(("content-type", "application/json"))
            responseBody = context.channel.allocator.buffer(string: json)
            headers.append(("content-length", String(json.utf8.count)))
            logger.info("rejected", metadata: ["token": "\(token)", "status": "\(reason.status)", "reason": "\(reason.rawValue)"])
        }
        let responseHeaders = HPACKHeaders(headers)
        let send = { (context: ChannelHandlerContext) in
            if let responseBody {
                context.write(self.wrapOutboundOut(.headers(.init(headers: responseHeaders))), promise: nil)
                context.writeAndFlush(self.wrapOutboundOut(.data(.init(data: .byteBuffer(responseBody), endStream: true))), promise: nil)
            } else {
                context.writeAndFlush(self.wrapOutboundOut(.headers(.init(headers: responseHeaders, endStream: true))), promise: nil)
            }
            self.load.end()
            if case let .accepted(push, _) = answer { self.onAccepted(push) }
            if goaway { APNsStreamHandler.goAway(context.channel) }
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

    /// Sends GOAWAY (NO_ERROR, last stream = this stream) on the stream's connection and closes it shortly
    /// after, so requests on later streams are never processed and the client must send them again.
    static func goAway(_ stream: any Channel) {
        guard let parent = stream.parent else { return }
        stream.getOption(HTTP2StreamChannelOptions.streamID).whenSuccess { streamID in
            let frame = HTTP2Frame(streamID: .rootStream, payload: .goAway(lastStreamID: streamID, errorCode: .noError, opaqueData: nil))
            parent.writeAndFlush(frame, promise: nil)
            parent.eventLoop.scheduleTask(in: .milliseconds(200)) { parent.close(promise: nil) }
        }
    }
}
