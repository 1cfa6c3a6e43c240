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
        let hmac = Digests.hmac(key: try idempotencyKey, message: canonical)
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

    /// The largest `POST …/messages/batch` body (gateway v1 §5.1).
    static let maxBatchBytes = 4 << 20
    /// The most messages in one batch.
    static let maxBatchMessages = 500

    /// The most deliveries one batch queues: a message that would take it beyond is answered `503` (nothing of it
    /// stored), to be sent in another request.
    static let maxBatchDeliveries = 50_000

    /// `POST …/messages/batch` (gateway v1 §5.1): each message handled exactly as `POST …/messages` handles it
    /// alone — its own checks, its own `idempotency_key` and replay rule, one token of the app's rate limit, its
    /// own place in the app's `max_queue` (reserved as it is sealed), its own `202` body or problem — in request
    /// order; the `200` body `{"results": […]}`. The messages the batch accepts are written in chunks of at most
    /// `batchChunkDeliveries` deliveries (one transaction each, written as the batch is sealed, so that a large batch
    /// never holds all its sealed payloads at once), and a result is `202` only once its chunk committed (the store
    /// failing answers that chunk's messages `503`, nothing of them kept). A batch queues at most
    /// `maxBatchDeliveries` deliveries. The whole request is refused only for a body that is not 1 to 500 message
    /// objects (`400`) and while shutting down (`503`, nothing stored).
    func postBatch(app: AppRuntime, body bytes: [UInt8], requestID: String) async throws -> [UInt8] {
        guard !draining.withLockedValue({ $0 }) else {
            throw GatewayError.unavailable("the gateway is shutting down; nothing of this batch was stored; retry against another instance or later")
        }
        let root = try JSONBody.object(bytes)
        for member in root where member.key != "messages" { throw GatewayError.unknownMember("/" + member.key) }
        guard case let .array(items)? = root["messages"], (1...Self.maxBatchMessages).contains(items.count),
              items.allSatisfy({ if case .object = $0 { true } else { false } })
        else {
            throw GatewayError.invalidField("/messages", "messages must be an array of 1 to \(Self.maxBatchMessages) objects, each a POST …/messages body with an optional idempotency_key")
        }
        var batch = BatchState(count: items.count)
        defer { keysInFlight.withLockedValue { held in for slot in batch.slots { held.remove(slot) } } }
        batch.devices = await prefetchDevices(app: app, items)
        let chunk = max(1, options.batchChunkDeliveries)
        for (index, item) in items.enumerated() {
            await prepareBatchItem(app: app, item, index: index, into: &batch, requestID: requestID)
            if batch.pendingDeliveries >= chunk { await writeBatchChunk(app: app, into: &batch, requestID: requestID) }
        }
        await writeBatchChunk(app: app, into: &batch, requestID: requestID)
        // A key repeated in the batch answers as its repeat would alone: the first one's answer, replayed.
        for (index, first) in batch.repeats {
            if case var .object(result)? = batch.results[first], result["status"] == .int(202) {
                result["replayed"] = .bool(true)
                batch.results[index] = .object(result)
            } else {
                batch.results[index] = batch.results[first]
            }
        }
        let results = batch.results.map { $0 ?? Self.problemResult(.internal(requestID: requestID)) }
        return JSON.serialize(.object(JSONObject([("results", .array(results))])))
    }

    /// Writes the batch's sealed messages waiting to be stored in one transaction and records their results: `202`
    /// once committed. Their queue reservations end with them (the stored ones are counted as queued).
    func writeBatchChunk(app: AppRuntime, into batch: inout BatchState, requestID: String) async {
        guard !batch.pending.isEmpty else { return }
        let pending = batch.pending
        batch.pending = []
        batch.pendingDeliveries = 0
        do {
            let kept = try await store.insertMessages(pending.map { ($0.prepared.message, $0.prepared.idempotency) })
            options.afterBatchCommit?()
            for (entry, wasKept) in zip(pending, kept) {
                if wasKept {
                    stored(entry.prepared, app: app)
                    batch.results[entry.index] = .object(JSONObject([("status", .int(202)), ("message", .object(entry.prepared.answerJSON))]))
                } else {
                    batch.results[entry.index] = Self.problemResult(
                        .conflict("a request with this Idempotency-Key is still being handled; retry after Retry-After seconds", retryAfter: 1))
                }
            }
        } catch {
            let classified = GatewayError(classifying: error, requestID: requestID)
            if case .internal = classified { logger.error("batch not stored", metadata: ["request_id": "\(requestID)", "error": "\(String(reflecting: type(of: error)))"]) }
            for entry in pending { batch.results[entry.index] = Self.problemResult(classified) }
        }
    }

    /// What a batch holds while its messages are checked: each result once known, the messages to write, the
    /// idempotency slots it holds until it is answered, and the keys it has seen.
    struct BatchState {
        var results: [JSONValue?]
        /// The devices of the users the batch names, read at once (nil: each message reads its own).
        var devices: [String: [DeviceRecord]]?
        var pending: [(index: Int, prepared: PreparedMessage)] = []
        /// The deliveries of `pending`.
        var pendingDeliveries = 0
        /// The deliveries of every message of the batch accepted so far (written or pending).
        var deliveries = 0
        var slots: [String] = []
        var keys: [String: (hmac: [UInt8], index: Int)] = [:]
        var repeats: [(index: Int, first: Int)] = []
        init(count: Int) { results = Array(repeating: nil, count: count) }
    }

    /// The most user ids a batch's devices are read for at once; a batch naming more reads them message by message.
    static let maxPrefetchedUsers = 5000

    /// The devices of every user a batch's messages name (`to.user_id`, `to.user_ids`), in one read, by user id:
    /// each message then takes its users' devices from it instead of reading them itself. Nil when the batch names
    /// none, too many, or the read failed (each message then reads its own, and fails on its own).
    func prefetchDevices(app: AppRuntime, _ items: [JSONValue]) async -> [String: [DeviceRecord]]? {
        var users: [String] = []
        for case let .object(item) in items {
            guard case let .object(to)? = item["to"] else { continue }
            if case let .string(user)? = to["user_id"] {
                users.append(user)
            } else if case let .array(list)? = to["user_ids"] {
                for case let .string(user) in list { users.append(user) }
            }
            if users.count > Self.maxPrefetchedUsers { return nil }
        }
        guard !users.isEmpty else { return nil }
        return try? await store.usersDevices(app: app.config.id, userIDs: users)
    }

    /// Checks and seals one message of a batch as `POST …/messages` would (its key's replay and conflict rules,
    /// one rate-limit token), recording its result or adding it to the messages to write.
    func prepareBatchItem(app: AppRuntime, _ item: JSONValue, index: Int, into batch: inout BatchState, requestID: String) async {
        guard case var .object(message) = item else {
            batch.results[index] = Self.problemResult(.invalidJSON("each message must be a JSON object, as POST …/messages takes"))
            return
        }
        var key: String?
        if let value = message["idempotency_key"] {
            guard case let .string(s) = value, (1...255).contains(s.utf8.count), s.utf8.allSatisfy({ (0x20...0x7e).contains($0) }) else {
                batch.results[index] = Self.problemResult(.invalidField("/idempotency_key", "idempotency_key must be 1-255 printable ASCII characters"))
                return
            }
            key = s
            message["idempotency_key"] = nil
        }
        guard app.rate.take() != nil else {
            batch.results[index] = Self.problemResult(.rateLimited(retryAfter: 1))
            return
        }
        let canonical = CanonicalJSON.serialize(.object(message))
        var idempotency: (key: String, hmac: [UInt8])?
        do {
            if let key {
                let hmac = Digests.hmac(key: try idempotencyKey, message: canonical)
                if let earlier = batch.keys[key] {
                    guard constantTimeEquals(earlier.hmac, hmac) else { throw GatewayError.idempotencyConflict }
                    batch.repeats.append((index, earlier.index))
                    return
                }
                let slot = app.config.id + "\u{0}" + key
                guard keysInFlight.withLockedValue({ $0.insert(slot).inserted }) else {
                    throw GatewayError.conflict("a request with this Idempotency-Key is still being handled; retry after Retry-After seconds", retryAfter: 1)
                }
                batch.slots.append(slot)
                batch.keys[key] = (hmac, index)
                if let kept = try await store.idempotentAnswer(app: app.config.id, key: key), kept.createdAt > now - Self.idempotencyWindow {
                    guard constantTimeEquals(kept.bodyHMAC, hmac) else { throw GatewayError.idempotencyConflict }
                    batch.results[index] = kept.status == 202 ? Self.accepted(kept.body, replayed: true)
                        : Self.problemResult(status: kept.status, body: kept.body, replayed: true)
                    return
                }
                idempotency = (key, hmac)
            }
            let prepared = try await prepareMessage(app: app, body: message, idempotency: idempotency, devicesOf: batch.devices)
            let count = prepared.message.deliveries.count
            guard batch.deliveries + count <= Self.maxBatchDeliveries else {
                throw GatewayError.unavailable("this batch already queues \(batch.deliveries) deliveries and this message would add \(count) (at most \(Self.maxBatchDeliveries) per batch); nothing of it was stored: send it in another request", retryAfter: 1)
            }
            batch.deliveries += count
            batch.pendingDeliveries += count
            batch.pending.append((index, prepared))
        } catch {
            let classified = GatewayError(classifying: error, requestID: requestID)
            if case .internal = classified { logger.error("batch message failed", metadata: ["request_id": "\(requestID)", "error": "\(String(reflecting: type(of: error)))"]) }
            // A 4xx other than 401, 403, 409, 429 is kept for the key's repeats, as POST …/messages keeps it.
            let status = Int(classified.status.code)
            if let idempotency, (400..<500).contains(status), ![401, 403, 409, 429].contains(status) {
                try? await store.storeIdempotentAnswer(app: app.config.id, key: idempotency.key,
                                                       answer: IdempotentAnswer(bodyHMAC: idempotency.hmac, status: status, body: classified.problem.json, createdAt: now))
            }
            batch.results[index] = Self.problemResult(classified)
        }
    }

    /// `{"status": 202, "message": …}` (with `"replayed": true` for an answer replayed by its idempotency key).
    static func accepted(_ body: [UInt8], replayed: Bool) -> JSONValue {
        var result = JSONObject([("status", .int(202)), ("message", (try? JSON.parse(body)) ?? .null)])
        if replayed { result["replayed"] = .bool(true) }
        return .object(result)
    }

    /// `{"status", "problem"}` for a refusal.
    static func problemResult(_ error: GatewayError) -> JSONValue {
        let p = error.problem
        return problemResult(status: Int(p.status.code), body: p.json, replayed: false)
    }

    /// `{"status", "problem"}` from a kept answer's status and body.
    static func problemResult(status: Int, body: [UInt8], replayed: Bool) -> JSONValue {
        var result = JSONObject([("status", .int(Int64(status))), ("problem", (try? JSON.parse(body)) ?? .null)])
        if replayed { result["replayed"] = .bool(true) }
        return .object(result)
    }

    /// Cancels a message's deliveries not yet sent (`DELETE …/messages/{id}`).
    /// Cancels a message's unsent deliveries and retracts its mailbox deliveries (mailbox v1 §6); with
    /// `retractShown`, queues a retraction push for each retracted delivery whose push was accepted: what each
    /// retracted delivery came to (`sent` or `not_needed`).
    @discardableResult
    func cancelMessage(app: AppRuntime, messageID: String, retractShown: Bool = false) async throws -> [(deliveryID: String, retraction: String)] {
        let retracted = try await retractMailbox(app: app, messageID: messageID)
        guard let cancelled = try await store.cancelMessage(app: app.config.id, messageID: messageID, now: now) else {
            throw GatewayError.notFound("no message with this id in this app")
        }
        metrics.delivery(app: app.config.id, state: .cancelled, count: cancelled)
        return try await queueRetractionPushes(app: app, messageID: messageID, retracted: retracted, shown: retractShown)
    }

    // MARK: Events (gateway v1 §8)

    /// `{"events": […]}`: the app's events of the last 7 days after `after`, in the order they were written, each
    /// exactly as POSTed to the webhook.
    func eventListing(app: AppRuntime, after: String?, limit: Int) async throws -> [UInt8] {
        let now = self.now
        guard let events = try await store.events(app: app.config.id, after: after, since: now - Self.eventsKeptFor, limit: limit) else {
            throw GatewayError.eventNotKept
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
        let paused = apps.compactMapValues { $0.pausedSummary }
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
