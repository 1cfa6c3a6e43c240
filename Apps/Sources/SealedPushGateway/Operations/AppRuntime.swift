public import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushSender
import SealedPushKeychain
import SealedPushWire
import SealedPushCrypto
import NIOConcurrencyHelpers
import SealedPushRateLimit
import SealedPushWebPush
import SealedPushFCM
public import Logging
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Makes the APNs client an app's deliveries go through, for one environment (tests pass a stand-in).
public typealias APNsSenderFactory = @Sendable (GatewayAppConfiguration, APNsEnvironmentName, Logger) throws -> any APNsSending

/// Makes the sender of an app's FCM or Web Push service (tests pass stand-ins); nil: the real one.
typealias PlatformSenderFactory = @Sendable (GatewayAppConfiguration, PushPlatform, Logger) throws -> (any PlatformSender)?

/// One app as the running gateway holds it: its configuration, sealer, a sender and an in-flight bound per push
/// service it serves, rate limiter and paused state. A reload (SIGHUP) replaces it.
final class AppRuntime: Sendable {
    let config: GatewayAppConfiguration
    let sender: NotificationSender
    /// One per platform the app serves.
    let senders: [PushPlatform: any PlatformSender]
    /// `max_in_flight` per platform (platforms v1 §4).
    let inFlight: [PushPlatform: AsyncLimiter]
    let rate: TokenBucket
    /// Why sending to each paused platform is paused (a credential answer); a platform absent sends.
    let paused = NIOLockedValueBox<[PushPlatform: String]>([:])
    /// Queued deliveries, as last counted (max_queue).
    let queued = NIOLockedValueBox(0)
    /// Deliveries of messages sealed but not yet stored (`QueueReservation`), counted against `max_queue` too.
    let reservedQueue = NIOLockedValueBox(0)
    /// Wakes each platform's delivery loop.
    let wakes: [PushPlatform: WakeSignal] = Dictionary(uniqueKeysWithValues: PushPlatform.allCases.map { ($0, WakeSignal()) })
    /// Wakes the app's webhook loop: a new event, a finished POST.
    let webhookWake = WakeSignal()

    /// The endpoint rules of the app's Web Push section (the defaults when it has none).
    let webpushPolicy: WebPushEndpointPolicy
    /// The app's Web Push name lookups, at registration and at each new connection (platforms v1 §4.1).
    let lookups: AddressLookups
    /// The push-service origins this app's Web Push is paused at (platforms v1 §3); a reload starts afresh.
    let webpushRefusals: WebPushRefusals

    init(config: GatewayAppConfiguration, makeClient: APNsSenderFactory, makePlatformSender: PlatformSenderFactory? = nil,
         context: PlatformContext = PlatformContext(), logger: Logger) throws(GatewayConfigurationError) {
        self.config = config
        webpushPolicy = WebPushEndpointPolicy(allowPorts: config.webpush?.allowPorts ?? [], allowPrivateEndpoints: config.webpush?.allowPrivateEndpoints ?? false)
        let lookups = AddressLookups(resolver: context.resolver, limit: context.deadlines.lookupsPerApp, deadline: context.deadlines.resolve)
        self.lookups = lookups
        let refusals = WebPushRefusals()
        webpushRefusals = refusals
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
        var senders: [PushPlatform: any PlatformSender] = [:]
        if let apns = config.apns {
            var clients: [APNsEnvironmentName: any APNsSending] = [:]
            for environment in APNsEnvironmentName.allCases {
                do { clients[environment] = try makeClient(config, environment, logger) } catch let error as GatewayConfigurationError { throw error } catch {
                    throw GatewayConfigurationError("/apps/\(config.id)/apns", "cannot set up the APNs client: \(error)")
                }
            }
            senders[.apns] = APNsPlatformSender(clients: clients, topic: apns.topic)
        }
        for platform in config.platforms where platform != .apns {
            do {
                senders[platform] = try makePlatformSender?(config, platform, logger) ?? Self.makePlatformSender(config, platform, context: context, lookups: lookups, refusals: refusals, logger)
            } catch let error as GatewayConfigurationError { throw error } catch {
                throw GatewayConfigurationError("/apps/\(config.id)/\(platform.rawValue)", "cannot set up the \(platform.rawValue) sender: \(error)")
            }
        }
        self.senders = senders
        inFlight = Dictionary(uniqueKeysWithValues: senders.keys.map { ($0, AsyncLimiter(limit: config.maxInFlight)) })
        rate = TokenBucket(perSecond: config.rateLimit, clock: context.clock)
    }

