import SealedPushWire
import SealedPushWebPush
import SealedPushCrypto
import SealedPushAPNsCore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Why a pushkey was rejected (matrix v1 §2): a label of `sealedpush_matrix_rejected_pushkeys_total`.
enum MatrixRejection: String, Error, Sendable {
    /// Its `app_id` is in no app's `matrix.app_ids`.
    case appIDNotConfigured = "app_id_not_configured"
    /// The pushkey cannot be an address of its platform (not an APNs token, not an FCM token, not a P-256 key).
    case badPushkey = "bad_pushkey"
    /// `data.sealedpush_key` is missing, not a `sealedpush-device-key` record, or its key id does not match.
    case badKeyRecord = "bad_key_record"
    /// The key record's public key (or reveal key) is a low-order point: nothing can be sealed to it.
    case lowOrderKey = "low_order_key"
    /// A Web Push `data.endpoint` (or `data.auth`) breaks platforms v1 §1.1.
    case badEndpoint = "endpoint_not_public"
    /// The push service said the token or subscription is gone, at or after `pushkey_ts`.
    case unregistered = "unregistered"
}

/// A device of a notification that will be queued: its row and its idempotency key.
struct MatrixTarget: Sendable {
    let device: MatrixNotification.Device
    let record: DeviceRecord
    /// The idempotency key of `(event_id, app_id, pushkey)`, nil for a badge update (no `event_id`).
    let key: String?
}

/// The Matrix Push Gateway (matrix v1 §2–§4) on the gateway's service: each device of a notification becomes (or
/// updates) a device of its app, and the notification one sealed message per app through the same queue,
/// retries, receipts, metrics and webhooks as `POST …/messages`.
extension Gateway {
    /// The `device_id` of a Matrix device: `mx-` and the first 32 hex digits of SHA-256(`app_id` 0x00 `pushkey`).
    static func matrixDeviceID(appID: String, pushkey: String) -> String {
        "mx-" + String(Hex.encode(Digests.sha256(Array(appID.utf8) + [0] + Array(pushkey.utf8))).prefix(32))
    }

    /// The idempotency key (per app) of one `(event_id, app_id, pushkey)`: a digest, so no Matrix id is stored.
    static func matrixIdempotencyKey(eventID: String, appID: String, pushkey: String) -> String {
        "matrix:" + Hex.encode(Digests.sha256(Array(eventID.utf8) + [0] + Array(appID.utf8) + [0] + Array(pushkey.utf8)))
    }

