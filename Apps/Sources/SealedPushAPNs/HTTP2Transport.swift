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
/// - Each push is one stream, run by the connection's `PushConnectionHandler` (no child channel per stream):
///   its HEADERS and DATA are written with one flush. Streams past
///   the server's `SETTINGS_MAX_CONCURRENT_STREAMS` wait inside NIOHTTP2 until one closes.
/// - No timer per push: each connection keeps one, due at its earliest open stream's deadline. Each
///   connection sends a PING when it has been quiet for `pingInterval` and closes itself when the ack does not
///   come within `pingTimeout`.
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
        return try await connection.send(request, timeout: timeout)
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
        case let .wait(future):
            let connection = try await future.get()
            // The connection was made on its event loop and put in its slot under `state`'s lock before this
            // future completed. Taking that lock here makes the hand-over visible to ThreadSanitizer, which does
            // not see the ordering the concurrency runtime gives a resumed continuation (it reported the
            // connection's fields, written at `init`, as racing with the first `send`).
            state.withLockedValue { _ in }
            return connection
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
                // NIOHTTP2's connection handler without a stream multiplexer: the push handler after it runs the
                // streams itself, so a push costs no child channel, pipeline or handler of its own.
                // Header blocks are not re-validated per push: every value the client sends was checked when its
                // APNsPush was made (token hex, topic, collapse id without control characters, digits, a UUID),
                // and of the answer only `:status`, `apns-id` and `apns-unique-id` are read, each parsed.
                var connectionConfiguration = NIOHTTP2Handler.ConnectionConfiguration()
                connectionConfiguration.headerBlockValidation = .disabled
                try sync.addHandler(NIOHTTP2Handler(mode: .client, connectionConfiguration: connectionConfiguration,
                                                    streamConfiguration: HTTP2Transport.streamConfiguration))
                let goingAway = NIOLockedValueBox(false)
                let handler = PushConnectionHandler(goingAway: goingAway, pingInterval: configuration.pingInterval,
                                                    pingTimeout: configuration.pingTimeout)
                try sync.addHandler(handler)
                return HTTP2Connection(channel: channel, handler: handler, goingAway: goingAway)
            }.flatMapErrorThrowing { error in
                channel.close(promise: nil)
                throw error
            }
        }
    }

    /// NIOHTTP2's stream settings for a push connection, with a reset budget a client can live with.
    ///
    /// A server may answer before it has read the request body and then reset the stream with `NO_ERROR`
    /// (RFC 9113 §8.1: nginx's `return 200` does, whenever the body had not arrived yet). NIOHTTP2 counts every
    /// RST_STREAM it receives against a rapid-reset budget (200 in 30 s by default) meant for servers, whose
    /// clients open the streams; past it, it ends the connection with GOAWAY `ENHANCE_YOUR_CALM`, and every push
    /// in flight on it failed and was sent again (issue #36: 12 % of deliveries sent twice). Here each reset
    /// closes a stream this client opened itself (a reset of a stream never opened is a connection error
    /// anyway), so the budget only needs to bound a server gone mad: 20 000 a second, well above what one
    /// connection carries (about 7 500 pushes a second over two). NIOHTTP2 keeps one slot per counted reset,
    /// hence a one-second window rather than a larger count.
    static var streamConfiguration: NIOHTTP2Handler.StreamConfiguration {
        var configuration = NIOHTTP2Handler.StreamConfiguration()
        configuration.streamResetFrameRateLimit.maximumCount = maximumResetsPerSecond
        configuration.streamResetFrameRateLimit.windowLength = .seconds(1)
        return configuration
    }

    /// How many RST_STREAM frames a server may send on one connection in a second (see `streamConfiguration`).
    static let maximumResetsPerSecond = 20_000

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

/// A push handed to a connection, not yet written.
struct PendingPush {
    let request: HTTP2PushRequest
    let deadline: NIODeadline
    let continuation: CheckedContinuation<HTTP2PushResponse, any Error>
}

/// A push on its stream: the answer as it arrives, and who waits for it.
struct OpenStream {
    let deadline: NIODeadline
    let continuation: CheckedContinuation<HTTP2PushResponse, any Error>
    var response = HTTP2PushResponse(status: 0, apnsID: nil, uniqueID: nil, body: ByteBuffer())
}

