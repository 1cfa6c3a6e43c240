import SealedPushAPNs
import SealedPushAPNsCore
import SealedPushSender
import SealedPushWire
import SealedPushCrypto
import SealedPushWebPush
import Logging
import Hummingbird
import NIOCore

/// How a message reaches its devices (mailbox v1 §1).
enum DeliveryMode: String, Sendable, Equatable {
    /// The sealed message rides inside the push.
    case push
    /// The push carries a handle; the sealed message waits at the gateway.
    case mailbox
}

/// The mailbox's problems (mailbox v1 §1–§4, §7): codes of their own, details that never quote a handle or token.
enum MailboxProblem {
    /// `404 unknown_handle`: one answer for every wrong handle (§3).
    static let unknownHandle = Problem(.notFound, "unknown_handle", "Unknown handle",
                                       "no message waits for this handle; keep the notification's placeholder and fetch again later, or ask for the list")
    /// `410 gone` with the reason (§3).
    static func gone(_ reason: MailboxGone) -> GoneProblem { GoneProblem(reason: reason) }
    /// `422 mailbox_disabled` (§1).
    static let disabled = GatewayError.unprocessable(
        code: "mailbox_disabled", title: "Mailbox disabled",
        detail: "this app has no mailbox: its operator sets \"mailbox\": {\"enabled\": true} in the app's configuration, or send with \"delivery\": \"push\"",
        field: "/delivery")
    /// `422 message_too_large`, naming the limit (§4).
    static func tooLarge(limit: Int) -> GatewayError {
        .unprocessable(code: "message_too_large", title: "Message too large",
                       detail: "the message is over this app's mailbox limit of \(limit) bytes once framed (max_message_bytes); shorten body, title, subtitle or data",
                       field: "/body")
    }
    /// `403 wrong_answer` (§7).
    static let wrongAnswer = Problem(.forbidden, "wrong_answer", "Wrong answer",
                                     "the challenge is unknown, expired, already answered, or the answer is wrong; ask for a new challenge")
    /// `413`: a mailbox body over 1 KiB (§3).
    static let bodyTooLarge = Problem(.contentTooLarge, "too_large", "Too large", "a mailbox request body is at most 1024 bytes")
}

/// `410` for a mailbox delivery that is gone: a problem (type `gone`) that also carries `reason` (mailbox v1 §3).
struct GoneProblem: Error, HTTPResponseError, Sendable {
    /// Why it is gone.
    let reason: MailboxGone
    /// `410`.
    var status: HTTPResponse.Status { .gone }
    /// The problem without `reason`.
    var problem: Problem {
        let detail = switch reason {
        case .collected: "this message was handed out already and then confirmed, or its fetch grace ended; it is gone from the gateway"
        case .retracted: "the sender retracted this message; remove its notification"
        case .expired: "this message expired; it is gone from the gateway"
        }
        return Problem(.gone, "gone", "Gone", detail)
    }
    /// The problem's body with `reason` added.
    var json: [UInt8] {
        guard case var .object(o)? = try? JSON.parse(problem.json) else { return problem.json }
        o["reason"] = .string(reason.rawValue)
        return JSON.serialize(.object(o))
    }
    /// The response: `application/problem+json`, `Cache-Control: no-store`.
    func response(from request: Request, context: some RequestContext) throws -> Response {
        Response(status: .gone, headers: [.contentType: "application/problem+json", .cacheControl: "no-store"],
                 body: ResponseBody(byteBuffer: ByteBuffer(bytes: json)))
    }
}

extension Gateway {
    /// The store's mailbox side, when it has one (both the SQLite and the PostgreSQL stores do).
    var mailboxStore: (any GatewayMailboxStore)? { store as? any GatewayMailboxStore }

