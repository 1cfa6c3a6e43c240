import SealedPushCrypto
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Every secret file the gateway reads — an app's APNs key, FCM service account and VAPID key, a webhook secret,
/// the PostgreSQL password file — is read by this one check, with one message style (gateway v1 §1): opened once
/// (a symbolic link, as a Kubernetes or systemd-credentials mount makes, is followed) and checked on the open
/// file, so nothing can be swapped between the check and the read. Refused: anything any user may read or write
/// (`chmod 600`, or 640 for a secret mounted for the gateway's group), a file owned by another user that the
/// gateway's user could write, anything but a regular file. Accepted with a warning: group access. Accepted: a file
/// owned by another user that the gateway can read and not write (a read-only secret mount).
enum GatewaySecretFile {
    /// The bytes of the secret file at `path` and the warning to log about it, if any. `member` is the JSON
    /// pointer of the configuration member naming it; `what` says what the file should hold.
    static func read(_ path: String, member: String, what: String, limit: Int = 64 * 1024) throws(GatewayConfigurationError) -> (bytes: SecureBytes, warning: String?) {
        let read: (bytes: SecureBytes, access: PrivateFile.SecretAccess)
        do { read = try PrivateFile.readSecret(path, limit: limit) } catch {
            throw GatewayConfigurationError(member, problem(error, path: path, what: what))
        }
        var warning: String?
        if read.access.groupAccess {
            warning = "\(member): \(path) can be read by its group (mode \(octal(read.access.mode))): fine for a secret mounted for the gateway's group; otherwise run `chmod 600 \(path)`"
        }
        return (read.bytes, warning)
    }

    /// What is wrong with a secret file and what to do, in one style for every secret file.
    static func problem(_ error: PrivateFile.SecretProblem, path: String, what: String) -> String {
        switch error {
        case let .unreadable(code):
            let reason = code == ENOENT ? "it does not exist" : code == EACCES ? "permission denied" : "error \(code)"
            return "cannot read \(path) (\(reason)); give the path of \(what), readable by the gateway's user"
        case let .notRegularFile(isDirectory):
            return "\(path) is \(isDirectory ? "a directory" : "not a regular file"); give the path of \(what)"
        case let .accessibleByOthers(mode):
            return "\(path) can be read or written by any user (mode \(octal(mode))); run `chmod 600 \(path)` (or 640 for a secret mounted for the gateway's group)"
        case let .writableByThisUser(owner, mode):
            return "\(path) belongs to another user (uid \(owner)) and the gateway's user can write it through its group (mode \(octal(mode))); remove the group's write permission (`chmod 640 \(path)`)"
        case let .tooLarge(limit):
            return "\(path) is larger than \(limit) bytes; give the path of \(what)"
        case let .readFailed(code):
            return "reading \(path) failed (error \(code)); check the file and the disk"
        }
    }

    static func octal(_ mode: UInt32) -> String { String(mode & 0o777, radix: 8) }
}
