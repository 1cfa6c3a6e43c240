public import ServiceLifecycle
/// What the gateway keeps about one device (gateway v1 §4). Times are Unix milliseconds.
public struct DeviceRecord: Sendable, Equatable {
    /// The app the device belongs to.
    public var app: String
    /// The backend's id for the device.
    public var deviceID: String
    /// The user the device belongs to.
    public var userID: String
    /// Where its push service reaches it: the APNs device token (lowercase hex), the FCM registration token, or
    /// the Web Push endpoint (a capability URL: never logged, listed or returned whole).
    public var address: String
    /// `production` or `sandbox` for `apns`; `production` for the other platforms, which have none.
    public var environment: APNsEnvironmentName
    /// The device's key record as registered (compact JSON).
    public var keyRecord: [UInt8]
    /// The key id of that record (16 hex).
    public var keyID: String
    /// `active` or `unregistered`.
    public var state: DeviceState
    /// When the device was first registered.
    public var createdAt: Int64
    /// When anything about it last changed.
    public var updatedAt: Int64
    /// When its token was last registered (the 410 timestamp rule compares against it).
    public var registeredAt: Int64
    /// When APNs said the token is gone, if it did.
    public var unregisteredAt: Int64?
    /// APNs's reason for that.
    public var unregisteredReason: String?
    /// Whether its last registration took the token from another device (which was deleted).
    public var tokenReassigned: Bool
    /// The latest failure report for its key.
    public var lastReport: FailureReportSummary?
    /// Its push service (platforms v1 §1).
    public var platform: PushPlatform
    /// For `webpush`, the subscription's keys the message is encrypted to.
    public var webpushKeys: StoredWebPushKeys?

    /// A device record from its parts.
    public init(app: String, deviceID: String, userID: String, address: String, environment: APNsEnvironmentName, keyRecord: [UInt8],
                keyID: String, state: DeviceState, createdAt: Int64, updatedAt: Int64, registeredAt: Int64, unregisteredAt: Int64?,
                unregisteredReason: String?, tokenReassigned: Bool, lastReport: FailureReportSummary?,
                platform: PushPlatform = .apns, webpushKeys: StoredWebPushKeys? = nil) {
        self.platform = platform
        self.webpushKeys = webpushKeys
        self.app = app
        self.deviceID = deviceID
        self.userID = userID
        self.address = address
        self.environment = environment
        self.keyRecord = keyRecord
        self.keyID = keyID
        self.state = state
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.registeredAt = registeredAt
        self.unregisteredAt = unregisteredAt
        self.unregisteredReason = unregisteredReason
        self.tokenReassigned = tokenReassigned
        self.lastReport = lastReport
    }
}

/// `production` or `sandbox`: which APNs a device's token belongs to.
public enum APNsEnvironmentName: String, Sendable, Equatable, CaseIterable {
    /// Apps from the App Store, TestFlight or an ad hoc build.
    case production
    /// Apps built for development.
    case sandbox
}

/// Whether a device is sent to.
public enum DeviceState: String, Sendable, Equatable {
    /// Messages are delivered to it.
    case active
    /// Its push service said its address is gone; sends skip it until it registers again.
    case unregistered
}

/// A device's latest failure report (receipts v1 §3): a signal, never proof.
public struct FailureReportSummary: Sendable, Equatable {
    /// The reason code the device reported.
    public var reason: String
    /// The envelope key id the failing message was sealed to (16 hex), if it could be read.
    public var kid: String?
    /// How many failures it stands for.
    public var count: Int
    /// When it arrived (Unix milliseconds).
    public var at: Int64
}

/// A delivery's state (gateway v1 §5): states only move forward.
public enum DeliveryState: String, Sendable, Equatable, CaseIterable {
    /// Waiting for its (next) attempt.
    case queued
    /// APNs answered 200.
    case accepted
    /// Its sealed message was first fetched by its handle (mailbox v1 §3): between `accepted` and `delivered`.
    case fetched
    /// The device's receipt arrived.
    case delivered
    /// APNs refused it for good.
    case rejected
    /// APNs said the token is gone.
    case unregistered
    /// Its ttl ran out before APNs accepted it.
    case expired
    /// Its device or message was deleted, or its token reassigned, before it was sent.
    case cancelled

