import HummingbirdCore
import NIOCore

/// Closes an HTTP/1 connection whose client is too slow (slowloris): the request head must be complete within
/// `headerTimeout` of the connection's opening, the body within `bodyTimeout` of the head, and the next request
/// head within `idleTimeout` of the previous answer's end. While the gateway works on a request (its body read,
/// its answer not yet written) no deadline runs. Sits after Hummingbird's HTTP/1 decoder (`additionalChannelHandlers`).
final class RequestDeadlineHandler: ChannelDuplexHandler, RemovableChannelHandler {
    // NIOHTTPTypes' request and response parts, named through Hummingbird's connection handler.
    typealias InboundIn = HTTPConnectionStateHandler.InboundIn
    typealias InboundOut = HTTPConnectionStateHandler.InboundIn
    typealias OutboundIn = HTTPConnectionStateHandler.OutboundIn
    typealias OutboundOut = HTTPConnectionStateHandler.OutboundIn

    let limits: GatewayConfiguration.HTTPLimits
    private var deadline: Scheduled<Void>?

    init(limits: GatewayConfiguration.HTTPLimits) { self.limits = limits }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, limits.headerTimeout) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if deadline == nil { arm(context, limits.headerTimeout) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { disarm() }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: arm(context, limits.bodyTimeout)
        case .body: break
        case .end: disarm()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { arm(context, limits.idleTimeout) }
        context.write(data, promise: promise)
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: Duration) {
        disarm()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: TimeAmount(timeout)) { channel.close(promise: nil) }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}
