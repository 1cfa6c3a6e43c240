/// Everything that can go wrong delivering a push through APNs, one case per kind of failure.
public enum APNsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The auth key file (`.p8`), key id or team id is missing, unreadable, readable by others, or not a P-256 key.
    case authKey(AuthKeyProblem)
    /// A request was refused before sending: device token, topic, collapse id or payload size.
    case invalidRequest(String)
    /// APNs answered with an error status and reason (after any retries the reason allows).
    case rejected(APNsRejection)
    /// The server's TLS certificate is not trusted (a local APNs: pass its CA certificate).
    case untrustedServer
    /// No answer within the per-request deadline, on every try.
    case timedOut(tries: Int)
    /// The connection failed on every try.
    case connection(ConnectionFailure, tries: Int)
    /// The client was shut down before the push could be sent.
    case shutDown

    /// What happened and what to do, without secrets.
    public var description: String {
        switch self {
        case let .authKey(problem): return problem.description
        case let .invalidRequest(message): return message
        case let .rejected(rejection): return rejection.description
        case .untrustedServer:
            return "the APNs server's TLS certificate is not trusted; for a local APNs trust its CA certificate (the ca.pem that `sealedpush-server apns serve` writes)"
        case let .timedOut(tries): return "APNs did not answer within the deadline (\(tries) \(tries == 1 ? "try" : "tries")); check the network or raise the timeout"
        case let .connection(failure, tries): return "could not reach APNs (\(tries) \(tries == 1 ? "try" : "tries")): \(failure)"
        case .shutDown: return "the APNs client was shut down before the push was sent"
        }
    }
}

/// Why an APNs auth key (`AuthKey_KEYID.p8`) or its ids cannot be used.
public enum AuthKeyProblem: Sendable, Equatable, CustomStringConvertible {
    /// The file does not exist or cannot be opened.
    case unreadable(path: String)
    /// The path names a directory.
    case directory(path: String)
    /// Group or others may access the file (`mode` holds its permission bits).
    case readableByOthers(path: String, mode: Int)
    /// The path is a symbolic link (a key file is never read through one).
    case symbolicLink(path: String)
    /// The path is not a regular file.
    case notRegularFile(path: String)
    /// Another user owns the file.
    case notOwner(path: String)
    /// The file is far larger than a key file.
    case tooLarge(path: String, limit: Int)
    /// The file is not a PKCS#8 PEM private key (`source` names it).
    case notPEM(source: String)
    /// The PEM body is not valid base64.
    case invalidBase64(source: String)
    /// The key inside is not a P-256 private key.
    case notP256(source: String)
    /// The key id is not 10 letters and digits (`length` is what was given).
    case invalidKeyID(length: Int)
    /// The team id is not 10 letters and digits (`length` is what was given).
    case invalidTeamID(length: Int)
    /// Signing a provider token failed.
    case signingFailed

    /// What happened and what to do (the library's terms; the CLI names its flags instead).
    public var description: String {
        switch self {
        case let .unreadable(path): "cannot read the APNs auth key \(path): it does not exist or is not readable; check the path"
        case let .directory(path): "the APNs auth key \(path) is a directory; pass the AuthKey_KEYID.p8 file"
        case let .readableByOthers(path, mode):
            "the APNs auth key \(path) can be read by others (mode \(String(mode & 0o777, radix: 8))); run `chmod 600 \(path)`"
        case let .symbolicLink(path): "the APNs auth key \(path) is a symbolic link; pass the path of the AuthKey_KEYID.p8 file itself"
        case let .notRegularFile(path): "the APNs auth key \(path) is not a regular file; pass the AuthKey_KEYID.p8 file"
        case let .notOwner(path): "the APNs auth key \(path) belongs to another user; copy it to a file you own and `chmod 600` it"
        case let .tooLarge(path, limit): "the APNs auth key \(path) is over \(limit) bytes, so it is not a .p8 file; pass the AuthKey_KEYID.p8 file"
        case let .notPEM(source):
            "\(source) is not a PKCS#8 PEM private key (no BEGIN/END PRIVATE KEY lines); use the .p8 file Apple's developer site gave you"
        case let .invalidBase64(source): "\(source) holds invalid base64 between its PEM lines; download the key again"
        case let .notP256(source): "\(source) is not a P-256 private key; APNs token keys are the .p8 files from Apple's developer site"
        case let .invalidKeyID(length):
            "the key id must be the 10 letters and digits Apple shows for the key (AuthKey_KEYID.p8); got \(length) characters"
        case let .invalidTeamID(length): "the team id must be the 10 letters and digits of your Apple Developer team; got \(length) characters"
        case .signingFailed: "signing the provider token failed; the auth key may be damaged"
        }
    }
}

/// Why a connection to APNs failed, classified by the transport error's type.
public enum ConnectionFailure: Sendable, Equatable, CustomStringConvertible {
    /// The server refused the connection (nothing listens there).
    case refused
    /// The host could not be reached or its name not resolved.
    case unreachable
    /// The connection was reset or closed before the answer.
    case closed
    /// The TLS handshake failed for a reason other than an untrusted certificate.
    case tlsHandshake
    /// Another transport error; the string names its type (never a payload or a token).
    case other(String)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case .refused: "the connection was refused; check that the server is running and the URL"
        case .unreachable: "the host could not be reached; check the URL and the network"
        case .closed: "the connection was closed before APNs answered"
        case .tlsHandshake: "the TLS handshake failed; check that the URL is an APNs server (HTTP/2 over TLS)"
        case let .other(kind): "a transport error (\(kind))"
        }
    }
}

/// An APNs error response: status, reason, and for `410` the time APNs last knew the token was valid.
public struct APNsRejection: Sendable, Equatable, CustomStringConvertible {
    /// The HTTP status.
    public let status: Int
    /// The `reason` of the JSON body.
    public let reason: APNsReason
    /// The `apns-id` of the response, when given.
    public let apnsID: String?
    /// For `410`: milliseconds since the Unix epoch when APNs confirmed the token was no longer valid.
    public let timestamp: Int64?

    /// A rejection from its parts.
    public init(status: Int, reason: APNsReason, apnsID: String? = nil, timestamp: Int64? = nil) {
        self.status = status
        self.reason = reason
        self.apnsID = apnsID
        self.timestamp = timestamp
    }

    /// Whether the provider should stop sending to the device token (see `APNsReason.stopSendingToToken`).
    public var stopSendingToToken: Bool { reason.stopSendingToToken }

    /// `APNs refused the push: 410 Unregistered (stop sending to this device token)`.
    public var description: String {
        var s = "APNs refused the push: \(status) \(reason.rawValue)"
        if stopSendingToToken { s += " (stop sending to this device token)" }
        return s
    }
}
