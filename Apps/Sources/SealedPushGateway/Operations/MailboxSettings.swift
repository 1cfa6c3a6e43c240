import SealedPushWire

/// An app's mailbox mode (mailbox v1 §1): `"mailbox": {"enabled": false, "fetch_grace": 60, "max_message_bytes": 32768}`.
public struct MailboxSettings: Sendable, Equatable {
    /// Whether messages that name no `delivery` go to the mailbox.
    public var enabled: Bool
    /// How long after its first fetch a delivery may be fetched again (seconds, 5 to 600).
    public var fetchGrace: Int
    /// The largest inner message (bytes, 4096 to 65536).
    public var maxMessageBytes: Int

    /// The defaults, mailbox off.
    public static let disabled = MailboxSettings(enabled: false, fetchGrace: 60, maxMessageBytes: 32768)

    /// Settings from their parts.
    public init(enabled: Bool, fetchGrace: Int, maxMessageBytes: Int) {
        self.enabled = enabled
        self.fetchGrace = fetchGrace
        self.maxMessageBytes = maxMessageBytes
    }

    /// `fetchGrace` in milliseconds.
    var graceMilliseconds: Int64 { Int64(fetchGrace) * 1000 }
}

extension ConfigReader {
    /// An app's `mailbox` section, or the defaults (off) without one.
    func mailboxSection(_ o: JSONObject, at pointer: String) throws(GatewayConfigurationError) -> MailboxSettings {
        guard let value = o["mailbox"], value != .null else { return .disabled }
        let at = "\(pointer)/mailbox"
        guard case let .object(m) = value else {
            throw GatewayConfigurationError(at, "must be an object: {\"enabled\": true, \"fetch_grace\": 60, \"max_message_bytes\": 32768}")
        }
        try allowOnly(m, at: at, ["enabled", "fetch_grace", "max_message_bytes"])
        var enabled = false
        switch m["enabled"] {
        case nil, .null?: break
        case let .bool(b)?: enabled = b
        default: throw GatewayConfigurationError("\(at)/enabled", "must be true or false")
        }
        return MailboxSettings(
            enabled: enabled,
            fetchGrace: try integer(m, "fetch_grace", at: at, default: 60, range: 5...600),
            maxMessageBytes: try integer(m, "max_message_bytes", at: at, default: 32768,
                                         range: MailboxSealing.minimumMessageBytes...MailboxSealing.maximumMessageBytes))
    }
}
