import SealedPushCrypto
import SealedPushWire

/// The answer to `POST …/messages`: its status and body, and whether it is a replay of an earlier answer.
struct MessageAnswer: Sendable {
    let status: Int
    let body: [UInt8]
    let replayed: Bool
}

/// The operations the controllers call: each checks what the store says and answers in the API's terms
/// (`GatewayError` for what the caller must change), so no route reads the store itself.
extension Gateway {
    // MARK: Devices (gateway v1 §4)

    /// The device `deviceID` of `app`, as the API shows it.
    func device(app: AppRuntime, deviceID: String) async throws -> JSONObject {
        guard let device = try await store.device(app: app.config.id, deviceID: deviceID) else {
            throw GatewayError.notFound("no device with this id in this app; register it with PUT …/devices/{device_id}")
        }
        return Self.json(device)
    }

    /// Deletes a device; its deliveries not yet sent end `cancelled`.
    func deleteDevice(app: AppRuntime, deviceID: String) async throws {
        guard let cancelled = try await store.deleteDevice(app: app.config.id, deviceID: deviceID, now: now) else {
            throw GatewayError.notFound("no device with this id in this app")
        }
        metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
    }

    /// `{"devices": […]}` of a user.
    func userDevices(app: AppRuntime, userID: String) async throws -> JSONObject {
        let devices = try await store.userDevices(app: app.config.id, userID: userID)
        return JSONObject([("devices", .array(devices.map { .object(Self.json($0)) }))])
    }

    /// Deletes every device of a user; their deliveries not yet sent end `cancelled`.
    func deleteUserDevices(app: AppRuntime, userID: String) async throws {
        let (_, cancelled) = try await store.deleteUserDevices(app: app.config.id, userID: userID, now: now)
        metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
    }

    /// A page of the app's devices, with the cursor of the next one.
    func listDevices(app: AppRuntime, _ query: DeviceListQuery) async throws -> JSONObject {
        let devices = try await store.listDevices(app: app.config.id, state: query.state, since: query.since, after: query.after, limit: query.limit)
        let next: JSONValue = devices.count == query.limit
            ? devices.last.map { .string(DeviceListQuery.Cursor.encode($0.updatedAt, $0.deviceID)) } ?? .null : .null
        return JSONObject([("devices", .array(devices.map { .object(Self.json($0)) })), ("next_cursor", next)])
    }

    // MARK: Messages (gateway v1 §5)

    /// `POST …/messages` with the idempotency rules of §5: a repeat within 24 hours answers the first answer
    /// again; the same key with another body is `422`; a repeat while the first is handled is `409`. Only a
    /// `202` or a 4xx other than 401, 403, 409 and 429 is kept. Bodies are compared by an HMAC of their
    /// canonical JSON under the database's secret; the body itself is never stored.
    func postMessage(app: AppRuntime, body bytes: [UInt8], idempotencyKey key: String?) async throws -> MessageAnswer {
        guard let key else {
            return MessageAnswer(status: 202, body: try await sendMessage(app: app, body: try JSONBody.object(bytes), idempotency: nil), replayed: false)
        }
        let parsed = try? JSONBody.object(bytes)
        let canonical = parsed.map { CanonicalJSON.serialize(.object($0)) } ?? ([0] + bytes)
        let hmac = Digests.hmac(key: idempotencyKey, message: canonical)
        let slot = app.config.id + "\u{0}" + key
        guard keysInFlight.withLockedValue({ $0.insert(slot).inserted }) else {
            throw GatewayError.conflict("a request with this Idempotency-Key is still being handled; retry after Retry-After seconds", retryAfter: 1)
        }
        defer { _ = keysInFlight.withLockedValue { $0.remove(slot) } }
        let now = self.now
        if let kept = try await store.idempotentAnswer(app: app.config.id, key: key), kept.createdAt > now - Self.idempotencyWindow {
            guard constantTimeEquals(kept.bodyHMAC, hmac) else { throw GatewayError.idempotencyConflict }
            return MessageAnswer(status: kept.status, body: kept.body, replayed: true)
        }
        do {
            guard let parsed else { throw GatewayError.invalidJSON() }
            return MessageAnswer(status: 202, body: try await sendMessage(app: app, body: parsed, idempotency: (key, hmac)), replayed: false)
        } catch let error as GatewayError {
            let status = Int(error.status.code)
            if (400..<500).contains(status), ![401, 403, 409, 429].contains(status) {
                try await store.storeIdempotentAnswer(
                    app: app.config.id, key: key, answer: IdempotentAnswer(bodyHMAC: hmac, status: status, body: error.problem.json, createdAt: now))
            }
            throw error
        }
    }

    /// Cancels a message's deliveries not yet sent (`DELETE …/messages/{id}`).
    func cancelMessage(app: AppRuntime, messageID: String) async throws {
        guard let cancelled = try await store.cancelMessage(app: app.config.id, messageID: messageID, now: now) else {
            throw GatewayError.notFound("no message with this id in this app")
        }
        metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
    }

    // MARK: Events (gateway v1 §8)

    /// `{"events": […]}`: the app's events of the last 7 days after `after`, in the order they were written, each
    /// exactly as POSTed to the webhook.
    func eventListing(app: AppRuntime, after: String?, limit: Int) async throws -> [UInt8] {
        let now = self.now
        guard let events = try await store.events(app: app.config.id, after: after, since: now - Self.eventsKeptFor, limit: limit) else {
            throw GatewayError.invalidField("", "after names no event of this app kept now (events are kept 7 days); list again without after")
        }
        var body = Array(#"{"events":["#.utf8)
        for (n, event) in events.enumerated() {
            if n > 0 { body.append(UInt8(ascii: ",")) }
            body += event.body
        }
        body += Array("]}".utf8)
        return body
    }

    // MARK: Operations (gateway v1 §7)

    /// The dashboard's HTML.
    func dashboardPage() async throws -> String {
        let snapshot = try await store.dashboard(now: now)
        let paused = apps.compactMapValues { $0.pausedReason.withLockedValue { $0 } }
        return try Dashboard.render(snapshot, apps: configuration.apps, paused: paused)
    }
}

extension GatewayIDs {
    /// Whether `s` is an event id: `evt_` and 32 lowercase hex digits.
    static func isEventID(_ s: String) -> Bool {
        let b = Array(s.utf8)
        return b.count == 36 && s.hasPrefix("evt_") && b.dropFirst(4).allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }
}