    /// Whether nothing moves it any more.
    public var isFinal: Bool {
        switch self {
        case .queued, .accepted, .fetched: false
        default: true
        }
    }
}

/// One delivery: a message sealed to one device, and where it stands.
public struct DeliveryRecord: Sendable, Equatable {
    /// The delivery's id.
    public var deliveryID: String
    /// The app.
    public var app: String
    /// The message it belongs to (the wire message id).
    public var messageID: String
    /// The device it goes to.
    public var deviceID: String
    /// Where it stands.
    public var state: DeliveryState
    /// APNs requests made for it so far.
    public var attempts: Int
    /// The `apns-id` drawn once and sent on every attempt.
    public var apnsID: String
    /// The last APNs status, if any.
    public var apnsStatus: Int?
    /// APNs's reason or the gateway's.
    public var reason: String?
    /// Times (Unix milliseconds).
    public var createdAt: Int64
    /// When it last changed.
    public var updatedAt: Int64
    /// When it is tried next (queued only).
    public var nextAttemptAt: Int64?
    /// When APNs accepted it.
    public var acceptedAt: Int64?
    /// When its receipt arrived.
    public var deliveredAt: Int64?
    /// When its `revealed` receipt arrived (reveal v1 §8), if one did.
    public var revealedAt: Int64? = nil
    /// Grows with each change.
    public var seq: Int64
    /// The push service it goes through (platforms v1 §4).
    public var platform: PushPlatform = .apns
    /// The push service's id for it once accepted: FCM's message `name`, a Web Push `Location` (nil for `apns`,
    /// whose `apns_id` is drawn before sending).
    public var platformID: String? = nil
    /// Whether a request to APNs has been sent for it (its apns-id is then public).
    public var sentOnce: Bool { attempts > 0 }
}

/// A delivery claimed for an attempt: what the worker needs to send it, under a lease generation.
public struct ClaimedDelivery: Sendable {
    /// The delivery's id.
    public var deliveryID: String
    /// The app.
    public var app: String
    /// The device it goes to.
    public var deviceID: String
    /// The token and environment it was sealed for.
    public var address: String
    /// `production` or `sandbox`.
    public var environment: APNsEnvironmentName
    /// The whole APNs payload (sealed; no plaintext).
    public var payload: [UInt8]
    /// `apns-priority`.
    public var priority: Int
    /// `apns-collapse-id`.
    public var collapseID: String
    /// `apns-expiration` (0 for ttl 0).
    public var apnsExpiration: Int64
    /// The last instant it may be sent (Unix milliseconds).
    public var expiresAt: Int64
    /// The `apns-id`.
    public var apnsID: String
    /// Attempts before this one.
    public var attempts: Int
    /// The lease this claim holds: an outcome is written only under it.
    public var generation: Int64
    /// The push service it goes through: `payload` is the APNs payload for `apns`, the envelope's bytes for
    /// `fcm`, and the RFC 8291 body for `webpush`.
    public var platform: PushPlatform = .apns
}

/// What one attempt came to, as the worker writes it.
public enum AttemptOutcome: Sendable, Equatable {
    /// The push service took it (APNs 200, FCM 200, Web Push 201); `platformID` is its id for the message, if it gave one.
    case accepted(status: Int, platformID: String? = nil)
    /// Try again at `at` (Unix milliseconds); `status` and `reason` are the last answer's, if any.
    case retry(at: Int64, status: Int?, reason: String)
    /// Nothing more to do: `state` is final (`rejected`, `unregistered`, `expired`); `attempted` says whether a
    /// request was made (an expiry found before sending is not an attempt).
    case final(DeliveryState, status: Int?, reason: String, attempted: Bool)
    /// The app's credentials were refused: back to the queue, not counted, until the app is fixed.
    case paused(status: Int?, reason: String)
    /// Not attempted and not counted: due again at `until` (Unix milliseconds), `reason` recorded (a Web Push
    /// origin paused by its subscriptions' refusals, platforms v1 §3).
    case held(until: Int64, reason: String)
    /// The attempt was not made (shutdown): hand the delivery back untouched.
    case handBack
}

