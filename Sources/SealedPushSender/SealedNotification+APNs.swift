public import SealedPushAPNsCore

extension APNsPush {
    /// The push for a sealed notification: its payload bytes as sealed, `apns-expiration` and
    /// `apns-collapse-id` from its headers, `apns-topic` from its headers or else `topic` (the app's bundle id).
    ///
    /// Hand it to any APNs client (`SealedPushAPNs.APNsClient.send(_:)`): the payload goes byte for byte.
    public init(_ sealed: SealedNotification, deviceToken: String, topic: String?) {
        self.init(deviceToken: deviceToken, payload: sealed.payload, pushType: .alert, priority: 10,
                  topic: sealed.headers.topic ?? topic ?? "", expiration: sealed.headers.expiration,
                  collapseID: sealed.headers.collapseID)
    }
}
