/// Why a Google service-account key file cannot be used to send through FCM.
///
/// Every case names the file (`path`, or `source` when the bytes came from elsewhere) and, for its content,
/// the member that is wrong; none ever holds the key or any part of it.
public enum FCMServiceAccountError: Error, Sendable, Equatable, CustomStringConvertible {
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
    /// The file is far larger than a service-account key file.
    case tooLarge(path: String, limit: Int)
    /// The content is not one JSON object (`detail` says where it went wrong, never what the bytes were).
    case notJSON(source: String, detail: String)
    /// A required member is absent.
    case missingMember(source: String, member: String)
    /// A member is present but not what it must be (`expected` says what is required).
    case invalidMember(source: String, member: String, expected: String)
    /// `private_key` holds no `-----BEGIN PRIVATE KEY-----` block (PKCS#8 PEM).
    case notPEM(source: String)
    /// The PEM body of `private_key` is not valid base64.
    case invalidBase64(source: String)
    /// `private_key` is not an RSA private key (or one too damaged to read).
    case notRSA(source: String)
    /// `private_key` is an RSA key shorter than 2048 bits.
    case keyTooSmall(source: String, bits: Int)
    /// Signing with the key failed (on the start-up test signature, or an assertion).
    case signingFailed(source: String)
    /// A test service account could not be made (`detail` says which step failed).
    case generationFailed(detail: String)

    /// What happened and what to do, without the key.
    public var description: String {
        switch self {
        case let .unreadable(path):
            "cannot read the FCM service account \(path): it does not exist or is not readable; check the path"
        case let .directory(path):
            "the FCM service account \(path) is a directory; pass the service-account JSON key file"
        case let .readableByOthers(path, mode):
            "the FCM service account \(path) can be read by others (mode \(String(mode & 0o777, radix: 8))); run `chmod 600 \(path)`"
        case let .symbolicLink(path):
            "the FCM service account \(path) is a symbolic link; pass the path of the JSON key file itself"
        case let .notRegularFile(path):
            "the FCM service account \(path) is not a regular file; pass the service-account JSON key file"
        case let .notOwner(path):
            "the FCM service account \(path) belongs to another user; copy it to a file you own and `chmod 600` it"
        case let .tooLarge(path, limit):
            "the FCM service account \(path) is over \(limit) bytes, so it is not a service-account key file; pass the JSON key file Google gave you"
        case let .notJSON(source, detail):
            "\(source) is not a service-account JSON object (\(detail)); download the key file again from the Google Cloud console"
        case let .missingMember(source, member):
            "\(source) has no \"\(member)\"; a service-account key file from the Google Cloud console has it"
        case let .invalidMember(source, member, expected):
            "\(source): \"\(member)\" must be \(expected)"
        case let .notPEM(source):
            "\(source): \"private_key\" is not a PKCS#8 PEM private key (no BEGIN/END PRIVATE KEY lines); download the key file again"
        case let .invalidBase64(source):
            "\(source): \"private_key\" holds invalid base64 between its PEM lines; download the key file again"
        case let .notRSA(source):
            "\(source): \"private_key\" is not an RSA private key; FCM service accounts use RSA keys (download the key file again)"
        case let .keyTooSmall(source, bits):
            "\(source): \"private_key\" is a \(bits)-bit RSA key; at least 2048 bits are required (create a new key for the service account)"
        case let .signingFailed(source):
            "signing with the key of \(source) failed; the key may be damaged (download the key file again)"
        case let .generationFailed(detail):
            "could not make a test service account: \(detail)"
        }
    }
}

/// Why no OAuth 2.0 access token could be had for FCM.
///
/// Never holds the assertion, the access token or the key.
public enum FCMAccessTokenError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The token endpoint could not be reached, or did not answer in time.
    case unreachable(FCMTransportError)
    /// The token endpoint refused the assertion: its HTTP status and Google's `error` / `error_description`
    /// (printable ASCII, shortened).
    case refused(status: Int, error: String?, errorDescription: String?)
    /// The token endpoint answered 200 with something other than `{"access_token", "expires_in", "token_type": "Bearer"}`
    /// (`detail` names what is wrong).
    case malformedAnswer(detail: String)
    /// Signing the assertion failed.
    case signingFailed

    /// What happened and what to do, without secrets.
    public var description: String {
        switch self {
        case let .unreachable(failure):
            return "could not get an FCM access token: \(failure); check the network and the token URL"
        case let .refused(status, error, errorDescription):
            var text = "the token endpoint refused the service account's assertion (HTTP \(status)"
            if let error { text += ", \(error)" }
            if let errorDescription { text += ": \(errorDescription)" }
            text += ")"
            if status == 400 || status == 401 || status == 403 {
                text += "; check that the service account's key is current (not deleted or disabled) and the machine's clock is right"
            } else {
                text += "; it will be tried again"
            }
            return text
        case let .malformedAnswer(detail):
            return "the token endpoint's answer is not an access token (\(detail)); check the token URL"
        case .signingFailed:
            return "signing the access-token assertion failed; the service account's key may be damaged"
        }
    }

    /// Whether waiting and asking again may help (a network failure, a 429 or a 5xx), as opposed to a refusal
    /// that only a new key or configuration fixes.
    public var isTransient: Bool {
        switch self {
        case .unreachable, .malformedAnswer: true
        case let .refused(status, _, _): status == 429 || status >= 500
        case .signingFailed: false
        }
    }
}

/// Why an HTTP exchange with FCM or its token endpoint did not produce an answer.
public enum FCMTransportError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No answer within the request's timeout.
    case timedOut
    /// The connection could not be made or was lost (`detail` holds no URL, header or body).
    case connection(String)
    /// The server's TLS certificate is not trusted (a local FCM: configure its CA certificate).
    case untrustedServer
    /// The task was cancelled or the transport was shut down.
    case cancelled

    /// What went wrong, without the URL or any header.
    public var description: String {
        switch self {
        case .timedOut: "no answer within the timeout"
        case let .connection(detail): "the connection failed (\(detail))"
        case .untrustedServer:
            "the server's TLS certificate is not trusted; for a local FCM trust its CA certificate (the ca.pem that `sealedpush-server fcm serve --ca-out` wrote)"
        case .cancelled: "cancelled"
        }
    }
}

/// Why an FCM message body could not be built: each is the caller's to fix, never FCM's to answer.
public enum FCMMessageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The registration token is not 1–4096 of `[A-Za-z0-9_:.-]` (`length` is what was given).
    case invalidToken(length: Int)
    /// The priority is neither 10 nor 5.
    case invalidPriority(Int)
    /// The message's data would be `bytes` bytes, over FCM's `limit` (keys and values counted).
    case dataTooLarge(bytes: Int, limit: Int)
    /// The message expired before it could be sent (its `ttl` was not 0).
    case expired
    /// The collapse key is empty or longer than 64 bytes.
    case invalidCollapseKey(length: Int)

    /// What happened and what to do.
    public var description: String {
        switch self {
        case let .invalidToken(length):
            "the FCM registration token must be 1–4096 characters of A–Z a–z 0–9 _ : . - (got \(length) characters); register the device again with the token FirebaseMessaging gives"
        case let .invalidPriority(priority): "the priority must be 10 or 5 (got \(priority))"
        case let .dataTooLarge(bytes, limit):
            "the FCM message's data is \(bytes) bytes (keys and values), over FCM's \(limit); send less content or less padding"
        case .expired: "the message expired before it was sent to FCM"
        case let .invalidCollapseKey(length): "the collapse key must be 1–64 bytes (got \(length))"
        }
    }
}