    /// Handles `POST /_matrix/push/v1/notify` from `source`: the pushkeys to reject, answered once every accepted
    /// device's delivery is durably queued. Throws `MatrixError` for the whole request (`403`, `503`); any other
    /// error is the store's (the controller answers `503` or `500`).
    func matrixNotify(_ n: MatrixNotification, source: String) async throws -> [String] {
        guard !draining.withLockedValue({ $0 }) else { throw MatrixError.unavailable("the gateway is shutting down; retry shortly") }
        var index: [String: (app: AppRuntime, matrix: MatrixAppSettings, target: MatrixAppSettings.Target)] = [:]
        var anyMatrix = false, anyAllows = false
        for app in apps.values {
            guard let matrix = app.config.matrix else { continue }
            anyMatrix = true
            if matrix.allows(source: source) { anyAllows = true }
            for (id, target) in matrix.appIDs { index[id] = (app, matrix, target) }
        }
        // The source first, for the whole request: nothing of it is read or written for a stranger.
        if anyMatrix && !anyAllows {
            throw MatrixError.forbidden("this address is not among the allowed_sources of the gateway's Matrix apps; add the homeserver's address to matrix.allowed_sources")
        }
        for device in n.devices {
            if let entry = index[device.appID], !entry.matrix.allows(source: source) {
                throw MatrixError.forbidden("this address is not among the allowed_sources of the app serving app_id \(device.appID); add the homeserver's address to its matrix.allowed_sources")
            }
        }
        var slots: [String] = []
        defer { keysInFlight.withLockedValue { held in for slot in slots { held.remove(slot) } } }
        var rejected: [String] = []
        var seen = Set<String>()
        var order: [String] = []
        var targets: [String: [MatrixTarget]] = [:]
        var runtimes: [String: (app: AppRuntime, matrix: MatrixAppSettings)] = [:]
        for device in n.devices where seen.insert(device.appID + "\u{0}" + device.pushkey).inserted {
            guard let (app, matrix, target) = index[device.appID] else {
                metrics.matrixRejected(app: "unknown", platform: "unknown", reason: .appIDNotConfigured)
                rejected.append(device.pushkey)
                continue
            }
            let appID = app.config.id
            let candidate: DeviceRecord
            do throws(MatrixRejection) { candidate = try matrixDeviceRecord(device, app: app, target: target) } catch {
                metrics.matrixRejected(app: appID, platform: target.platform.rawValue, reason: error)
                rejected.append(device.pushkey)
                continue
            }
            let existing = try await store.device(app: appID, deviceID: candidate.deviceID)
            // Gone at or after the pushkey was set: this pusher can never be delivered to (matrix v1 §2).
            if let existing, existing.state == .unregistered, let at = existing.unregisteredAt, at >= (device.pushkeyTS ?? 0) * 1000 {
                metrics.matrixRejected(app: appID, platform: target.platform.rawValue, reason: .unregistered)
                rejected.append(device.pushkey)
                continue
            }
            let key = n.eventID.map { Self.matrixIdempotencyKey(eventID: $0, appID: device.appID, pushkey: device.pushkey) }
            if let key {
                let slot = appID + "\u{0}" + key
                guard keysInFlight.withLockedValue({ $0.insert(slot).inserted }) else {
                    throw MatrixError.unavailable("this notification is still being handled for one of its devices; retry shortly", retryAfter: 1)
                }
                slots.append(slot)
                // A repeat within 24 hours queues nothing new and answers as the first did.
                if let kept = try await store.idempotentAnswer(app: appID, key: key), kept.createdAt > now - Self.idempotencyWindow {
                    metrics.matrixRetry(app: appID, platform: target.platform.rawValue)
                    continue
                }
            }
            if Self.needsWrite(candidate, over: existing) {
                if candidate.platform == .webpush, existing?.address != candidate.address {
                    do { try await checkWebPushEndpoint(candidate.address, app: app) } catch let error as GatewayError {
                        if case .unavailable = error { throw MatrixError.unavailable("a Web Push endpoint's name did not resolve in time; retry shortly") }
                        metrics.matrixRejected(app: appID, platform: target.platform.rawValue, reason: .badEndpoint)
                        rejected.append(device.pushkey)
                        continue
                    }
                }
                let (_, _, cancelled) = try await store.putDevice(candidate, maxDevicesPerUser: options.maxDevicesPerUser)
                metrics.delivery(app: appID, state: .cancelled, count: cancelled)
            }
            if targets[appID] == nil {
                order.append(appID)
                runtimes[appID] = (app, matrix)
            }
            targets[appID, default: []].append(MatrixTarget(device: device, record: existing.map { Self.merged(candidate, over: $0) } ?? candidate, key: key))
        }
        for appID in order {
            guard let (app, matrix) = runtimes[appID], let list = targets[appID] else { continue }
            let skipped = try await matrixQueue(n, app: app, matrix: matrix, targets: list)
            for target in list {
                if skipped.contains(target.record.deviceID) {
                    metrics.matrixRejected(app: appID, platform: target.record.platform.rawValue, reason: .badKeyRecord)
                    rejected.append(target.device.pushkey)
                } else {
                    metrics.matrixNotify(app: appID, platform: target.record.platform.rawValue)
                }
            }
        }
        return rejected
    }

    /// Whether a notification's device row differs from the stored one (or there is none, or it is unregistered).
    static func needsWrite(_ candidate: DeviceRecord, over existing: DeviceRecord?) -> Bool {
        guard let existing else { return true }
        return existing.state == .unregistered || existing.address != candidate.address || existing.keyRecord != candidate.keyRecord
            || existing.webpushKeys != candidate.webpushKeys || existing.environment != candidate.environment
            || existing.platform != candidate.platform
    }

    /// The stored row as this notification leaves it.
    static func merged(_ candidate: DeviceRecord, over existing: DeviceRecord) -> DeviceRecord {
        needsWrite(candidate, over: existing) ? candidate : existing
    }