    /// The mode of `request` in `app` (mailbox v1 §1): `422 mailbox_disabled` for a mailbox message the app does not allow.
    func deliveryMode(of request: MessageRequest, app: AppRuntime) throws -> DeliveryMode {
        let settings = app.config.mailbox
        let mode = request.delivery ?? (settings.enabled ? .mailbox : .push)
        guard mode == .mailbox else { return .push }
        guard settings.enabled, mailboxStore != nil else { throw MailboxProblem.disabled }
        if request.reveal {
            throw GatewayError.invalidField("/reveal", "a reveal message is not sent in mailbox mode yet; send it with \"delivery\": \"push\"")
        }
        return .mailbox
    }

    /// Each app's fetch grace in milliseconds.
    var mailboxGraces: [String: Int64] {
        apps.mapValues { $0.config.mailbox.graceMilliseconds }
    }

    /// Seals `message` once per target for the mailbox (mailbox v1 §4) and makes each delivery's handle-only push
    /// (§2): the deliveries and the devices skipped.
    func mailboxDeliveries(app: AppRuntime, request: MessageRequest, messageID: String, created: Int64, expiresAt: Int64,
                           targets: [(device: DeviceRecord, record: DeviceKeyRecord)]) async throws
        -> (deliveries: [NewDelivery], skipped: [(String, String)]) {
        let settings = app.config.mailbox
        let issuedAt = created / 1000
        let signer = app.sender.signer
        // A ttl of 0 (now or never, for the push) still leaves the device its grace to fetch.
        let keptUntil = request.ttl == 0 ? created + settings.graceMilliseconds : expiresAt
        var deliveries: [NewDelivery] = []
        var skipped: [(String, String)] = []
        for (device, record) in targets {
            let deliveryID = GatewayIDs.delivery(now: created)
            guard let handle = MailboxHandle.make(deliveryID: deliveryID) else { throw GatewayError.internal(requestID: "-") }
            let receipt = request.receipt ? ReceiptRequest(url: configuration.publicURL + "/v1/receipts", token: ReceiptRequest.makeToken()) : nil
            let body = MessageBody(
                kid: record.publicKey.keyID, id: messageID, issuedAt: issuedAt, expiresAt: request.ttl == 0 ? nil : issuedAt + request.ttl,
                alert: .init(title: request.title, subtitle: request.subtitle, body: request.body), threadID: request.threadID,
                category: request.category, sound: request.sound, badge: request.badge, data: request.data, sender: signer?.keyID,
                receipt: receipt)
            let bodyBytes: SecureBytes
            do { bodyBytes = try MailboxSealing.bodyBytes(body, deliveryID: deliveryID) } catch {
                if case .bodyTooLarge = error { throw MailboxProblem.tooLarge(limit: settings.maxMessageBytes) }
                throw GatewayError.invalidField("", "the message cannot be sealed: \(error.description)")
            }
            let framed: SecureBytes
            if let signer, let local = signer.localKeyPair {
                framed = InnerMessage.frame(body: bodyBytes, recipient: record.publicKey.keyID, signer: local)
            } else if let signer {
                let signature: [UInt8]
                do { signature = try await signer.sign(InnerMessage.signedBytes(recipient: record.publicKey.keyID, body: bodyBytes)) } catch {
                    throw GatewayError.unavailable("the app's signer did not sign the message; retry later")
                }
                framed = InnerMessage.frame(body: bodyBytes, signature: signature)
            } else {
                framed = InnerMessage.frame(body: bodyBytes, recipient: record.publicKey.keyID, signer: nil)
            }
            let envelope: [UInt8]
            do { envelope = try MailboxSealing.seal(inner: framed, to: record.publicKey, maxMessageBytes: settings.maxMessageBytes) } catch {
                if case .tooLarge = error { throw MailboxProblem.tooLarge(limit: settings.maxMessageBytes) }
                skipped.append((device.deviceID, "bad_key_record"))
                continue
            }
            let payload: [UInt8]
            do { payload = try mailboxPush(handle: handle, device: device, app: app) } catch {
                skipped.append((device.deviceID, "bad_key_record"))
                continue
            }
            deliveries.append(NewDelivery(
                deliveryID: deliveryID, deviceID: device.deviceID, address: device.address, environment: device.environment,
                payload: payload, receiptTokenSHA256: receipt.map { Digests.sha256(Array($0.token.utf8)) },
                priority: request.priority, collapseID: request.collapseID ?? deliveryID,
                apnsExpiration: request.ttl == 0 ? 0 : expiresAt / 1000, apnsID: APNsID.random(), platform: device.platform,
                mailbox: NewMailboxEntry(handleSHA256: Digests.sha256(Array(handle.token.utf8)), envelope: envelope, expiresAt: keptUntil)))
        }
        return (deliveries, skipped)
    }

