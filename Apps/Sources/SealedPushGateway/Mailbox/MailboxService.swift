import SealedPushWire
import SealedPushCrypto
import Logging
import SealedPushAPNsCore

/// What a mailbox request came to, for the controller to answer and count (mailbox v1 §3, §7).
enum MailboxAnswer: Sendable {
    /// `200` with this JSON body.
    case ok(JSONObject)
    /// A refusal the source is charged for (`400`, `403`, `404`, `413`).
    case refused(Problem)
    /// `410` (not a refusal: a device that fetches twice gets it).
    case gone(MailboxGone)
}

extension Gateway {
    /// The most a mailbox request body may be (mailbox v1 §3): 1 KiB.
    static let maxMailboxBodyBytes = 1024
    /// How long a challenge may be answered (mailbox v1 §7).
    static let challengeLifetime: Int64 = 60_000
    /// The largest `POST …/messages` body of an app with its mailbox enabled: 128 KiB, room for a 64 KiB mailbox
    /// message (mailbox v1 §4) in JSON; other apps keep 64 KiB.
    static let maxMessageRequestBytes = 128 * 1024
    /// The most handles one list holds.
    static let maxListedHandles = 100

    /// `POST /v1/mailbox/fetch` (mailbox v1 §3): the envelope once, then `410`; one `404` for every wrong handle.
    func mailboxFetch(body: [UInt8]) async throws -> MailboxAnswer {
        guard let store = mailboxStore else { return .refused(MailboxProblem.unknownHandle) }
        guard case let .object(o)? = try? JSON.parse(body), o.count == 1, let text = o["handle"]?.stringValue else {
            return .refused(GatewayError.invalidJSON("the body must be {\"handle\": \"<handle>\"} and nothing else").problem)
        }
        // Malformed, truncated or overlong: the same 404 as a wrong token or an unknown delivery.
        guard let handle = MailboxHandle(text) else { return .refused(MailboxProblem.unknownHandle) }
        let outcome = try await store.mailboxFetch(deliveryID: handle.deliveryID, tokenSHA256: Digests.sha256(Array(handle.token.utf8)),
                                                   now: now, graces: mailboxGraces)
        switch outcome {
        case .unknown:
            return .refused(MailboxProblem.unknownHandle)
        case let .gone(reason):
            return .gone(reason)
        case let .envelope(bytes, messageID, expiresAt, app, first):
            if first { metrics.delivery(app: app, state: .fetched) }
            return .ok(JSONObject([("envelope", .string(Base64.encode(bytes))), ("message_id", .string(messageID)),
                                   ("expires_at", GatewayTime.json(expiresAt))]))
        }
    }

    /// `POST /v1/mailbox/challenge` (mailbox v1 §7): 32 random bytes sealed to the device's key, or to a random key
    /// for an unknown app or device, so that the answer says nothing about which devices exist.
    func mailboxChallenge(body: [UInt8]) async throws -> MailboxAnswer {
        guard let store = mailboxStore else { return .refused(MailboxProblem.wrongAnswer) }
        guard case let .object(o)? = try? JSON.parse(body), o.count == 2, let app = o["app"]?.stringValue,
              let deviceID = o["device_id"]?.stringValue else {
            return .refused(GatewayError.invalidJSON("the body must be {\"app\": \"<app>\", \"device_id\": \"<device id>\"}").problem)
        }
        guard GatewayConfiguration.isValidAppID(app) else { return .refused(GatewayError.invalidField("/app", "app must be an app id").problem) }
        guard IDSyntax.isValid(deviceID) else { return .refused(GatewayError.invalidField("/device_id", "device_id must be a device id").problem) }
        var key: BoxPublicKey?
        if apps[app] != nil,
           let device = try await store.device(app: app, deviceID: deviceID), device.state == .active,
           let record = try? DeviceKeyRecord(jsonBytes: device.keyRecord) {
            key = record.publicKey
        }
        let secret = SecureBytes(CryptoLibrary.randomBytes(count: MailboxChallenge.byteCount))
        let recipient = key ?? BoxKeyPair.generate().publicKey
        let sealed: [UInt8]
        do { sealed = try SealedBox.seal(secret, to: recipient) } catch {
            // A registered key that cannot be sealed to is refused at registration; answer as for an unknown device.
            sealed = (try? SealedBox.seal(secret, to: BoxKeyPair.generate().publicKey)) ?? []
        }
        let id = "ch_" + Base64.encodeURLSafeNoPadding(CryptoLibrary.randomBytes(count: 16))
        let answerHash = secret.withUnsafeBytes { Digests.sha256($0) }
        try await store.putMailboxChallenge(id: id, app: app, deviceID: deviceID, answerSHA256: answerHash, expiresAt: now + Self.challengeLifetime)
        return .ok(JSONObject([("challenge_id", .string(id)), ("sealed", .string(Base64.encode(sealed))),
                               ("expires_in", .int(Self.challengeLifetime / 1000))]))
    }

