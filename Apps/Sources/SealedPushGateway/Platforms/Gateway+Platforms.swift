import SealedPushSender
import SealedPushWire
import SealedPushWebPush
import SealedPushFCM
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension Gateway {
    /// What a delivery to `device` stores as its payload (platforms v1): the APNs payload for `apns`; the wire v1
    /// envelope's bytes for `fcm` (the FCM message is made at each attempt, its `ttl` then); the RFC 8291 body for `webpush`, encrypted once so that every retry sends the same body.
    func platformPayload(_ sealed: SealedNotification, device: DeviceRecord, request: MessageRequest) throws -> [UInt8] {
        switch device.platform {
        case .apns:
            return sealed.payload
        case .fcm:
            // The envelope's bytes: each attempt sends them as standard base64, as APNs's ENCRYPTED_DATA is.
            guard let envelope = Data(base64Encoded: try Self.envelope(of: sealed)) else { throw SealingFault() }
            guard envelope.count <= FCMMessage.maximumEnvelopeBytes else {
                throw GatewayError.tooLarge("the message does not fit FCM's 4096 bytes of data once sealed (\(envelope.count) bytes of envelope, at most \(FCMMessage.maximumEnvelopeBytes)) for an fcm device; shorten body, title, subtitle or data", field: "/body")
            }
            return Array(envelope)
        case .webpush:
            return try webPushBody(envelope: Self.envelope(of: sealed), device: device)
        }
    }

    /// The wire v1 envelope of a sealed notification: its `ENCRYPTED_DATA` (standard base64).
    static func envelope(of sealed: SealedNotification) throws -> String {
        guard case let .object(root)? = try? JSON.parse(sealed.payload), let data = root[WireFormat.encryptedDataKey]?.stringValue else {
            throw SealingFault()
        }
        return data
    }
}

/// The sealer made a payload without `ENCRYPTED_DATA`: a fault of the gateway (500), never the caller's.
struct SealingFault: Error {}

extension Gateway {
    /// The RFC 8291 body of a delivery to a `webpush` device: the plaintext of platforms v1 §3 encrypted to its
    /// subscription's keys, with a fresh key pair and salt. A message too large for the 4096-byte body is the
    /// message's fault (`413`, whoever it goes to).
    func webPushBody(envelope: String, device: DeviceRecord) throws -> [UInt8] {
        guard let stored = device.webpushKeys else { throw UnusableDeviceKeys() }
        do {
            let keys = try WebPushSubscriptionKeys(p256dh: stored.p256dh, auth: stored.auth)
            return try WebPushEncryptor(subscription: keys).encrypt(WebPushBody.plaintext(encryptedData: envelope))
        } catch {
            if case let .bodyTooLarge(size, limit) = error {
                throw GatewayError.tooLarge("the message does not fit Web Push's \(limit) bytes once sealed and encrypted (\(size) bytes) for a webpush device; shorten body, title, subtitle or data", field: "/body")
            }
            throw UnusableDeviceKeys()
        }
    }

    /// The endpoint rules of platforms v1 §1.1 at registration: every address the endpoint's host resolves to must
    /// be public (unless the app allows private endpoints); `400` naming `/webpush/endpoint` otherwise, and for a
    /// name that does not exist. A resolver that fails or does not answer in time is `503` with `Retry-After`.
    func checkWebPushEndpoint(_ endpoint: String, app: AppRuntime) async throws {
        guard let parsed = try? app.webpushPolicy.check(endpoint) else { return }  // checked when the body was read
        let looked: [[UInt8]]?
        do { looked = try await app.lookups.addresses(of: parsed.host) } catch {
            // The resolver failed (an outage): not the client's fault.
            throw GatewayError.unavailable("the gateway could not resolve the name of webpush/endpoint (its resolver failed); retry later", retryAfter: 5)
        }
        guard let addresses = looked else {
            throw GatewayError.unavailable("the name of webpush/endpoint did not resolve in time; retry later", retryAfter: 5)
        }
        do { try app.webpushPolicy.checkAddresses(addresses, origin: parsed.origin) } catch {
            throw DeviceRegistration.webPushProblem(error)
        }
    }
}

/// A device's stored keys cannot be encrypted or sealed to: that device is skipped (`bad_key_record`).
struct UnusableDeviceKeys: Error {}
