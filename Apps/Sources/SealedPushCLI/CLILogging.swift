package import ArgumentParser
package import Logging
import Synchronization

/// The log level of this run: a command's `--log-level` first, then `$SEALEDPUSH_LOG_LEVEL`, then the
/// command's own default (`device push --json`: `error`, so machine-read runs stay quiet), then `notice`.
///
/// Loggers take their level when they are made; the commands that choose one (`device push`) call
/// `choose` before anything logs.
enum CLILogging {
    private static let chosen = Mutex<(explicit: Logger.Level?, commandDefault: Logger.Level?)>((nil, nil))

    /// Sets the level a command asks for (`explicit`, from `--log-level`) and its default without one.
    static func choose(explicit: Logger.Level?, commandDefault: Logger.Level?) {
        chosen.withLock { $0 = (explicit, commandDefault) }
    }

    /// The level for a new logger, given `$SEALEDPUSH_LOG_LEVEL` (`environment`).
    static func level(environment: Logger.Level?) -> Logger.Level {
        let (explicit, commandDefault) = chosen.withLock { $0 }
        return explicit ?? environment ?? commandDefault ?? .notice
    }
}

/// `--log-level trace|debug|info|notice|warning|error|critical`.
struct LogLevelArgument: ExpressibleByArgument {
    /// The level.
    let level: Logger.Level
    /// Parses a level name as swift-log spells it.
    init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument) else { return nil }
        self.level = level
    }
    /// The level names, for `--help`.
    static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}