/// A new message's rows, written in one transaction before the gateway answers 202.
public struct NewMessage: Sendable {
    /// The app.
    public var app: String
    /// The wire message id.
    public var messageID: String
    /// When it was accepted (Unix milliseconds).
    public var createdAt: Int64
    /// When it expires (Unix milliseconds).
    public var expiresAt: Int64
    /// One per device.
    public var deliveries: [NewDelivery]
}

/// A new delivery's row.
public struct NewDelivery: Sendable {
    /// Its id.
    public var deliveryID: String
    /// Its device, the token and environment it goes to.
    public var deviceID: String
    /// The device's token.
    public var address: String
    /// The device's environment.
    public var environment: APNsEnvironmentName
    /// The sealed APNs payload.
    public var payload: [UInt8]
    /// SHA-256 of the receipt token sealed into it, if it asks for one.
    public var receiptTokenSHA256: [UInt8]?
    /// `apns-priority`.
    public var priority: Int
    /// `apns-collapse-id`.
    public var collapseID: String
    /// `apns-expiration`.
    public var apnsExpiration: Int64
    /// `apns-id`.
    public var apnsID: String
    /// The push service it goes through (the payload is that platform's: see `ClaimedDelivery.platform`).
    public var platform: PushPlatform = .apns
    /// In mailbox mode (mailbox v1), its envelope and handle's hash, kept apart from the push (whose payload then
    /// carries only the handle); nil in push mode.
    public var mailbox: NewMailboxEntry? = nil
}

/// An idempotency key's stored answer (gateway v1 §5).
public struct IdempotentAnswer: Sendable, Equatable {
    /// HMAC-SHA-256 of the request's canonical JSON.
    public var bodyHMAC: [UInt8]
    /// The status answered.
    public var status: Int
    /// The body answered.
    public var body: [UInt8]
    /// When it was first answered (Unix milliseconds).
    public var createdAt: Int64
}

/// What a receipt came to.
public enum ReceiptResult: Sendable, Equatable {
    /// The token names a delivery: it is `delivered` now (`changed` is false for a repeat or a final state); `platform`
    /// is the push service the delivery went through.
    case matched(app: String, changed: Bool, platform: PushPlatform = .apns)
    /// No delivery of that message id.
    case unknownID
    /// The message exists but no delivery of it has that token.
    case wrongToken
}

/// Why a device cannot be registered.
public enum DeviceRegistrationRefusal: Error, Sendable, Equatable {
    /// The user already holds the most devices an app allows.
    case tooManyDevices(limit: Int)
}

/// The queue's depth for one app.
public struct QueueDepth: Sendable, Equatable {
    /// Deliveries queued.
    public var queued: Int
    /// The oldest queued delivery's creation time (Unix milliseconds), if any.
    public var oldestCreatedAt: Int64?
}

/// Where the gateway keeps devices, messages, deliveries and idempotency keys: SQLite (one instance) or
/// PostgreSQL (several instances). Every method is one transaction.
public protocol GatewayStore: Sendable {
    /// The secret the idempotency HMAC is keyed with (made once, shared by every instance).
    func idempotencySecret() async throws -> [UInt8]
    /// Whether the database answers.
    func ping() async throws

    /// Registers or replaces a device: a token another device of the app and environment holds deletes that
    /// device (its unsent deliveries end `cancelled`, `token_reassigned`). `created` is true for a new device.
    func putDevice(_ device: DeviceRecord, maxDevicesPerUser: Int) async throws -> (device: DeviceRecord, created: Bool, cancelled: Int)
    /// One device.
    func device(app: String, deviceID: String) async throws -> DeviceRecord?
    /// Deletes a device; its unsent deliveries end `cancelled` (`device_deleted`): how many, or nil when the device is unknown.
    func deleteDevice(app: String, deviceID: String, now: Int64) async throws -> Int?
    /// A user's devices, in (updated_at, device_id) order.
    func userDevices(app: String, userID: String) async throws -> [DeviceRecord]
    /// The devices of several users at once (a batch's, gateway v1 §5.1), by user id, each user's in
    /// (updated_at, device_id) order; a user without devices is absent.
    func usersDevices(app: String, userIDs: [String]) async throws -> [String: [DeviceRecord]]
    /// Whether a device was ever registered for the user.
    func userIsKnown(app: String, userID: String) async throws -> Bool
    /// Deletes every device of a user: how many, and how many unsent deliveries that cancelled.
    func deleteUserDevices(app: String, userID: String, now: Int64) async throws -> (devices: Int, cancelled: Int)
    /// Devices in (updated_at, device_id) order from `since` (inclusive) and after the cursor position.
    func listDevices(app: String, state: DeviceState?, since: Int64?, after: (Int64, String)?, limit: Int) async throws -> [DeviceRecord]
    /// The devices of `ids` that exist, in any order.
    func devices(app: String, ids: [String]) async throws -> [DeviceRecord]

