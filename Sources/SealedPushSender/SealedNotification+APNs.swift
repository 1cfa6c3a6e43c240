public import SealedPushAPNsCore

extension APNsPush {
    /// The push for a sealed notification: its payload bytes as sealed, `apns-expiration` from its headers,
    /// `apns-topic` from its headers or else `topic` (the app's bundle id), and `apns-collapse-id` from its
    /// headers or else the message id.
    ///
    /// The collapse id is what iOS takes as the notification's request identifier, so a push that goes twice
    /// (a retry after a lost answer) replaces its own notification instead of arriving as a replay
    /// (spec/device-outcomes.md, "Replays"). A message id APNs would refuse as a collapse id (over 64 bytes)
    /// leaves it unset; the `apns-id`, the same on every try, is then the request identifier.
    ///
    /// Hand it to any APNs client (`SealedPushAPNs.APNsClient.send(_:)`): the payload goes byte for byte.
    public init(_ sealed: SealedNotification, deviceToken: String, topic: String?) {
        self.init(deviceToken: deviceToken, payload: sealed.payload, pushType: .alert, priority: 10,
                  topic: sealed.headers.topic ?? topic ?? "", expiration: sealed.headers.expiration,
                  collapseID: sealed.headers.collapseID ?? APNsPush.defaultCollapseID(messageID: sealed.messageID))
    }

    /// The collapse id a push gets when its message names none: the message id, when APNs takes it as one.
    public static func defaultCollapseID(messageID: String) -> String? {
        APNsHeaderRules.collapseIDProblem(messageID) == nil ? messageID : nil
    }
}