    /// Shuts down every push service's connections.
    func shutdown() async {
        for sender in senders.values { await sender.shutdown() }
    }

    /// Why sending to `platform` is paused, or nil while it sends.
    func pausedReason(_ platform: PushPlatform) -> String? { paused.withLockedValue { $0[platform] } }

    /// Why the app is paused, for the readiness and the dashboard: the reason of an app that serves one platform,
    /// else each paused platform's (`fcm: PERMISSION_DENIED`); nil while every platform sends.
    var pausedSummary: String? {
        var reasons = paused.withLockedValue { $0 }
        if reasons[.webpush] == nil, case let origins = webpushRefusals.pausedOrigins, !origins.isEmpty {
            reasons[.webpush] = "credentials_paused at " + origins.joined(separator: ", ")
        }
        guard !reasons.isEmpty else { return nil }
        if senders.count == 1, let only = reasons.first { return only.value }
        return reasons.sorted { $0.key < $1.key }.map { "\($0.key.rawValue): \($0.value)" }.joined(separator: "; ")
    }

    /// Wakes every platform's delivery loop (a new message, a reload, the drain).
    func wakeAll() {
        for wake in wakes.values { wake.notify() }
    }

    /// Attempts in flight now, to every push service.
    var attemptsInFlight: Int { inFlight.values.reduce(0) { $0 + $1.held } }