    /// Writes a message and its deliveries, and the idempotency answer if any, in one transaction.
    func insertMessage(_ message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?) async throws
    /// Writes messages (a batch, gateway v1 §5.1) in one transaction, each with its deliveries and idempotency answer:
    /// for each, whether it was kept (false: another instance answered its idempotency key meanwhile, and nothing of
    /// it was written). Nothing is kept when it throws.
    func insertMessages(_ batch: [(message: NewMessage, idempotency: (key: String, answer: IdempotentAnswer)?)]) async throws -> [Bool]
    /// An idempotency key's answer, if one is kept.
    func idempotentAnswer(app: String, key: String) async throws -> IdempotentAnswer?
    /// Keeps a 4xx answer for replay.
    func storeIdempotentAnswer(app: String, key: String, answer: IdempotentAnswer) async throws
    /// A message's times and deliveries.
    func message(app: String, messageID: String) async throws -> (createdAt: Int64, expiresAt: Int64, deliveries: [DeliveryRecord])?
    /// Cancels a message's unsent deliveries (`message_deleted`): how many, or nil when the message is unknown.
    func cancelMessage(app: String, messageID: String, now: Int64) async throws -> Int?

    /// Claims up to `limit` due deliveries of `app` to `platform` under a lease until `leaseUntil`.
    func claimDue(app: String, platform: PushPlatform, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedDelivery]
    /// Writes an attempt's outcome if the lease is still the delivery's current one, as `DeliveryStateMachine`
    /// says: the state the outcome left the delivery in, or nil when it did not land (a newer lease holds the
    /// delivery, or it became final meanwhile). `unregisteredAt` is APNs's 410 timestamp (ms), for the device rule of §4.
    func completeAttempt(_ claim: ClaimedDelivery, outcome: AttemptOutcome, unregisteredAt: Int64?, now: Int64) async throws -> DeliveryState?
    /// Deletes up to `limit` messages (with their deliveries) that expired before `messagesExpiredBefore`, the
    /// idempotency answers first given before `idempotencyBefore`, and up to `limit` events written before
    /// `eventsBefore` (whatever their state); the number of messages and events deleted.
    func prune(messagesExpiredBefore: Int64, idempotencyBefore: Int64, eventsBefore: Int64, limit: Int) async throws -> Int
    /// The earliest `next_attempt_at` of a queued delivery of `app` to `platform`, if any.
    func nextDue(app: String, platform: PushPlatform) async throws -> Int64?
    /// Per-app queue depth.
    func queueDepths() async throws -> [String: QueueDepth]
    /// How many of `app`'s deliveries to `platform` are queued (the per-platform queue depth gauge).
    func queued(app: String, platform: PushPlatform) async throws -> Int

    /// Applies a receipt: the delivery of `messageID` whose token hashes to `tokenSHA256` becomes `delivered`; a
    /// `revealed` receipt (reveal v1 §8) also sets its `revealed_at` once (`delivery.revealed`).
    func recordReceipt(messageID: String, tokenSHA256: [UInt8], revealed: Bool, now: Int64) async throws -> ReceiptResult
    /// Records a failure report in `app` against its devices whose key id is `kid` (reports are unauthenticated, so a
    /// report never reaches another app's devices); `[app]` when one matched, else empty.
    func recordReport(app: String, kid: String?, reason: String, count: Int, now: Int64) async throws -> [String]
    /// Closes the database.
    func close() async

