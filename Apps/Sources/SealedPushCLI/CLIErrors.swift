import ArgumentParser
package import SealedPushAPNsCore
import SealedPushKeychain
import SealedPushReceiptsDatabase
import SealedPushSender
import SealedPushWire

/// The one place where the libraries' typed errors become messages in the CLI's terms (its flags and
/// commands), as SwiftPM's `SwiftCommand` does: commands let library errors propagate, and
/// `CommandMain` maps whatever ends a command here before ArgumentParser prints it.
///
/// Errors that need a command's context (which store, which role) are mapped where that context is:
/// `cliError(_:directory:role:)` for keychain errors.
package enum CLIErrors {
    /// `error` as the command should end with it: ArgumentParser's own errors and exit codes unchanged,
    /// everything else a `CLIError` whose text says what to do.
    package static func userFacing(_ error: any Error) -> any Error {
        switch error {
        case is CLIError, is ExitCode, is ValidationError, is CleanExit, is CancellationError: return error
        default:
            // ArgumentParser's parse errors (CommandError is internal to it) pass through untouched.
            if String(reflecting: type(of: error)).hasPrefix("ArgumentParser.") { return error }
            return CLIError(message(error))
        }
    }

    /// The CLI's message for a library error.
    package static func message(_ error: any Error) -> String {
        switch error {
        case let error as CLIError: error.description
        case let error as APNsError: message(error)
        case let error as SenderError: error.description
        case let error as KeyRecordError: error.description
        case let error as KeychainError: error.description
        case let error as ReceiptsDatabaseError: error.description
        case let error as any CustomStringConvertible: error.description
        default: String(describing: error)
        }
    }

    /// APNs errors name `send`'s flags: `--auth-key`, `--key-id`, `--team-id`, `--ca-cert`, `--environment`.
    package static func message(_ error: APNsError) -> String {
        switch error {
        case .authKey(.invalidKeyID(let length)):
            "--key-id must be the 10 letters and digits Apple shows for the key (AuthKey_KEYID.p8); got \(length) characters"
        case .authKey(.invalidTeamID(let length)):
            "--team-id must be the 10 letters and digits of your Apple Developer team; got \(length) characters"
        case .authKey(let problem):
            "--auth-key: \(problem)"
        case .untrustedServer:
            "the APNs server's TLS certificate is not trusted; for a local APNs pass its CA certificate with --ca-cert FILE "
                + "(the ca.pem that `sealedpush-server apns serve` writes)"
        case .connection(.refused, let tries):
            "could not reach APNs (\(tries) \(tries == 1 ? "try" : "tries")): the connection was refused; check that the server "
                + "is running and --environment"
        case .connection(.unreachable, let tries):
            "could not reach APNs (\(tries) \(tries == 1 ? "try" : "tries")): the host could not be reached; check --environment "
                + "and the network"
        case .timedOut(let tries):
            "APNs did not answer within the deadline (\(tries) \(tries == 1 ? "try" : "tries")); check the network or raise --timeout"
        default:
            error.description
        }
    }
}
