public import SealedPushAPNsCore
public import SealedPushSender

extension APNsPush {
    /// The push for a sealed notification: its payload bytes as sealed, `apns-expiration` and
    /// `apns-collapse-id` from its headers, `apns-topic` from its headers or else `topic`.
    public init(_ sealed: SealedNotification, deviceToken: String, topic: String?) {
        self.init(deviceToken: deviceToken, payload: sealed.payload, pushType: .alert, priority: 10,
                  topic: sealed.headers.topic ?? topic ?? "", expiration: sealed.headers.expiration,
                  collapseID: sealed.headers.collapseID)
    }
}

extension APNsClient {
    /// Sends a sealed notification to `deviceToken` (see `send(_:)`); the topic is the message's, else the
    /// configuration's.
    public func send(_ sealed: SealedNotification, to deviceToken: String) async throws(APNsError) -> APNsAcceptance {
        try await send(APNsPush(sealed, deviceToken: deviceToken, topic: configuration.topic))
    }
}
