public import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushSender
import SealedPushKeychain
import SealedPushWire
import SealedPushCrypto
import NIOConcurrencyHelpers
import SealedPushRateLimit
public import Logging
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Makes the APNs client an app's deliveries go through, for one environment (tests pass a stand-in).
public typealias APNsSenderFactory = @Sendable (GatewayAppConfiguration, APNsEnvironmentName, Logger) throws -> any APNsSending

/// One app as the running gateway holds it: its configuration, sealer, APNs clients, in-flight bound, rate
/// limiter and paused state. A reload (SIGHUP) replaces it.
final class AppRuntime: Sendable {
    let config: GatewayAppConfiguration
    let sender: NotificationSender
    let clients: [APNsEnvironmentName: any APNsSending]
    let inFlight: AsyncLimiter
    let rate: TokenBucket
    /// Why sending is paused (a credential answer), or nil while sending.
    let pausedReason = NIOLockedValueBox<String?>(nil)
    /// Queued deliveries, as last counted (max_queue).
    let queued = NIOLockedValueBox(0)
    let wake = WakeSignal()

    init(config: GatewayAppConfiguration, makeClient: APNsSenderFactory, limiterClock: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
         logger: Logger) throws(GatewayConfigurationError) {
        self.config = config
        var signer: SigningKeyPair?
        if let dir = config.senderKeychain {
            do {
                let store = try KeychainStore(url: URL(fileURLWithPath: dir), create: false)
                signer = try SenderKeyring(store: store).activeSigningKey()
            } catch {
                throw GatewayConfigurationError("/apps/\(config.id)/sender_keychain",
                                                "cannot read the active sender key of \(dir) (\(error)); check the store with `sealedpush sender list --keychain \(dir)`")
            }
        }
        do { sender = try NotificationSender(signer: signer) } catch {
            throw GatewayConfigurationError("/apps/\(config.id)", "cannot set up the sealer: \(error)")
        }
        var clients: [APNsEnvironmentName: any APNsSending] = [:]
        for environment in APNsEnvironmentName.allCases {
            do { clients[environment] = try makeClient(config, environment, logger) } catch let error as GatewayConfigurationError { throw error } catch {
                throw GatewayConfigurationError("/apps/\(config.id)/apns", "cannot set up the APNs client: \(error)")
            }
        }
        self.clients = clients
        inFlight = AsyncLimiter(limit: config.maxInFlight)
        rate = TokenBucket(perSecond: config.rateLimit, now: limiterClock)
    }

    /// Shuts down the APNs clients that are `APNsClient`s.
    func shutdown() async {
        for client in clients.values { await (client as? APNsClient)?.shutdown() }
    }

    /// The real APNs client for `environment`: token auth from the `.p8`, the configured URL and CA, no retries
    /// of its own (the gateway's queue retries, with backoff, durably), `max_in_flight` requests at once.
    static func makeAPNsClient(_ config: GatewayAppConfiguration, _ environment: APNsEnvironmentName, _ logger: Logger) throws -> any APNsSending {
        let key: APNsSigningKey
        do { key = try APNsSigningKey(p8File: config.authKeyPath, keyID: config.keyID, teamID: config.teamID) } catch {
            throw GatewayConfigurationError("/apps/\(config.id)/apns/auth_key", error.description)
        }
        let url = environment == .production ? config.productionURL : config.sandboxURL
        var trusted: [[UInt8]] = []
        if let ca = config.caCertPath, let data = FileManager.default.contents(atPath: ca) { trusted.append(Array(data)) }
        let configuration = APNsClientConfiguration(
            environment: url.map { .custom($0) } ?? (environment == .production ? .production : .sandbox),
            signingKey: key, topic: config.topic, trustedCertificatesPEM: trusted, timeout: .seconds(10),
            maxInFlight: config.maxInFlight, retry: .init(maxTries: 1))
        do { return try APNsClient(configuration: configuration, logger: logger) } catch {
            throw GatewayConfigurationError("/apps/\(config.id)/apns/ca_cert", error.description)
        }
    }
}

/// Wakes one waiting worker loop: `notify` from any task, `wait(upTo:)` from the loop (a notification that
/// comes while nobody waits is kept for the next wait).
final class WakeSignal: Sendable {
    let state = NIOLockedValueBox<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))

    func notify() {
        let waiter = state.withLockedValue { s -> CheckedContinuation<Void, Never>? in
            if let w = s.waiter {
                s.waiter = nil
                return w
            }
            s.pending = true
            return nil
        }
        waiter?.resume()
    }

    private func next() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLockedValue { s -> Bool in
                if s.pending {
                    s.pending = false
                    return true
                }
                s.waiter = c
                return false
            }
            if resumeNow { c.resume() }
        }
    }

    /// Returns when notified, after `timeout`, or when the task is cancelled.
    func wait(upTo timeout: Duration) async {
        // A notification already came: no timer, no child tasks.
        let notified = state.withLockedValue { s -> Bool in
            defer { s.pending = false }
            return s.pending
        }
        if notified { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                try? await Task.sleep(for: timeout)
                self.notify()  // also wakes `next` on cancellation; at worst one spurious wake-up later
            }
            group.addTask { await self.next() }
            await group.next()
            group.cancelAll()
            await group.waitForAll()
        }
        state.withLockedValue { $0.pending = false }
    }
}
