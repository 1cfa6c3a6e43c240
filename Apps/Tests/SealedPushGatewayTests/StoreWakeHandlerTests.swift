import NIOConcurrencyHelpers
@testable import SealedPushGateway
import Testing

/// The store's wake-up handler is called as it was set, however many wake-ups came before. Its closure once sat
/// bare in a lock box and was re-stored through `withLockedValue`'s generic `inout` at every announcement, each
/// time wrapped in two more reabstraction thunks: on SQLite, an announcement per webhook event made the call
/// chain grow without end (3 476 thunks deep after 8 s of load, 28 % of the gateway's CPU, and in time a stack
/// overflow). Measured here as the stack depth inside the handler, which must not change.
@Suite("Store wake-ups: the handler is not re-wrapped by announcing")
struct StoreWakeHandlerTests {
    @Test func theHandlersStackDepthDoesNotGrowWithAnnouncements() {
        let wakes = StoreWakeHandler()
        let base = NIOLockedValueBox(0)
        let depths = NIOLockedValueBox<[Int]>([])
        wakes.set { _ in
            var inner = 0
            let here = withUnsafeMutablePointer(to: &inner) { Int(bitPattern: $0) }
            depths.withLockedValue { $0.append(base.withLockedValue { $0 } - here) }
        }
        for n in 0..<2_000 {
            var outer = n
            base.withLockedValue { b in b = withUnsafeMutablePointer(to: &outer) { Int(bitPattern: $0) } }
            wakes.announce(n % 2 == 0 ? .events(app: "chat") : .deliveries(app: "chat"))
        }
        let seen = depths.withLockedValue { $0 }
        #expect(seen.count == 2_000)
        #expect(seen.first == seen.last, "the handler ran \(seen.first ?? 0) bytes below the first announcement and \(seen.last ?? 0) below the last")
    }
}