    /// The store's long-running parts (a database client, a heartbeat) as services for the gateway's `ServiceGroup`,
    /// which runs them before every other service so that they stop last; empty when the store needs none running
    /// (SQLite) or runs them itself (`PostgresGatewayStore.open`).
    var services: [any Service] { get }
    /// Waits until the store can be used (its schema migrated); returns at once for a store opened ready.
    func ready() async throws
    /// Sets where the store announces rows a worker claims (new deliveries, new events), from any task: at once
    /// on SQLite (one process), and on PostgreSQL from every instance through `LISTEN/NOTIFY`.
    func onWake(_ handler: @escaping @Sendable (StoreWake) -> Void)
    /// How many gateway instances share this store now, this one included (at least 1): each keeps
    /// `max_in_flight / liveInstances` APNs requests in flight.
    var liveInstances: Int { get }

    // MARK: Events (gateway v1 §8)
    //
    // Every state-changing method above also writes, in its own transaction, the events its change causes:
    // `GatewayEvents.delivery(_:now:)` for each delivery that moved into `accepted`, `delivered`, `rejected`,
    // `unregistered`, `expired` or `cancelled` (built from the delivery as it is after the change, `seq`
    // included), and `GatewayEvents.deviceUnregistered(_:now:)` for a device `complete` marks unregistered.
    // Events are written for every app (the listing serves apps without a webhook too) with state `pending`.

    /// Claims up to `limit` of `app`'s pending events due at `now` (oldest first) under a lease until
    /// `leaseUntil`; an event whose lease lapsed is due again.
    func claimEvents(app: String, now: Int64, leaseUntil: Int64, limit: Int) async throws -> [ClaimedEvent]
    /// Writes a webhook attempt's outcome if the claim's lease is still the event's current one; false otherwise.
    /// `acknowledged` and `dropped` are final; `retry` counts the attempt and makes the event due at `at`.
    func completeEvent(_ claim: ClaimedEvent, outcome: EventOutcome, now: Int64) async throws -> Bool
    /// `app`'s events written at or after `since`, in the order they were written, after the event `after`
    /// (exclusive; nil: from the first), at most `limit`. Nil when `after` names no event of `app` that is still kept.
    func events(app: String, after: String?, since: Int64, limit: Int) async throws -> [EventRecord]?

    // MARK: The dashboard

    /// The numbers the dashboard (on `admin_listen`) shows, for every app with rows, as of `now`.
    func dashboard(now: Int64) async throws -> DashboardSnapshot
}

extension GatewayStore {
    /// One: a store only this instance uses.
    public var liveInstances: Int { 1 }

    /// `userDevices` once per user (for stores that have no query of their own for it).
    public func usersDevices(app: String, userIDs: [String]) async throws -> [String: [DeviceRecord]] {
        var out: [String: [DeviceRecord]] = [:]
        for user in Set(userIDs) {
            let devices = try await userDevices(app: app, userID: user)
            if !devices.isEmpty { out[user] = devices }
        }
        return out
    }

    /// Writes an attempt's outcome (`completeAttempt`): whether it landed.
    public func complete(_ claim: ClaimedDelivery, outcome: AttemptOutcome, unregisteredAt: Int64?, now: Int64) async throws -> Bool {
        try await completeAttempt(claim, outcome: outcome, unregisteredAt: unregisteredAt, now: now) != nil
    }
}

/// What the dashboard shows, per app, from the store: counts only — never a token, device id, user id or body.
public struct DashboardSnapshot: Sendable, Equatable {
    /// The numbers of one app.
    public struct App: Sendable, Equatable {
        /// The app id.
        public var app: String
        /// Deliveries created in the last hour, by their current state (`DeliveryState.rawValue`).
        public var lastHour: [String: Int] = [:]
        /// Deliveries created in the last 24 hours, by their current state.
        public var lastDay: [String: Int] = [:]
        /// Deliveries created in each of the last 24 hours (index 0: the hour before `now`), by current state.
        public var hourly: [[String: Int]] = Array(repeating: [:], count: 24)
        /// Deliveries of the last 24 hours with a push service's answer, by that last answer (platform, status and reason).
        public var answers: [AnswerCount] = []
        /// Deliveries of the last 24 hours APNs accepted (`accepted_at` set).
        public var acceptedLastDay = 0
        /// Deliveries of the last 24 hours whose receipt arrived.
        public var deliveredLastDay = 0
        /// Failure reports, by reason and key id, with the time of the last one (all kept).
        public var reports: [ReportCount] = []
        /// Deliveries queued now.
        public var queued = 0
        /// The oldest queued delivery's creation time (Unix milliseconds), if any.
        public var oldestQueuedAt: Int64?
        /// Devices by state.
        public var devicesActive = 0
        /// Devices APNs said are gone.
        public var devicesUnregistered = 0
        /// Deliveries under a lease now (an attempt in flight).
        public var leasedDeliveries = 0
        /// Webhook events not yet acknowledged (nor dropped).
        public var eventsPending = 0
        /// Webhook events dropped after 24 hours without a 2xx, among those kept (7 days).
        public var eventsDropped = 0

