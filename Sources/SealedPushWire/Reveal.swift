/// Constants of reveal on demand (`reveal-v1.md`).
public enum RevealFormat {
    /// The userInfo key under which the service extension hands over the `reveal` envelope (§3).
    public static let userInfoKey = "SEALEDPUSH_REVEAL"
    /// The userInfo key under which the service extension hands over an ordinary message it sealed again to the
    /// device's own reveal key, under the preview policy `title` or `none` (§5.1).
    public static let localUserInfoKey = "SEALEDPUSH_LOCAL"
    /// The userInfo key that marks a notification whose message waits in the pending queue (§9); its value is the
    /// notification's request identifier.
    public static let pendingUserInfoKey = "SEALEDPUSH_PENDING"
    /// The default reveal category: one the app's content extension lists in `UNNotificationExtensionCategory` (§3).
    public static let defaultCategory = "SEALED_REVEAL"
    /// The default title iOS may show for a reveal message (§2).
    public static let defaultTitle = "Secret Message!"
    /// The default body iOS may show for a reveal message (§2), and the body the preview policy puts in place of text (§5).
    public static let pressAndHoldText = "Press and hold to read"
    /// What the content extension shows while protected data is unavailable (§4 step 1).
    public static let lockedText = "Unlock iPhone to read"
    /// The default alert of a reveal message's outer body: `Secret Message!` / `Press and hold to read`.
    public static var defaultAlert: MessageBody.Alert { MessageBody.Alert(title: defaultTitle, body: pressAndHoldText) }
}
