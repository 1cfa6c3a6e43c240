import Foundation
import SealedPushAPNsServer
import SealedPushKeychain
import SealedPushServerCLI
import SealedPushTestSupport
import Testing

/// `apns serve`'s per-device line keeps at most its capacity of waiting pushes, the newest.
@Suite("apns serve: a device's waiting pushes are bounded")
struct DeviceLineTests {
    @Test func pastTheCapacityTheOldestWaitingPushIsDropped() async throws {
        let directory = try makeScratchDirectory("device-line")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = try KeychainStore(url: directory.appendingPathComponent("phone"))
        let line = DeviceLine(token: String(repeating: "ab", count: 32), store: store, capacity: 3)
        for n in 0..<10 {
            line.enqueue(AcceptedPush(deviceToken: String(repeating: "ab", count: 32), topic: "t", payload: [UInt8(n)],
                                      apnsID: UUID().uuidString.lowercased(), expiration: 0, collapseID: nil, deviceKnown: true))
        }
        line.finish()
        var kept: [UInt8] = []
        for await push in line.stream { kept += push.payload }
        #expect(kept == [7, 8, 9])
    }
}
