
/// The push service a device is reached through (platforms v1): Apple's, Firebase Cloud Messaging, or any
/// RFC 8030 Web Push service. Every platform gets the same sealed wire v1 envelope.
public enum PushPlatform: String, Sendable, Equatable, Hashable, CaseIterable, Comparable {
    /// Apple Push Notification service (HTTP/2, token auth).
    case apns
    /// Firebase Cloud Messaging, HTTP v1 API (data-only messages).
    case fcm
    /// Web Push (RFC 8030, RFC 8291 `aes128gcm`, RFC 8292 VAPID).
    case webpush

    /// Orders platforms as they are listed (apns, fcm, webpush).
    public static func < (a: PushPlatform, b: PushPlatform) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }

    /// The value of the `environment` column for a device or delivery of this platform: APNs's environment
    /// (`production` or `sandbox`) for `apns`, else the platform's own name. The column's unique index over
    /// (app, environment, address) is then the token rule of gateway v1 §4 per platform (platforms v1 §1).
    func environmentColumn(_ environment: APNsEnvironmentName) -> String {
        self == .apns ? environment.rawValue : rawValue
    }

    /// The platform and APNs environment an `environment` column names (`production` for the other platforms,
    /// whose records carry no environment), or nil for a value no version wrote.
    static func fromEnvironmentColumn(_ value: String) -> (PushPlatform, APNsEnvironmentName)? {
        if let environment = APNsEnvironmentName(rawValue: value) { return (.apns, environment) }
        guard let platform = PushPlatform(rawValue: value), platform != .apns else { return nil }
        return (platform, .production)
    }
}

/// A Web Push subscription's keys (RFC 8291 §2 `p256dh`, `auth`), as the browser's `PushSubscription.toJSON()`
/// gives them (base64url): the message is encrypted to them. Kept like the key record; never logged.
public struct StoredWebPushKeys: Sendable, Equatable {
    /// The browser's P-256 public key, base64url of the 65-byte uncompressed point.
    public var p256dh: String
    /// The 16-byte authentication secret, base64url.
    public var auth: String

    /// Keys from their base64url forms.
    public init(p256dh: String, auth: String) {
        self.p256dh = p256dh
        self.auth = auth
    }
}