    /// The real APNs client for `environment`: token auth from the `.p8`, the configured URL and CA, no retries
    /// of its own (the gateway's queue retries, with backoff, durably), `max_in_flight` requests at once.
    static func makeAPNsClient(_ config: GatewayAppConfiguration, _ environment: APNsEnvironmentName, _ logger: Logger) throws -> any APNsSending {
        guard let apns = config.apns else { throw GatewayConfigurationError("/apps/\(config.id)/apns", "is missing") }
        let key: APNsSigningKey
        // Read by the one secret-file check (opened once, checked on the open file), then parsed from its bytes.
        let pem = try GatewaySecretFile.read(apns.authKeyPath, member: "/apps/\(config.id)/apns/auth_key", what: "the .p8 key Apple issued").bytes
        do { key = try APNsSigningKey(pem: pem, keyID: apns.keyID, teamID: apns.teamID, source: apns.authKeyPath) } catch {
            throw GatewayConfigurationError("/apps/\(config.id)/apns/auth_key", error.description)
        }
        let url = environment == .production ? apns.productionURL : apns.sandboxURL
        var trusted: [[UInt8]] = []
        if let ca = apns.caCertPath, let data = FileManager.default.contents(atPath: ca) { trusted.append(Array(data)) }
        let configuration = APNsClientConfiguration(
            environment: url.map { .custom($0) } ?? (environment == .production ? .production : .sandbox),
            signingKey: key, topic: apns.topic, trustedCertificatesPEM: trusted, timeout: .seconds(10),
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

extension AppRuntime {
    /// The real sender of `platform` (FCM or Web Push) from the app's section, its keys read and checked now.
    static func makePlatformSender(_ config: GatewayAppConfiguration, _ platform: PushPlatform, context: PlatformContext,
                                   lookups: AddressLookups, refusals: WebPushRefusals, _ logger: Logger) throws -> any PlatformSender {
        switch platform {
        case .apns:
            throw GatewayConfigurationError("/apps/\(config.id)/apns", "is made by the APNs client factory")
        case .webpush:
            guard let settings = config.webpush else { throw GatewayConfigurationError("/apps/\(config.id)/webpush", "is missing") }
            let member = "/apps/\(config.id)/webpush"
            let key: VAPIDKey
            let pem = try GatewaySecretFile.read(settings.vapidKeyPath, member: member + "/vapid_key", what: "the VAPID key (P-256, PKCS#8 PEM)").bytes
            do { key = try VAPIDKey(pem: pem, source: settings.vapidKeyPath) } catch { throw GatewayConfigurationError(member + "/vapid_key", error.description) }
            let subject: VAPIDSubject
            do { subject = try VAPIDSubject(settings.subject) } catch { throw GatewayConfigurationError(member + "/subject", error.description) }
            var roots: [UInt8]?
            if let ca = settings.caCertPath {
                guard let data = FileManager.default.contents(atPath: ca) else { throw GatewayConfigurationError(member + "/ca_cert", "cannot read \(ca)") }
                roots = Array(data)
            }
            let client: PinnedHTTPSClient
            do { client = try PinnedHTTPSClient(additionalRootsPEM: roots, timeout: context.deadlines.request, connectTimeout: context.deadlines.connect) } catch {
                throw GatewayConfigurationError(member + "/ca_cert", "is not a PEM certificate; give the CA that `sealedpush-server webpush serve --ca-out` wrote")
            }
            let clock = context.clock
            return WebPushPlatformSender(policy: WebPushEndpointPolicy(allowPorts: settings.allowPorts, allowPrivateEndpoints: settings.allowPrivateEndpoints),
                                         vapid: VAPIDTokenCache(key: key, subject: subject, clock: { clock.wall().milliseconds / 1000 }),
                                         lookups: lookups, client: client, refusals: refusals)
        case .fcm:
            guard let settings = config.fcm else { throw GatewayConfigurationError("/apps/\(config.id)/fcm", "is missing") }
            let member = "/apps/\(config.id)/fcm"
            let account: FCMServiceAccount
            let json = try GatewaySecretFile.read(settings.serviceAccountPath, member: member + "/service_account",
                                                  what: "the Google service-account key file (JSON) of the Firebase project",
                                                  limit: FCMServiceAccount.maximumFileSize).bytes
            do { account = try FCMServiceAccount(json: json, source: settings.serviceAccountPath) } catch {
                throw GatewayConfigurationError(member + "/service_account", error.description)
            }
            let clock = context.clock
            do {
                let configuration = try FCMClientConfiguration(
                    serviceAccount: account, projectID: settings.projectID, url: settings.url, tokenURL: settings.tokenURL,
                    caCertificateFile: settings.caCertPath, now: { Date(timeIntervalSince1970: Double(clock.wall().milliseconds) / 1000) })
                return FCMPlatformSender(client: try FCMClient(configuration: configuration, serviceAccount: account, logger: logger))
            } catch {
                throw GatewayConfigurationError(member, error.description)
            }
        }
    }
}

/// What the real platform senders read besides an app's configuration: the gateway's clock and resolver.
struct PlatformContext: Sendable {
    /// The gateway's clock: its wall reading for VAPID and access-token lifetimes, its monotonic one for the rate limit.
    var clock: SealedPushClock = .system
    /// Resolves Web Push endpoints' hosts.
    var resolver: any GatewayAddressResolver = SystemAddressResolver()
    /// The Web Push deadlines (platforms v1 §4.1).
    var deadlines = WebPushDeadlines()
}

extension PlatformContext {
    /// The context of the gateway's `options`.
    init(options: GatewayOptions) {
        self.init(clock: options.clock, resolver: options.addressResolver, deadlines: options.webPushDeadlines)
    }
}

/// A message's place in its app's `max_queue`, taken before it is sealed and given back when it is dropped: a stored
/// message's deliveries are counted in `queued` by then, a refused one's are free again. Concurrent messages, and
/// the messages of one batch, each see the others' reservations.
final class QueueReservation: Sendable {
    let app: AppRuntime
    let count: Int

    /// Reserves `count` deliveries; nil when the queue, its reservations and these would exceed `max_queue`.
    init?(app: AppRuntime, count: Int) {
        let queued = app.queued.withLockedValue { $0 }
        let fits = app.reservedQueue.withLockedValue { reserved -> Bool in
            guard queued + reserved + count <= app.config.maxQueue else { return false }
            reserved += count
            return true
        }
        guard fits else { return nil }
        self.app = app
        self.count = count
    }

    deinit { app.reservedQueue.withLockedValue { $0 -= count } }
}