    /// The device a Matrix device is (matrix v1 §3): its address from the pushkey (and `data` for Web Push), its
    /// key record from `data.sealedpush_key`, checked as `PUT …/devices` checks them. Throws the rejection reason.
    func matrixDeviceRecord(_ device: MatrixNotification.Device, app: AppRuntime, target: MatrixAppSettings.Target) throws(MatrixRejection) -> DeviceRecord {
        var address: String
        var webpushKeys: StoredWebPushKeys?
        switch target.platform {
        case .apns:
            // The spec's hex token; Sygnal's (and Element's) base64 of the token is taken too, so pushers move as they are.
            if let hex = IDSyntax.token(device.pushkey) {
                address = hex
            } else if let bytes = Data(base64Encoded: device.pushkey), (32...100).contains(bytes.count) {
                address = Hex.encode(Array(bytes))
            } else {
                throw .badPushkey
            }
        case .fcm:
            guard DeviceRegistration.isFCMToken(device.pushkey) else { throw .badPushkey }
            address = device.pushkey
        case .webpush:
            // As Sygnal's webpush: the pushkey is the subscription's p256dh, with data.endpoint and data.auth.
            guard let endpoint = device.data["endpoint"]?.stringValue, let auth = device.data["auth"]?.stringValue else { throw .badEndpoint }
            let subscription: WebPushSubscription
            do throws(WebPushError) {
                subscription = try WebPushSubscription(json: .object(JSONObject([
                    ("endpoint", .string(endpoint)), ("keys", .object(JSONObject([("p256dh", .string(device.pushkey)), ("auth", .string(auth))]))),
                ])), policy: app.webpushPolicy)
            } catch {
                if case .endpoint = error { throw .badEndpoint }
                if case let .subscription(member, _) = error, member.hasSuffix("p256dh") { throw .badPushkey }
                throw .badEndpoint
            }
            address = subscription.endpoint.url
            webpushKeys = StoredWebPushKeys(p256dh: subscription.keys.p256dh, auth: subscription.keys.authBase64URL)
        }
        guard case let .object(recordObject)? = device.data["sealedpush_key"], let record = try? DeviceKeyRecord(json: recordObject) else {
            throw .badKeyRecord
        }
        guard SealingPool.canSeal(to: record.publicKey), record.reveal.map({ SealingPool.canSeal(to: $0.publicKey) }) ?? true else {
            throw .lowOrderKey
        }
        let id = Self.matrixDeviceID(appID: device.appID, pushkey: device.pushkey)
        let t = now
        return DeviceRecord(
            app: app.config.id, deviceID: id, userID: id, address: address,
            environment: target.platform == .apns ? target.environment : .production,
            keyRecord: JSON.serialize(.object(recordObject)), keyID: record.keyID.hex, state: .active,
            createdAt: t, updatedAt: t, registeredAt: t, unregisteredAt: nil, unregisteredReason: nil, tokenReassigned: false,
            lastReport: nil, platform: target.platform, webpushKeys: webpushKeys)
    }

    /// The most bytes of `content.body` sealed: a longer body is cut (at a character) as Sygnal cuts it, so a
    /// notification always fits the 4096 bytes of a push.
    static let matrixBodyBytes = 1024

