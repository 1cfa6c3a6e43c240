import Foundation
import Testing
import SealedPushCrypto
import SealedPushKeychain
import SealedPushReceiver
import SealedPushTestSupport
import SealedPushWire

/// The README's "Using the receiver inside an iOS extension" wiring, as written there, run for real.
@Suite("README: the receiver wiring", .timeLimit(.minutes(10)))
struct ReadmeExampleTests {
    @Test("wired as the README shows, the extension decrypts a sealed payload and answers a replay with the fallback")
    func receiverWiring() async throws {
        let scratch = try makeScratchDirectory("readme")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let keychainDirectory = scratch.appendingPathComponent("keys")  // created 0700 by the store
        let record = try DeviceKeyring(root: keychainDirectory).generate()
        let payloadBytes = try TestPayloads.payload(body: TestPayloads.body(to: record.publicKey, now: WallClock.system.unixSeconds),
                                                    to: record.publicKey)
        guard case let .object(payload) = try JSON.parse(payloadBytes) else { Issue.record("payload is not an object"); return }

        // --- as in README.md ---
        let store = try KeychainStore(url: keychainDirectory, create: false)
        let keys = CachedDeviceKeyring(keyring: DeviceKeyring(store: store))
        let trust = TrustStore(store: store)
        let configuration = SecretMessageExtension.Configuration(
            keys: keys,
            policy: { () throws(OpenFailure) -> ReceiverPolicy in
                do { return try trust.receiverPolicy() } catch { throw OpenFailure(.keychainLocked, "trust settings unreadable") }
            },
            replayGuard: ReplayCache(store: store))
        // --- end ---

        for (attempt, expectedBody) in [(1, "The eagle lands at noon."), (2, "(Encrypted)")] {
            let serviceExtension = SecretMessageExtension(configuration: configuration)
            // Two notifications (two request identifiers): the second copy of the message is a replay.
            let request = NotificationRequest(identifier: "readme-\(attempt)", payload: payload)
            // --- as in README.md ---
            let delivery = await serviceExtension.delivery(for: request)  // content + outcome
            // --- end ---
            serviceExtension.serviceExtensionTimeWillExpire()  // after delivery: does nothing
            #expect(delivery.content.body == expectedBody, "delivery \(attempt)")
            #expect(delivery.outcome == (attempt == 1 ? .decrypted : .fallback(.replayed)))
        }
        #expect(keys.statistics.misses == 1 && keys.statistics.hits == 1)
    }
}
