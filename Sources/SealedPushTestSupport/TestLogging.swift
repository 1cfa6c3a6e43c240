import Foundation
public import Logging
import Synchronization

/// Keeps test runs quiet: the library's loggers (the extension's fallbacks, keychain recovery notices)
/// would otherwise print to standard output through swift-log's default handler. Tests that assert on
/// logs capture them with `LogCapture`; everything else is dropped unless `$SEALEDPUSH_TEST_LOG_LEVEL`
/// names a level to print from.
public enum TestLogging {
    private static let bootstrapped: Void = {
        let level = ProcessInfo.processInfo.environment["SEALEDPUSH_TEST_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
        LoggingSystem.bootstrap { label in
            guard let level else { return SwiftLogNoOpLogHandler() }
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
    }()

    /// Installs the quiet logging system once per test process (later calls do nothing). Test helpers
    /// call it before they make anything that logs.
    public static func quiet() { _ = bootstrapped }
}

/// A log handler that keeps what is logged, for tests that assert on logs.
public struct LogCapture: LogHandler {
    /// One captured entry.
    public struct Entry: Sendable, Equatable {
        /// Its level.
        public let level: Logger.Level
        /// The message text.
        public let message: String
        /// Its metadata, rendered as text.
        public let metadata: [String: String]
    }

    private let shared: Shared

    /// The entries, shared by every copy of the handler.
    final class Shared: Sendable {
        let entries = Mutex<[Entry]>([])
    }

    /// The handler's level.
    public var logLevel: Logger.Level = .trace
    /// The handler's metadata.
    public var metadata: Logger.Metadata = [:]

    /// A capture that keeps everything from `.trace` up.
    public init() {
        shared = Shared()
    }

    /// A logger writing into this capture.
    public func logger(label: String = "test") -> Logger { Logger(label: label) { _ in self } }

    /// What was logged so far.
    public var entries: [Entry] { shared.entries.withLock { $0 } }

    /// Keeps one entry.
    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        shared.entries.withLock {
            $0.append(Entry(level: event.level, message: event.message.description, metadata: merged.mapValues { "\($0)" }))
        }
    }

    /// The handler's metadata value for `key`.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }
}
