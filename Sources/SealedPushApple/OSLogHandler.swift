#if canImport(UserNotifications)
public import Logging
import os

/// A swift-log handler that writes to the unified logging system through `os.Logger`.
///
/// The unified log persists on the device and travels in sysdiagnoses, so what identifies a message or a
/// key stays redacted there. The message (SealedPush's messages are fixed text) is logged `.public`; of the
/// metadata, only the values of `publicMetadataKeys` — reason codes, statuses, outcomes, counts,
/// accessibility classes: nothing that names a message, an attachment or a key — are logged `.public`;
/// every other pair (`attachment`, `key_id`, `signed_by`, `error`, paths…) is logged `.private` (Console
/// shows `<private>` unless the device has a logging profile that reveals private data). A line reads
/// `message key=value… <private>`: the public pairs sorted by key, then one private argument holding the
/// others, sorted by key (left out when there are none).
public struct OSLogHandler: LogHandler {
    /// The metadata keys whose values are logged `.public` by default: `reason`, `status`, `outcome`,
    /// `count`, `accessibility`.
    public static let defaultPublicMetadataKeys: Set<String> = ["reason", "status", "outcome", "count", "accessibility"]

    /// The handler's level.
    public var logLevel: Logging.Logger.Level = .info
    /// The handler's metadata.
    public var metadata: Logging.Logger.Metadata = [:]
    /// The metadata keys whose values are logged `.public`; every other value is logged `.private`.
    public var publicMetadataKeys: Set<String>
    private let logger: os.Logger

    /// A handler writing to `subsystem` (e.g. the extension's bundle id) and `category` (the logger's label),
    /// logging the values of `publicMetadataKeys` `.public` and the others `.private`.
    public init(subsystem: String, category: String, publicMetadataKeys: Set<String> = OSLogHandler.defaultPublicMetadataKeys) {
        logger = os.Logger(subsystem: subsystem, category: category)
        self.publicMetadataKeys = publicMetadataKeys
    }

    /// Writes one event: the message and the public metadata `.public`, the other metadata `.private`.
    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }.sorted { $0.key < $1.key }
        let message = event.message.description
        let shown = merged.filter { publicMetadataKeys.contains($0.key) }.map { " \($0.key)=\($0.value)" }.joined()
        let redacted = merged.filter { !publicMetadataKeys.contains($0.key) }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let type = Self.logType(event.level)
        if redacted.isEmpty {
            logger.log(level: type, "\(message, privacy: .public)\(shown, privacy: .public)")
        } else {
            logger.log(level: type, "\(message, privacy: .public)\(shown, privacy: .public) \(redacted, privacy: .private)")
        }
    }

    /// The `OSLogType` for a swift-log level: trace and debug → debug, info → info, notice → default,
    /// warning and error → error, critical → fault.
    static func logType(_ level: Logging.Logger.Level) -> OSLogType {
        switch level {
        case .trace, .debug: return .debug
        case .info: return .info
        case .notice: return .default
        case .warning, .error: return .error
        case .critical: return .fault
        }
    }

    /// The handler's metadata value for `key`.
    public subscript(metadataKey key: String) -> Logging.Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}

extension Logging.Logger {
    /// A logger labelled `label` that writes to `os.Logger` under `subsystem` (category: the label), with
    /// identifiers in its metadata redacted (`OSLogHandler`).
    public static func unifiedLogging(label: String, subsystem: String) -> Logging.Logger {
        Logging.Logger(label: label) { label in OSLogHandler(subsystem: subsystem, category: label) }
    }
}
#endif
