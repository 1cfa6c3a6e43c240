import SealedPushSender
import SealedPushWire

extension Gateway {
    /// What a delivery to `device` stores as its payload (platforms v1): the APNs payload for `apns`; the wire v1
    /// envelope, standard base64 as in `ENCRYPTED_DATA`, for `fcm` (the FCM message is made at each attempt, its
    /// `ttl` then); the RFC 8291 body for `webpush`, encrypted once so that every retry sends the same body.
    func platformPayload(_ sealed: SealedNotification, device: DeviceRecord, request: MessageRequest) throws -> [UInt8] {
        switch device.platform {
        case .apns:
            return sealed.payload
        case .fcm:
            return Array(try Self.envelope(of: sealed).utf8)
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
    // TEMPORARY until the Web Push library is merged.
    func webPushBody(envelope: String, device: DeviceRecord) throws -> [UInt8] { throw SealingFault() }
    func checkWebPushEndpoint(_ endpoint: String, settings: WebPushAppSettings) async throws {}
}
