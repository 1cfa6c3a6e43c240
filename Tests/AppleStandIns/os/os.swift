// Stand-ins for the `os` declarations SealedPushApple uses (module-aliased to `os` in the Linux build
// only; empty elsewhere), after Apple's documentation (developer.apple.com/documentation/os/logger):
// `Logger(subsystem:category:)`, `log(level:_:)` taking an `OSLogMessage` built by string
// interpolation with a `privacy:` argument, `OSLogPrivacy` and `OSLogType`. The stand-in keeps what was
// logged: each interpolated argument with the privacy it was given, and the text as the persistent log
// shows it without a profile (a private argument, and a string argument left at `.auto`, as `<private>`:
// Apple's default redacts dynamic strings).
#if os(Linux)
public import Synchronization

/// Stand-in: `OSLogType`.
public struct OSLogType: Equatable, RawRepresentable, Sendable {
    /// The raw value.
    public let rawValue: UInt8
    /// A type from its raw value.
    public init(rawValue: UInt8) { self.rawValue = rawValue }
    /// The default type.
    public static let `default` = OSLogType(rawValue: 0x00)
    /// Informational.
    public static let info = OSLogType(rawValue: 0x01)
    /// Debug.
    public static let debug = OSLogType(rawValue: 0x02)
    /// An error.
    public static let error = OSLogType(rawValue: 0x10)
    /// A fault.
    public static let fault = OSLogType(rawValue: 0x11)
}

/// Stand-in: `OSLogPrivacy`.
public struct OSLogPrivacy: Equatable, Sendable {
    let level: Int
    /// Redacted unless the value is a scalar (strings are redacted).
    public static let auto = OSLogPrivacy(level: 0)
    /// Shown.
    public static let `public` = OSLogPrivacy(level: 1)
    /// Redacted.
    public static let `private` = OSLogPrivacy(level: 2)
    /// Redacted, also when private data is enabled.
    public static let sensitive = OSLogPrivacy(level: 3)

    /// Stand-in only: whether a string argument with this privacy is redacted in the persistent log.
    var redactsStrings: Bool { self != .public }
}

/// Stand-in: `OSLogMessage` (built only from a string literal with interpolations).
public struct OSLogMessage: ExpressibleByStringInterpolation, ExpressibleByStringLiteral {
    /// Stand-in: `OSLogInterpolation`.
    public struct StringInterpolation: StringInterpolationProtocol {
        var text = ""
        var arguments: [StandInLog.Argument] = []
        /// Reserves space.
        public init(literalCapacity: Int, interpolationCount: Int) {}
        /// A literal segment.
        public mutating func appendLiteral(_ literal: String) { text += literal }
        /// A string argument with its privacy.
        public mutating func appendInterpolation(_ argumentString: @autoclosure @escaping () -> String, privacy: OSLogPrivacy = .auto) {
            let value = argumentString()
            arguments.append(StandInLog.Argument(value: value, privacy: privacy))
            text += privacy.redactsStrings ? "<private>" : value
        }
    }
    let text: String
    let arguments: [StandInLog.Argument]
    /// A message from an interpolated literal.
    public init(stringInterpolation: StringInterpolation) {
        text = stringInterpolation.text
        arguments = stringInterpolation.arguments
    }
    /// A message from a literal.
    public init(stringLiteral value: String) {
        text = value
        arguments = []
    }
}

/// Stand-in: `os.Logger`.
public struct Logger: Sendable {
    let subsystem: String
    let category: String
    /// A logger for a subsystem and category.
    public init(subsystem: String, category: String) {
        self.subsystem = subsystem
        self.category = category
    }
    /// Logs a message at a level.
    public func log(level: OSLogType, _ message: OSLogMessage) {
        let entry = StandInLog.Entry(subsystem: subsystem, category: category, type: level, text: message.text, arguments: message.arguments)
        StandInLog.entries.withLock { $0.append(entry) }
    }
}

/// Stand-in only: what was logged.
public enum StandInLog {
    /// One interpolated argument: its value and the privacy it was logged with.
    public struct Argument: Sendable, Equatable {
        /// The value (what a debugger attached to the process sees).
        public let value: String
        /// Its privacy.
        public let privacy: OSLogPrivacy
        /// An argument (to compare with what was logged).
        public init(value: String, privacy: OSLogPrivacy) {
            self.value = value
            self.privacy = privacy
        }
    }

    /// One logged line.
    public struct Entry: Sendable, Equatable {
        /// Its subsystem.
        public let subsystem: String
        /// Its category.
        public let category: String
        /// Its type.
        public let type: OSLogType
        /// The text as the persistent log shows it without a profile (redacted arguments as `<private>`).
        public let text: String
        /// The interpolated arguments, in order.
        public let arguments: [Argument]
    }
    /// Everything logged so far.
    public static let entries = Mutex<[Entry]>([])
}
#endif