    /// `POST /v1/mailbox/list` (mailbox v1 §7): the device's waiting deliveries with fresh handles, or `403
    /// wrong_answer`. The challenge is spent whatever the answer.
    func mailboxList(body: [UInt8]) async throws -> MailboxAnswer {
        guard let store = mailboxStore else { return .refused(MailboxProblem.wrongAnswer) }
        guard case let .object(o)? = try? JSON.parse(body), o.count == 2, let id = o["challenge_id"]?.stringValue,
              let answer = o["answer"]?.stringValue else {
            return .refused(GatewayError.invalidJSON("the body must be {\"challenge_id\": \"<id>\", \"answer\": \"<base64url>\"}").problem)
        }
        // A malformed answer still spends the challenge: it is compared as a hash no answer has.
        let given = (try? Base64.decodeURLSafeNoPadding(answer)).flatMap { $0.count == MailboxChallenge.byteCount ? Digests.sha256($0) : nil }
            ?? Array(repeating: 0, count: 32)
        guard let entries = try await store.mailboxList(challengeID: id, answerSHA256: given, now: now, graces: mailboxGraces,
                                                        limit: Self.maxListedHandles) else {
            return .refused(MailboxProblem.wrongAnswer)
        }
        return .ok(JSONObject([("handles", .array(entries.map { e in
            .object(JSONObject([("handle", .string(e.handle)), ("message_id", .string(e.messageID)),
                                ("created_at", GatewayTime.json(e.createdAt)), ("expires_at", GatewayTime.json(e.expiresAt))]))
        }))]))
    }

    /// Retracts a message's mailbox deliveries (mailbox v1 §6): their envelopes deleted now, later fetches `410 retracted`.
    @discardableResult
    func retractMailbox(app: AppRuntime, messageID: String) async throws -> [MailboxRetraction] {
        guard let store = mailboxStore else { return [] }
        let retracted = try await store.mailboxRetract(app: app.config.id, messageID: messageID, now: now)
        if !retracted.isEmpty {
            metrics.counter("sealedpush_mailbox_retracted_total", [("app", app.config.id)]).increment(by: retracted.count)
        }
        return retracted
    }

    /// Queues the retraction pushes of mailbox v1 §6 for `retracted` (when `shown`): for each whose push was accepted, a
    /// push with a second handle to the same delivery (both answer `410 retracted`; the gateway keeps no token, so the
    /// first handle cannot be sent again) under the same collapse id, so that it replaces the shown notification.
    func queueRetractionPushes(app: AppRuntime, messageID: String, retracted: [MailboxRetraction],
                               shown: Bool) async throws -> [(deliveryID: String, retraction: String)] {
        guard shown, let store = mailboxStore, !retracted.isEmpty else { return retracted.map { ($0.deliveryID, "not_needed") } }
        let deliveries = try await store.message(app: app.config.id, messageID: messageID)?.deliveries ?? []
        var out: [(deliveryID: String, retraction: String)] = []
        var queued = 0
        for r in retracted {
            guard r.pushAccepted, let delivery = deliveries.first(where: { $0.deliveryID == r.deliveryID }),
                  let device = try await store.device(app: app.config.id, deviceID: delivery.deviceID),
                  let handle = MailboxHandle.make(deliveryID: r.deliveryID),
                  let payload = try? mailboxPush(handle: handle, device: device, app: app)
            else {
                out.append((r.deliveryID, "not_needed"))
                continue
            }
            let sent = try await store.queueRetractionPush(of: r.deliveryID, pushID: GatewayIDs.delivery(now: now), apnsID: APNsID.random(),
                                                           payload: payload, handleSHA256: Digests.sha256(Array(handle.token.utf8)), now: now)
            if sent { queued += 1 }
            out.append((r.deliveryID, sent ? "sent" : "not_needed"))
        }
        if queued > 0 {
            app.queued.withLockedValue { $0 += queued }
            metrics.delivery(app: app.config.id, state: .queued, count: queued)
            app.wakeAll()
        }
        return out
    }

    /// Deletes the envelopes due (expired, or collected by their grace), the mailbox rows kept past 7 days after
    /// expiry and the expired challenges; the delivery worker runs it with each prune.
    func sweepMailbox() async {
        guard let store = mailboxStore else { return }
        let now = self.now
        do {
            let n = try await store.mailboxSweep(now: now, graces: mailboxGraces, rowsBefore: now - 7 * 86_400_000)
            if n > 0 { logger.info("deleted mailbox envelopes collected or expired", metadata: ["envelopes": "\(n)"]) }
        } catch {
            logger.error("cannot sweep the mailbox; retrying at the next interval", metadata: ["error": "\(String(describing: type(of: error)))"])
        }
    }
}

extension GatewayMetrics {
    /// Counts a mailbox request by route (`fetch`, `challenge`, `list`) and answer (`ok`, `unknown_handle`,
    /// `collected`, `retracted`, `expired`, `wrong_answer`, `rate_limited`, `invalid`, `too_large`, `unavailable`).
    func mailbox(route: String, answer: String) {
        counter("sealedpush_mailbox_requests_total", [("route", route), ("answer", answer)]).increment()
    }
}