/// One HTTP/2 connection of the transport: a TLS channel whose pipeline ends in NIOHTTP2's connection handler
/// (no per-stream child channels) and a `PushConnectionHandler` that runs every stream itself.
///
/// Pushes handed over from any thread queue here; the first one into an empty queue schedules one drain on
/// the event loop, which opens a stream for every push queued by then, so many hand-offs cost one wake-up of the
/// event loop. Each push's HEADERS and DATA go out with one flush of their own: a flush shared by many pushes
/// put many streams' HEADERS ahead of their DATA, which connection flow control then released in no fixed
/// order, so a server saw the requests complete out of order (the local APNs's GOAWAY tests caught it).
final class HTTP2Connection: Sendable {
    struct Submissions {
        var queue: [PendingPush] = []
        var scheduled = false
    }

    let channel: any Channel
    let handler: NIOLoopBound<PushConnectionHandler>
    /// Set once the server sent GOAWAY or the connection closed: no new streams go here.
    let goingAway: NIOLockedValueBox<Bool>
    let submissions = NIOLockedValueBox(Submissions())

    init(channel: any Channel, handler: PushConnectionHandler, goingAway: NIOLockedValueBox<Bool>) {
        self.channel = channel
        self.handler = NIOLoopBound(handler, eventLoop: channel.eventLoop)
        self.goingAway = goingAway
    }

    var isUsable: Bool { channel.isActive && !goingAway.withLockedValue { $0 } }

    /// Sends `request` on a new stream and waits for its answer (or its failure, or `timeout`).
    func send(_ request: HTTP2PushRequest, timeout: Duration) async throws -> HTTP2PushResponse {
        let deadline = NIODeadline.now() + TimeAmount(timeout)
        return try await withCheckedThrowingContinuation { continuation in
            let push = PendingPush(request: request, deadline: deadline, continuation: continuation)
            let schedule = submissions.withLockedValue { s -> Bool in
                s.queue.append(push)
                guard !s.scheduled else { return false }
                s.scheduled = true
                return true
            }
            if schedule { channel.eventLoop.execute { self.drain() } }
        }
    }

    /// On the event loop: hands every queued push to the handler, which writes them and flushes once.
    func drain() {
        let pushes = submissions.withLockedValue { s -> [PendingPush] in
            s.scheduled = false
            defer { s.queue = [] }
            return s.queue
        }
        handler.value.start(pushes)
    }

