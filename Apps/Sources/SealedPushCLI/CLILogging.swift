package import ArgumentParser
package import Logging
import NIOConcurrencyHelpers

/// The log level of this run: a command's `--log-level` first, then `$SEALEDPUSH_LOG_LEVEL`, then the
/// command's own default (`device push --json`: `error`, so machine-read runs stay quiet), then `notice`.
///
/// Loggers take their level when they are made; the commands that choose one (`device push`) call
/// `choose` before anything logs.
enum CLILogging {
    private static let chosen = NIOLockedValueBox<(explicit: Logger.Level?, commandDefault: Logger.Level?)>((nil, nil))

    /// Sets the level a command asks for (`explicit`, from `--log-level`) and its default without one.
    static func choose(explicit: Logger.Level?, commandDefault: Logger.Level?) {
        chosen.withLockedValue { $0 = (explicit, commandDefault) }
    }

    /// The level for a new logger, given `$SEALEDPUSH_LOG_LEVEL` (`environment`).
    static func level(environment: Logger.Level?) -> Logger.Level {
        let (explicit, commandDefault) = chosen.withLockedValue { $0 }
        return explicit ?? environment ?? commandDefault ?? .notice
    }
}

/// `--log-level LEVEL`, shared by every command that logs: the level of this run is `--log-level`, else
/// `$SEALEDPUSH_LOG_LEVEL`, else the command's own default. Logs go to standard error, never stdout.
package struct LoggingOptions: ParsableArguments {
    @Option(name: .customLong("log-level"), help: ArgumentHelp(
        "Log on standard error from this level up (trace, debug, info, notice, warning, error, critical); "
            + "without it $SEALEDPUSH_LOG_LEVEL, else the command's default.", valueName: "LEVEL"))
    package var logLevel: LogLevelArgument?

    package init() {}

    /// Chooses this run's level before anything logs; `commandDefault` applies when neither `--log-level`
    /// nor `$SEALEDPUSH_LOG_LEVEL` is given.
    package func apply(default commandDefault: Logger.Level) {
        CLILogging.choose(explicit: logLevel?.level, commandDefault: commandDefault)
    }
}

/// `--log-level trace|debug|info|notice|warning|error|critical`.
package struct LogLevelArgument: ExpressibleByArgument, Sendable {
    /// The level.
    package let level: Logger.Level
    /// Parses a level name as swift-log spells it.
    package init?(argument: String) {
        guard let level = Logger.Level(rawValue: argument) else { return nil }
        self.level = level
    }
    /// The level names, for `--help`.
    package static var allValueStrings: [String] { Logger.Level.allCases.map(\.rawValue) }
}
