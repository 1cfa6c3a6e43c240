#if canImport(UserNotifications)
public import Logging
import os

/// A swift-log handler that writes to the unified logging system through `os.Logger`.
///
/// SealedPush logs reason codes, key ids and statuses — never plaintext or key material — so the
/// message and its metadata are logged `.public` (visible in Console without a profile).
public struct OSLogHandler: LogHandler {
    /// The handler's level.
    public var logLevel: Logging.Logger.Level = .info
    /// The handler's metadata.
    public var metadata: Logging.Logger.Metadata = [:]
    private let logger: os.Logger

    /// A handler writing to `subsystem` (e.g. the extension's bundle id) and `category` (the logger's label).
    public init(subsystem: String, category: String) {
        logger = os.Logger(subsystem: subsystem, category: category)
    }

    /// Writes one event: the message followed by its metadata, sorted by key.
    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let text = merged.isEmpty ? event.message.description
            : event.message.description + " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        logger.log(level: Self.logType(event.level), "\(text, privacy: .public)")
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
    /// A logger labelled `label` that writes to `os.Logger` under `subsystem` (category: the label).
    public static func unifiedLogging(label: String, subsystem: String) -> Logging.Logger {
        Logging.Logger(label: label) { label in OSLogHandler(subsystem: subsystem, category: label) }
    }
}
#endif
