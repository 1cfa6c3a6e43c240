package import ArgumentParser
import Dispatch
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging

/// The `sealedpush` command: end-to-end encrypted push notifications, sender and device side.
package struct SealedPushCommand: AsyncParsableCommand {
    package init() {}

    package static let configuration = CommandConfiguration(
        commandName: "sealedpush",
        abstract: "End-to-end encrypted push notifications: seal on the server, open in the notification service extension.",
        discussion: """
            Secret stores (device keys, sender keys, trust, lock state) live under a keychain directory:
            --keychain DIR, else $SEALEDPUSH_KEYCHAIN, else ./keys.
            """,
        version: "0.1.0",
        subcommands: subcommands
    )

    /// Every subcommand of the light CLI. The servers (`apns serve`, `media serve`, `receipts serve|stats`)
    /// and the demo are `sealedpush-server`'s.
    static var subcommands: [any ParsableCommand.Type] {
        [SealCommand.self, SendCommand.self, KeysCommand.self, SenderCommand.self, TrustCommand.self, DeviceCommand.self]
    }
}

/// A process entry point: logging to standard error, then ArgumentParser's parse and run of `Root`.
///
/// A synchronous `main` that waits for the command's task, instead of Swift's async `main`: the
/// async form ends the main thread with `dispatch_main()` → `pthread_exit`, whose forced unwind makes
/// the unwinder index every frame description of this static binary (about a third of
/// `device push`'s page faults).
package enum CommandMain {
    /// Sends logs (reason codes only, never plaintext or keys) to standard error, so standard output
    /// stays exactly the payload or JSON a command promises; `SEALEDPUSH_LOG_LEVEL` picks the level
    /// (default `notice`). Then parses and runs the command as ArgumentParser's own `main` does.
    package static func run<Root: ParsableCommand>(_ root: Root.Type) {
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            let level = ProcessInfo.processInfo.environment["SEALEDPUSH_LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:))
            handler.logLevel = CLILogging.level(environment: level)
            return handler
        }
        let command: any ParsableCommand
        do { command = try Root.parseAsRoot() } catch { Root.exit(withError: CLIErrors.userFacing(error)) }
        guard let asyncCommand = command as? any AsyncParsableCommand else {
            var syncCommand = command
            do { try syncCommand.run() } catch { Root.exit(withError: CLIErrors.userFacing(error)) }
            return
        }
        let run = CommandRun(asyncCommand)
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await run.run()
            done.signal()
        }
        done.wait()
        if let error = run.error { Root.exit(withError: CLIErrors.userFacing(error)) }
    }
}

/// One async command run on the cooperative pool while the main thread waits for it.
///
/// `@unchecked Sendable`: the command is handed over before the task starts and only the task touches
/// it; `error` is written by the task before it signals the semaphore the main thread waits on, and
/// read by the main thread only after that wait (the semaphore orders the two).
final class CommandRun: @unchecked Sendable {
    private var command: any AsyncParsableCommand
    private(set) var error: (any Error)?

    init(_ command: any AsyncParsableCommand) {
        self.command = command
    }

    func run() async {
        do { try await command.run() } catch { self.error = error }
    }
}