    /// Seals and queues one app's share of a notification (matrix v1 §4) in one message, in the app's mode (push or
    /// mailbox), its idempotency keys with it; the device ids skipped because their key cannot be sealed to.
    func matrixQueue(_ n: MatrixNotification, app: AppRuntime, matrix: MatrixAppSettings, targets: [MatrixTarget]) async throws -> Set<String> {
        let priority = n.lowPriority ? 5 : 10
        var sealedTargets = targets
        var apnsBadges: [MatrixTarget] = []
        var body: JSONObject
        if n.isBadgeUpdate {
            // A badge update: APNs sees the count in the clear (as with Sygnal); FCM and Web Push get it sealed.
            guard matrix.countsOnly == .badge, let unread = n.unread else { return [] }
            apnsBadges = targets.filter { $0.record.platform == .apns }
            sealedTargets = targets.filter { $0.record.platform != .apns }
            var data = n.sealedData
            if case var .object(m)? = data["matrix"] { m["badge_only"] = .bool(true); data["matrix"] = .object(m) }
            body = JSONObject([("body", "Unread messages"), ("badge", .int(unread)), ("data", .object(data))])
        } else {
            let eventIDOnly = targets.first?.device.data["format"]?.stringValue == "event_id_only"
            let alert = n.alert(eventIDOnly: eventIDOnly)
            let title = alert.title
            var text = alert.body
            if text.utf8.count > Self.matrixBodyBytes {
                var cut = ""
                for c in text where cut.utf8.count + c.utf8.count <= Self.matrixBodyBytes - 3 { cut.append(c) }
                text = cut + "…"
            }
            body = JSONObject([("body", .string(text)), ("data", .object(n.sealedData))])
            if !title.isEmpty { body["title"] = .string(String(title.prefix(256))) }
            if let room = n.roomID { body["thread_id"] = .string(room) }
            if let unread = n.unread { body["badge"] = .int(unread) }
        }
        body["priority"] = .int(Int64(priority))
        body["receipt"] = .bool(true)
        var skipped = Set<String>()
        var message: NewMessage?
        if !sealedTargets.isEmpty {
            body["to"] = .object(JSONObject([("device_ids", .array(sealedTargets.map { .string($0.record.deviceID) }))]))
            let prepared: PreparedMessage
            // The app's mode decides (mailbox v1 §1, matrix v1 §4): with its mailbox enabled, `prepareMessage` keeps one
            // envelope per device at the gateway and each push carries only a handle, exactly as for `POST …/messages`.
            do { prepared = try await prepareMessage(app: app, body: body, idempotency: nil) } catch let error as GatewayError {
                switch error {
                case .tooLarge, .unprocessable(code: "message_too_large", title: _, detail: _, field: _):
                    // Even cut, the text does not fit with the rest (a push's 4096 bytes, or the mailbox's
                    // max_message_bytes): the placeholder alone goes, sealed as ever.
                    body["body"] = .string(n.type == "m.call.invite" ? "Missed call" : "New message")
                    body["title"] = nil
                    prepared = try await prepareMessage(app: app, body: body, idempotency: nil)
                case let .unavailable(detail, retryAfter): throw MatrixError.unavailable(detail, retryAfter: retryAfter)
                default: throw error
                }
            }
            let queued = Set(prepared.message.deliveries.map(\.deviceID))
            for target in sealedTargets where !queued.contains(target.record.deviceID) { skipped.insert(target.record.deviceID) }
            message = prepared.message
        }
        if !apnsBadges.isEmpty, let unread = n.unread {
            let created = message?.createdAt ?? now
            let expiresAt = message?.expiresAt ?? created + 7 * 86_400_000
            var m = message ?? NewMessage(app: app.config.id, messageID: GatewayIDs.message(now: created), createdAt: created, expiresAt: expiresAt, deliveries: [])
            let payload = JSON.serialize(.object(JSONObject([("aps", .object(JSONObject([("badge", .int(unread))])))])))
            for target in apnsBadges {
                let deliveryID = GatewayIDs.delivery(now: created)
                m.deliveries.append(NewDelivery(
                    deliveryID: deliveryID, deviceID: target.record.deviceID, address: target.record.address, environment: target.record.environment,
                    payload: payload, receiptTokenSHA256: nil, priority: priority, collapseID: deliveryID, apnsExpiration: expiresAt / 1000,
                    apnsID: APNsID.random(), platform: .apns))
            }
            message = m
        }
        guard let message, !message.deliveries.isEmpty else { return skipped }
        let keys = targets.filter { !skipped.contains($0.record.deviceID) }.compactMap(\.key)
        let answer = IdempotentAnswer(bodyHMAC: Digests.sha256(Array(message.messageID.utf8)), status: 200,
                                      body: JSON.serialize(.object(JSONObject([("message_id", .string(message.messageID))]))), createdAt: message.createdAt)
        // The first key is written with the message, in its transaction; the others (a notification naming several
        // devices of one app) right after it.
        // Its place in the app's `max_queue`, as for every message (gateway v1 §5.1): held until stored.
        guard let reservation = QueueReservation(app: app, count: message.deliveries.count) else {
            throw GatewayError.unavailable("this app's queue is full (\(app.config.maxQueue) deliveries); retry later", retryAfter: 30)
        }
        try await store.insertMessage(message, idempotency: keys.first.map { (key: $0, answer: answer) })
        stored(PreparedMessage(message: message, idempotency: nil, answerJSON: JSONObject([]), reservation: reservation), app: app)
        for key in keys.dropFirst() { try await store.storeIdempotentAnswer(app: app.config.id, key: key, answer: answer) }
        return skipped
    }
}
