import ArgumentParser
package import SealedPushAPNsCore
import SealedPushCrypto
package import SealedPushDevice
import SealedPushKeychain
import SealedPushReceiptsDatabase
package import SealedPushSender
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
        case let error as SenderError: message(error)
        case let error as ExpandError: message(error)
        case let error as KeyRecordError: error.description
        case let error as KeychainError: error.description
        case let error as ReceiptsDatabaseError: error.description
        case let error as any CustomStringConvertible: error.description
        default: String(describing: error)
        }
    }

    /// Sender errors; the reveal ones name the commands that fix them (`keys generate` without --no-reveal,
    /// `keys add-reveal`) and the flags whose text must shrink.
    package static func message(_ error: SenderError) -> String {
        switch error {
        case let .noRevealKey(deviceKeyID):
            "the device key record \(deviceKeyID) has no reveal key, so --reveal cannot seal to it (the text is never sealed to the "
                + "device key instead): on the device run `sealedpush keys add-reveal` (or make its keys with `sealedpush keys generate` "
                + "without --no-reveal) and use the record it prints, or send without --reveal"
        case let .revealTooLarge(size, limit, largestText) where largestText > 0:
            "the reveal message would be \(size) bytes, over the APNs limit of \(limit) bytes (its text is sealed twice): "
                + "--title, --subtitle and --body together may hold at most \(largestText) bytes of plain text with the other options as given; shorten them"
        default:
            error.description
        }
    }

    /// `device expand` errors: an unknown request id names `device notifications`; an unreadable store says how to start over.
    package static func message(_ error: ExpandError) -> String {
        switch error {
        case let .unknownRequest(id):
            "no notification with request id '\(id)' is in this device's notification store; `sealedpush device notifications` "
                + "lists the stored ones (the request id is also in `device push --json`)"
        case let .storeUnreadable(underlying):
            "the device's notification store cannot be read (\(underlying.description)); nothing was expanded"
        }
    }

    /// A keychain error of a `keys` command, in the CLI's terms: the commands and flags that fix it for
    /// a key of `kind` (device or reveal), the store directory named.
    static func keys(_ error: KeychainError, kind: DeviceKeyKind, operation: KeysOperation, directory dir: String,
                     keyID: KeyID? = nil) -> CLIError {
        let noun = kind == .reveal ? "reveal key" : "device key"
        let rotate = "`sealedpush keys rotate\(kind == .reveal ? " --reveal" : "") --keychain \(dir)`"
        switch error {
        case .interactionNotAllowed where kind == .reveal:
            return CLIError("the simulated phone is locked and the reveal key is kept whenUnlockedThisDeviceOnly, so it cannot be "
                            + "written now: unlock it with `sealedpush device unlock --keychain \(dir)` and run the command again"
                            + (operation == .generate ? " (or pass --no-reveal to make only the device key)" : ""))
        case let .activeKeyExists(keyID) where operation == .addReveal:
            return CLIError("the store at \(dir) already has active reveal key \(keyID): nothing to add; "
                            + "`sealedpush keys rotate --reveal --keychain \(dir)` replaces it")
        case let .activeKeyExists(keyID):
            return CLIError("the store at \(dir) already has an active key (\(keyID)): `sealedpush keys rotate --keychain \(dir)` replaces "
                            + "the device key, `sealedpush keys rotate --reveal --keychain \(dir)` the reveal key, and "
                            + "`sealedpush keys add-reveal --keychain \(dir)` gives a device without a reveal key one")
        case .noActiveKey where kind == .reveal && operation == .rotate:
            return CLIError("the store at \(dir) has no active reveal key to rotate: add one with `sealedpush keys add-reveal --keychain \(dir)`")
        case let .activeKeyRefused(keyID, _) where operation == .retire:
            return CLIError("key \(keyID) is the active \(noun) and cannot be retired directly: \(rotate) makes a new active one and retires it")
        case let .activeKeyRefused(keyID, _) where operation == .destroy:
            return CLIError("key \(keyID) is the active \(noun): destroying it would leave none to use; run \(rotate) first, or pass --force")
        case .itemNotFound where operation == .retire || operation == .destroy:
            return CLIError("no device or reveal key \(keyID?.hex ?? "with that id") in \(dir) (see `sealedpush keys list --keychain \(dir)`)")
        default:
            return cliError(error, directory: dir, role: .device)
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

/// What a `keys` command was doing when a keychain error ended it (`CLIErrors.keys`).
enum KeysOperation {
    case generate, addReveal, rotate, list, export, retire, destroy, prune
}