    /// What a mailbox delivery's push service sees (mailbox v1 §2), as the delivery's stored payload: the APNs
    /// payload; for FCM the handle's bytes (the FCM message is made at each attempt: `MailboxPush.fcmBody`); for
    /// Web Push the RFC 8291 body of `{"sealedpush_fetch": handle}`. The handle's token lives in it only until the
    /// push service accepts the push (then the payload is emptied, as in push mode).
    func mailboxPush(handle: MailboxHandle, device: DeviceRecord, app: AppRuntime) throws -> [UInt8] {
        switch device.platform {
        case .apns:
            return MailboxPush.apnsPayload(handle: handle, title: app.sender.placeholder.title)
        case .fcm:
            return Array(handle.description.utf8)
        case .webpush:
            guard let stored = device.webpushKeys else { throw UnusableDeviceKeys() }
            do {
                let keys = try WebPushSubscriptionKeys(p256dh: stored.p256dh, auth: stored.auth)
                return try WebPushEncryptor(subscription: keys).encrypt(MailboxPush.webPushPlaintext(handle: handle))
            } catch { throw UnusableDeviceKeys() }
        }
    }
}

/// The pushes of mailbox v1 §2: nothing of the message, only the handle. Never larger because the message is.
enum MailboxPush {
    /// The APNs payload: the placeholder alert, `mutable-content`, and `SEALEDPUSH_FETCH`.
    static func apnsPayload(handle: MailboxHandle, title: String?) -> [UInt8] {
        var alert = JSONObject()
        if let title { alert["title"] = .string(title) }
        alert["body"] = .string("(Encrypted)")
        return JSON.serialize(.object(JSONObject([
            ("aps", .object(JSONObject([("alert", .object(alert)), ("mutable-content", .int(1))]))),
            (MailboxHandle.apnsKey, .string(handle.description)),
        ])))
    }

    /// The Web Push plaintext: `{"sealedpush_fetch": handle}`.
    static func webPushPlaintext(handle: MailboxHandle) -> [UInt8] {
        JSON.serialize(.object(JSONObject([(MailboxHandle.dataKey, .string(handle.description))])))
    }

    /// Whether a stored FCM payload is a mailbox handle rather than an envelope: an envelope starts with its
    /// version byte (0x01), a handle with the characters `1.` (0x31 0x2E), so the two never meet.
    static func isHandle(_ payload: [UInt8]) -> Bool {
        payload.count >= 2 && payload[0] == UInt8(ascii: "1") && payload[1] == UInt8(ascii: ".")
    }

    /// An FCM HTTP v1 body made for an envelope, with its `data` replaced by `{"sealedpush_fetch": handle}`
    /// (platforms v1 §2 otherwise: priority, ttl, collapse key as made). Nil when `body` is not such a body.
    static func fcmBody(replacingDataOf body: [UInt8], handle: String) -> [UInt8]? {
        guard case var .object(root)? = try? JSON.parse(body), case var .object(message)? = root["message"] else { return nil }
        message["data"] = .object(JSONObject([(MailboxHandle.dataKey, .string(handle))]))
        root["message"] = .object(message)
        return JSON.serialize(.object(root))
    }
}
