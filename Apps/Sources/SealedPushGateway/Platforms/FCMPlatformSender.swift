import SealedPushFCM
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// FCM HTTP v1 (platforms v1 §2): each attempt builds the data-only message from the stored envelope (its `ttl`
/// the seconds left then) and sends it through the app's `FCMClient`, which holds the access token (one exchange at
/// a time, renewed once on a 401) and reads FCM's answer.
struct FCMPlatformSender: PlatformSender {
    let client: FCMClient

    func send(_ claim: ClaimedDelivery, now: Int64) async -> PushAnswer {
        var body: [UInt8]
        do {
            body = try FCMMessage.body(token: claim.address, envelope: claim.payload, priority: claim.priority,
                                       messageTTL: claim.apnsExpiration == 0 ? 0 : 1, expiresAt: Date(timeIntervalSince1970: Double(claim.expiresAt) / 1000),
                                       now: Date(timeIntervalSince1970: Double(now) / 1000), collapseID: claim.collapseID, deliveryID: claim.deliveryID)
        } catch {
            if case .expired = error { return .retry(status: nil, reason: "ttl_expired", retryAfter: nil) }  // written expired by the state machine
            return .rejected(status: nil, reason: "invalid_message", attempted: false)
        }
        // Mailbox v1 §2: a mailbox delivery's FCM message carries only its handle, as `data.sealedpush_fetch`.
        if MailboxPush.isHandle(claim.payload) {
            guard let replaced = MailboxPush.fcmBody(replacingDataOf: body, handle: String(decoding: claim.payload, as: UTF8.self)) else {
                return .rejected(status: nil, reason: "invalid_message", attempted: false)
            }
            body = replaced
        }
        let result = await client.send(body)
        switch result.outcome {
        case let .accepted(name):
            return .accepted(status: result.status ?? 200, platformID: name)
        case let .unregistered(reason):
            // FCM gives no timestamp: a token registered again after this attempt began stays active (platforms v1 §2).
            return .unregistered(status: result.status, reason: reason, registeredBefore: now)
        case let .rejected(reason):
            return .rejected(status: result.status, reason: reason, attempted: true)
        case let .retry(reason, retryAfter):
            return .retry(status: result.status, reason: reason, retryAfter: retryAfter)
        case let .renewTokenAndRetry(reason), let .pauseCredentials(reason):
            return .paused(status: result.status, reason: reason)
        }
    }

    func shutdown() async { await client.shutdown() }
}
