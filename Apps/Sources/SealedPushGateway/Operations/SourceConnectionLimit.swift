import HummingbirdCore
import NIOConcurrencyHelpers
import NIOCore

/// One listener's open connections by source address (the TCP peer), so that no one source holds more than `limit`
/// of them (`http.max_connections_per_source`): a client that opens connections and sends nothing holds only its
/// share, not the listener. The gateway's trusted proxies are exempt (their connections carry many sources).
final class SourceConnections: Sendable {
    let limit: Int
    let exempt: Set<String>
    /// Called for each connection refused (the metric).
    let onRefused: @Sendable () -> Void
    private let open = NIOLockedValueBox<[String: Int]>([:])

    init(limit: Int, exempt: Set<String>, onRefused: @escaping @Sendable () -> Void) {
        self.limit = max(1, limit)
        self.exempt = exempt
        self.onRefused = onRefused
    }

    /// Counts a new connection from `source`; false (not counted) when the source already holds `limit`.
    func admit(_ source: String) -> Bool {
        if exempt.contains(source) { return true }
        let admitted = open.withLockedValue { counts -> Bool in
            let held = counts[source, default: 0]
            guard held < limit else { return false }
            counts[source] = held + 1
            return true
        }
        if !admitted { onRefused() }
        return admitted
    }

    /// A counted connection from `source` closed.
    func release(_ source: String) {
        if exempt.contains(source) { return }
        open.withLockedValue { counts in
            let held = counts[source, default: 0] - 1
            counts[source] = held > 0 ? held : nil
        }
    }

    /// Connections open from `source` (tests).
    func held(_ source: String) -> Int { open.withLockedValue { $0[source, default: 0] } }
}

/// Closes a new connection at once when its source already holds its listener's share (`SourceConnections`), and
/// gives the share back when a counted connection closes. Sits after Hummingbird's HTTP/1 decoder, passing
/// everything through.
final class SourceConnectionLimitHandler: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPConnectionStateHandler.InboundIn
    typealias InboundOut = HTTPConnectionStateHandler.InboundIn

    let connections: SourceConnections
    private var counted: String?
    private var decided = false
    private var refused = false

    init(connections: SourceConnections) { self.connections = connections }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { decide(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        decide(context)
        context.fireChannelActive()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }  // refused: nothing it sent is read
        context.fireChannelRead(data)
    }

    func channelInactive(context: ChannelHandlerContext) {
        giveBack()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) { giveBack() }

    private func source(_ context: ChannelHandlerContext) -> String { context.channel.remoteAddress?.ipAddress ?? "unknown" }

    private func decide(_ context: ChannelHandlerContext) {
        guard !decided else { return }
        decided = true
        let source = source(context)
        if connections.admit(source) {
            if !connections.exempt.contains(source) { counted = source }
        } else {
            refused = true
            context.close(promise: nil)
        }
    }

    private func giveBack() {
        if let source = counted {
            counted = nil
            connections.release(source)
        }
    }
}
