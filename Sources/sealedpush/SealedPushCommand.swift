import ArgumentParser
import Foundation
import Logging

/// The `sealedpush` command: end-to-end encrypted push notifications, sender and device side.
@main
struct SealedPushCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sealedpush",
        abstract: "End-to-end encrypted push notifications: seal on the server, open in the notification service extension.",
        discussion: """
            Secret stores (device keys, sender keys, trust, lock state) live under a keychain directory:
            --keychain DIR, else $SEALEDPUSH_KEYCHAIN, else ./keys.
            """,
        version: "0.1.0",
        subcommands: [
            SealCommand.self, KeysCommand.self, SenderCommand.self, TrustCommand.self, DeviceCommand.self,
            DemoCommand.self, BenchCommand.self,
        ]
    )

    /// Sends logs (reason codes only, never plaintext or keys) to standard error, so standard output
    /// stays exactly the payload or JSON a command promises; `SEALEDPUSH_LOG_LEVEL` picks the level
    /// (default `notice`). Then parses and runs the command as ArgumentParser's own `main` does.
    static func main() async {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            let level = ProcessInfo.processInfo.environment["SEALEDPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
            handler.logLevel = level ?? .notice
            return handler
        }
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            exit(withError: error)
        }
    }
}
