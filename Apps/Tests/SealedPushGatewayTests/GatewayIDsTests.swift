import Testing
@testable import SealedPushGateway

/// The gateway's ids: the time first (so new rows land at one end of each index), then random bytes.
@Suite struct GatewayIDsTests {
    @Test func formats() {
        let now: Int64 = 1_795_000_000_123
        let message = GatewayIDs.message(now: now)
        #expect(message.utf8.count == 26)
        #expect(message.hasPrefix(GatewayIDs.timeHex(now)))
        #expect(message.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F })
        let delivery = GatewayIDs.delivery(now: now)
        #expect(delivery.hasPrefix("d_" + GatewayIDs.timeHex(now)) && delivery.utf8.count == 28)
        let event = GatewayIDs.event(now: now)
        #expect(event.utf8.count == 36 && event.hasPrefix("evt_" + GatewayIDs.timeHex(now)))
        #expect(event.utf8.dropFirst(4).allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) })
    }

    @Test func timePrefixReadsBackAndSorts() {
        #expect(GatewayIDs.timeHex(0) == "000000000000")
        #expect(GatewayIDs.timeHex(1_795_000_000_123) == String(1_795_000_000_123, radix: 16).leftPadded(to: 12))
        // Later times sort after earlier ones, across digit carries.
        let times: [Int64] = [0, 15, 16, 255, 256, 1_795_000_000_000, 1_795_000_000_001, 0xFFFF_FFFF_FFFF]
        let prefixes = times.map(GatewayIDs.timeHex)
        #expect(prefixes == prefixes.sorted())
        #expect(Set(prefixes).count == times.count)
    }

    @Test func randomPartsDiffer() {
        let ids = (0..<2000).map { _ in GatewayIDs.message(now: 42) }
        #expect(Set(ids).count == ids.count)
        let events = (0..<2000).map { _ in GatewayIDs.event(now: 42) }
        #expect(Set(events).count == events.count)
    }
}

private extension String {
    func leftPadded(to count: Int) -> String { String(repeating: "0", count: max(0, count - utf8.count)) + self }
}