    /// Whether `error` means the stream never reached the server's processing: refused (`REFUSED_STREAM`,
    /// which a GOAWAY's excluded streams get), opened after a GOAWAY, or written to a connection already closed.
    static func unprocessed(_ error: any Error) -> Bool {
        switch error {
        case let closed as NIOHTTP2Errors.StreamClosed: closed.errorCode == .refusedStream
        case let wrapped as NIOHTTP2Errors.StreamError: unprocessed(wrapped.baseError)
        // A write on a connection already closed: the request never left.
        case is NIOHTTP2Errors.CreatedStreamAfterGoaway, is NIOHTTP2Errors.NoStreamIDAvailable,
             is NIOHTTP2Errors.IOOnClosedConnection, is UnprocessedPush: true
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

/// Runs a connection's push streams on the event loop, without a child channel per stream: gives each push
/// the next client stream id and writes its HEADERS and DATA with one flush, collects the
/// answer from the stream's frames, and completes each push exactly once — with the answer, a failure, or its
/// deadline (one timer per connection, set for the earliest deadline, instead of one per push).
///
/// It also watches the connection: a GOAWAY marks it going away and fails the streams the server says it
/// never processed (`UnprocessedPush`); quiet time sends a PING, and a PING not acknowledged in time closes
/// the connection; a connection error closes it; a closed connection fails what is still open.
final class PushConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    static let maximumBody = 64 * 1024
    static let pingData = HTTP2PingData(withInteger: 0x5345_414c_4544_5055)  // "SEALEDPU"

    let goingAway: NIOLockedValueBox<Bool>
    let pingInterval: TimeAmount
    let pingTimeout: TimeAmount
    var context: ChannelHandlerContext?
    var closed = false
    /// The next client-initiated stream id (odd, increasing).
    var nextStreamID = 1
    var streams: [HTTP2StreamID: OpenStream] = [:]
    /// Open streams' deadlines, earliest first (pushes of one client share one timeout, so appends keep the order).
    var deadlines = CircularBuffer<(deadline: NIODeadline, stream: HTTP2StreamID)>()
    var deadlineTimer: Scheduled<Void>?
    var timerDeadline: NIODeadline?
    /// The last stream id of the server's GOAWAY: streams above it were not processed (RFC 9113 §6.8).
    var goAwayLastStreamID: HTTP2StreamID?
    var lastActivity = NIODeadline.now()
    var awaitingAck: NIODeadline?
    var pingTimer: RepeatedTask?

    init(goingAway: NIOLockedValueBox<Bool>, pingInterval: Duration, pingTimeout: Duration) {
        self.goingAway = goingAway
        self.pingInterval = TimeAmount(pingInterval)
        self.pingTimeout = TimeAmount(pingTimeout)
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        let check = min(pingInterval, pingTimeout)
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        pingTimer = context.eventLoop.scheduleRepeatedTask(initialDelay: check, delay: check) { _ in
            loopBound.value.tick()
        }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        connectionEnded()
        self.context = nil
    }

    // MARK: Streams

    /// Opens a stream for each push, in order, and writes its request: HEADERS and DATA, one flush per push.
    func start(_ pushes: [PendingPush]) {
        guard let context, !closed, goAwayLastStreamID == nil else {
            // Never written: the connection closed or is going away before these left.
            for push in pushes { push.continuation.resume(throwing: UnprocessedPush()) }
            return
        }
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        for push in pushes {
            guard nextStreamID <= Int(HTTP2StreamID.maxID) else {
                // Stream ids are used up: this connection takes no more (the transport opens another).
                goingAway.withLockedValue { $0 = true }
                push.continuation.resume(throwing: UnprocessedPush())
                continue
            }
            let id = HTTP2StreamID(nextStreamID)
            nextStreamID += 2
            streams[id] = OpenStream(deadline: push.deadline, continuation: push.continuation)
            if let last = deadlines.last, last.deadline > push.deadline {
                let index = deadlines.lastIndex(where: { $0.deadline <= push.deadline }).map { deadlines.index(after: $0) } ?? deadlines.startIndex
                deadlines.insert((push.deadline, id), at: index)
            } else {
                deadlines.append((push.deadline, id))
            }
            let headersWritten = context.eventLoop.makePromise(of: Void.self)
            headersWritten.futureResult.whenFailure { error in loopBound.value.finish(id, .failure(error)) }
            context.write(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .headers(.init(headers: push.request.headers, endStream: false)))),
                          promise: headersWritten)
            context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(push.request.body), endStream: true)))),
                                  promise: nil)
        }
        armDeadlineTimer()
    }

    /// Completes one stream's push, once; a failure of a stream the server never processed becomes `UnprocessedPush`.
    func finish(_ id: HTTP2StreamID, _ result: Result<HTTP2PushResponse, any Error>) {
        guard let push = streams.removeValue(forKey: id) else { return }
        switch result {
        case let .success(response) where response.status != 0:
            push.continuation.resume(returning: response)
        case .success:
            push.continuation.resume(throwing: HTTP2MissingStatus())
        case let .failure(error):
            let excluded = goAwayLastStreamID.map { id > $0 } ?? false
            push.continuation.resume(throwing: excluded || HTTP2Connection.unprocessed(error) ? UnprocessedPush() : error)
        }
        // Answers come mostly in order: drop the finished streams at the front of the deadline queue.
        while let first = deadlines.first, streams[first.stream] == nil { deadlines.removeFirst() }
    }

    /// Keeps one timer, due at the earliest open stream's deadline.
    func armDeadlineTimer() {
        while let first = deadlines.first, streams[first.stream] == nil { deadlines.removeFirst() }
        guard let context, let first = deadlines.first else {
            deadlineTimer?.cancel()
            deadlineTimer = nil
            timerDeadline = nil
            return
        }
        if let due = timerDeadline, due <= first.deadline { return }
        deadlineTimer?.cancel()
        timerDeadline = first.deadline
        let loopBound = NIOLoopBound(self, eventLoop: context.eventLoop)
        deadlineTimer = context.eventLoop.scheduleTask(deadline: first.deadline) { loopBound.value.deadlinesPassed() }
    }

    /// Fails every push whose deadline has passed (and resets its stream), then sets the timer for the next.
    func deadlinesPassed() {
        deadlineTimer = nil
        timerDeadline = nil
        let now = NIODeadline.now()
        var reset = false
        while let first = deadlines.first, first.deadline <= now || streams[first.stream] == nil {
            deadlines.removeFirst()
            guard streams[first.stream] != nil else { continue }
            finish(first.stream, .failure(HTTP2Deadline()))
            context?.write(wrapOutboundOut(HTTP2Frame(streamID: first.stream, payload: .rstStream(.cancel))), promise: nil)
            reset = true
        }
        if reset { context?.flush() }
        armDeadlineTimer()
    }

    // MARK: Frames and events

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        let id = frame.streamID
        switch frame.payload {
        case let .headers(headers):
            guard var push = streams[id] else { return }
            for (name, value, _) in headers.headers {
                switch name {
                case ":status": if push.response.status == 0 { push.response.status = Int(value) ?? 0 }
                case "apns-id": push.response.apnsID = value
                case "apns-unique-id": push.response.uniqueID = value
                default: break
                }
            }
            if headers.endStream {
                // The answer is complete: a RST_STREAM that follows (NO_ERROR from a server that answered before
                // reading the body, RFC 9113 §8.1) finds the stream finished and changes nothing.
                finish(id, .success(push.response))
            } else {
                streams[id] = push
            }
        case let .data(payload):
            guard var push = streams[id] else { return }
            if case var .byteBuffer(buffer) = payload.data, push.response.body.readableBytes < Self.maximumBody {
                let take = min(buffer.readableBytes, Self.maximumBody - push.response.body.readableBytes)
                if let slice = buffer.readSlice(length: take) { push.response.body.writeImmutableBuffer(slice) }
            }
            if payload.endStream {
                finish(id, .success(push.response))
            } else {
                streams[id] = push
            }
        case let .goAway(lastStreamID, _, _):
            goingAway.withLockedValue { $0 = true }
            let last = min(goAwayLastStreamID ?? lastStreamID, lastStreamID)
            goAwayLastStreamID = last
            // The server will not process these: each is sent again elsewhere at once.
            for excluded in Array(streams.keys) where excluded > last { finish(excluded, .failure(UnprocessedPush())) }
        case let .ping(data, ack: true) where data == Self.pingData:
            awaitingAck = nil
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        lastActivity = .now()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent, streams[closed.streamID] != nil {
            // Ended without an answer: reset by the server (REFUSED_STREAM: never processed), or cut.
            finish(closed.streamID, .failure(NIOHTTP2Errors.streamClosed(streamID: closed.streamID, errorCode: closed.reason ?? .cancel)))
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if let streamError = error as? NIOHTTP2Errors.StreamError {
            // One stream's error (NIOHTTP2 has reset it): the connection goes on.
            finish(streamError.streamID, .failure(streamError.baseError))
            return
        }
        // A connection-level error ends the connection; its open streams fail when it closes.
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        connectionEnded()
        context.fireChannelInactive()
    }

    /// The connection closed: nothing more goes here, and every open stream fails (retried by the client, or
    /// sent again at once when a GOAWAY had excluded it).
    func connectionEnded() {
        guard !closed else { return }
        closed = true
        goingAway.withLockedValue { $0 = true }
        pingTimer?.cancel()
        deadlineTimer?.cancel()
        deadlineTimer = nil
        for id in Array(streams.keys) { finish(id, .failure(ChannelError.eof)) }
        deadlines.removeAll()
    }

    func tick() {
        guard let context, !closed else { return }
        let now = NIODeadline.now()
        if let due = awaitingAck {
            if now > due + pingTimeout { context.close(promise: nil) }
            return
        }
        guard now - lastActivity >= pingInterval else { return }
        awaitingAck = now
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .ping(Self.pingData, ack: false))), promise: nil)
    }
}

extension String {
    /// Whether the string is an IPv4 or IPv6 literal (no SNI is sent for those).
    var isIPAddress: Bool {
        (try? SocketAddress(ipAddress: self, port: 0)) != nil
    }
}
