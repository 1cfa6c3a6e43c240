import Foundation
import Logging

// Logs (reason codes only, never plaintext or keys) go to standard error, so standard output stays
// exactly the payload or JSON a command promises. SEALEDPUSH_LOG_LEVEL picks the level (default: notice).
LoggingSystem.bootstrap { label in
    var handler = StreamLogHandler.standardError(label: label)
    let level = ProcessInfo.processInfo.environment["SEALEDPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
    handler.logLevel = level ?? .notice
    return handler
}
await SealedPushCommand.main()