        /// An app with no numbers yet.
        public init(app: String) { self.app = app }
    }

    /// How many deliveries last got one answer from their push service.
    public struct AnswerCount: Sendable, Equatable {
        /// The push service.
        public var platform: PushPlatform
        /// The HTTP status it answered.
        public var status: Int
        /// Its reason (empty for a success), or the gateway's (`ttl_expired`, `credentials_paused`).
        public var reason: String
        /// How many deliveries.
        public var count: Int
    }

    /// One row of failure reports (receipts v1 §3).
    public struct ReportCount: Sendable, Equatable {
        /// The reason code devices reported.
        public var reason: String
        /// The key id (16 hex) of the key the failing messages were sealed to: a public key's id, not a device's.
        public var kid: String
        /// How many failures.
        public var count: Int
        /// When the last arrived (Unix milliseconds).
        public var lastAt: Int64
    }

    /// One gateway instance and the leases it holds.
    public struct Instance: Sendable, Equatable {
        /// A name for it: `host:pid` for SQLite's single instance, `host:pid i_<instance id>` on PostgreSQL.
        public var name: String
        /// When it started (Unix milliseconds).
        public var startedAt: Int64
        /// Deliveries it holds under a lease now.
        public var leasedDeliveries: Int
        /// Events it holds under a lease now.
        public var leasedEvents: Int
    }

    /// Per app, by app id.
    public var apps: [String: App]
    /// The live instances (SQLite: this one; PostgreSQL: every instance whose row was renewed within three heartbeats).
    public var instances: [Instance]
    /// When the numbers were taken (Unix milliseconds).
    public var takenAt: Int64

    /// A snapshot from its parts.
    public init(apps: [String: App], instances: [Instance], takenAt: Int64) {
        self.apps = apps
        self.instances = instances
        self.takenAt = takenAt
    }
}

extension DeviceRecord {
    /// The row a registration writes: this record made active again, keeping the first registration's
    /// creation time and a last report of the same key id, and saying whether its token was taken from
    /// another device (the same in every store).
    func registered(over existing: DeviceRecord?, tokenReassigned: Bool) -> DeviceRecord {
        var stored = self
        stored.tokenReassigned = tokenReassigned
        stored.createdAt = existing?.createdAt ?? createdAt
        stored.state = .active
        stored.unregisteredAt = nil
        stored.unregisteredReason = nil
        stored.lastReport = existing?.lastReport.flatMap { $0.kid == keyID ? $0 : nil }
        return stored
    }
}

extension DashboardSnapshot.App {
    /// Counts `count` deliveries whose last answer from `platform` was `status` (`reason` empty for a success).
    mutating func addAnswer(platform: PushPlatform, status: Int, reason: String, count: Int) {
        if let i = answers.firstIndex(where: { $0.platform == platform && $0.status == status && $0.reason == reason }) {
            answers[i].count += count
        } else {
            answers.append(.init(platform: platform, status: status, reason: reason, count: count))
        }
    }
}

extension GatewayStore {
    /// None: the store was opened ready and runs nothing of its own.
    public var services: [any Service] { [] }
    /// At once: the store was opened ready.
    public func ready() async throws {}
    /// Nothing: a store that announces nothing leaves the workers to their polling.
    public func onWake(_ handler: @escaping @Sendable (StoreWake) -> Void) {}
}
