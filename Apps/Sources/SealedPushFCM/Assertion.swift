public import _CryptoExtras
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import SealedPushWire
import SealedPushCrypto

/// The OAuth 2.0 JWT-bearer assertion a service account exchanges for an FCM access token (RFC 7523): header
/// `{"alg":"RS256","typ":"JWT","kid":private_key_id}`, claims `{"iss":client_email,"scope":…firebase.messaging,
/// "aud":token_uri,"iat","exp":iat+3600}`, signed RS256 (RSASSA-PKCS1-v1_5 with SHA-256, as JWT's RS256 is defined).
public enum FCMAssertion {
    /// The OAuth scope that lets a token send FCM messages.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
    /// How long an assertion is valid, in seconds (`exp` − `iat`; Google's maximum).
    public static let lifetime: Int64 = 3600
    /// How far in the future the verifier lets `iat` be (clock skew between the signer and the verifier), in seconds.
    public static let allowedClockSkew: Int64 = 300

    /// An assertion signed by `account`, issued at `issuedAt` (Unix seconds). Its `aud` is the account's `token_uri`
    /// (§2), also when the configuration sends it to another `token_url` (a local FCM checks it against the file's).
    public static func make(account: FCMServiceAccount, issuedAt: Int64) throws(FCMAccessTokenError) -> String {
        let header = JSON.serialize(.object(JSONObject([
            ("alg", .string("RS256")), ("typ", .string("JWT")), ("kid", .string(account.privateKeyID)),
        ])))
        let claims = JSON.serialize(.object(JSONObject([
            ("iss", .string(account.clientEmail)),
            ("scope", .string(scope)),
            ("aud", .string(account.tokenURI)),
            ("iat", .int(issuedAt)),
            ("exp", .int(issuedAt + lifetime)),
        ])))
        let signingInput = base64URL(header) + "." + base64URL(claims)
        let signature: _RSA.Signing.RSASignature
        do { signature = try account.privateKey.signature(for: Array(signingInput.utf8), padding: .insecurePKCS1v1_5) } catch {
            throw .signingFailed
        }
        return signingInput + "." + base64URL(Array(signature.rawRepresentation))
    }

    /// What a verified assertion says.
    public struct Claims: Sendable, Equatable {
        /// The header's `kid`, when given.
        public let keyID: String?
        /// `iss`: the service account's e-mail address.
        public let issuer: String
        /// `scope`.
        public let scope: String
        /// `aud`: the token URL.
        public let audience: String
        /// `iat`, Unix seconds.
        public let issuedAt: Int64
        /// `exp`, Unix seconds.
        public let expiresAt: Int64

        /// Claims from their parts.
        public init(keyID: String?, issuer: String, scope: String, audience: String, issuedAt: Int64, expiresAt: Int64) {
            self.keyID = keyID
            self.issuer = issuer
            self.scope = scope
            self.audience = audience
            self.issuedAt = issuedAt
            self.expiresAt = expiresAt
        }
    }

    /// Why an assertion was refused (the local FCM answers `400 invalid_grant` with this as its description).
    public enum Rejection: Error, Sendable, Equatable, CustomStringConvertible {
        /// Not three base64url parts, or a part is not a JSON object, or a claim has the wrong type.
        case malformed
        /// The header's `alg` is not `RS256` (`none`, `HS256`, … are never accepted); holds what it said.
        case unsupportedAlgorithm(String)
        /// The header's `typ` is given and is not `JWT`.
        case wrongType
        /// The signature does not verify under the service account's public key.
        case badSignature
        /// `iss` is not the service account's `client_email`.
        case wrongIssuer
        /// `scope` does not include the FCM scope.
        case wrongScope
        /// `aud` is not the token URL.
        case wrongAudience
        /// `iat` is more than an hour in the past, or more than the allowed skew in the future.
        case issuedAtOutOfRange
        /// `exp` is not after `iat`, or more than an hour after it.
        case invalidLifetime
        /// `exp` has passed.
        case expired

        /// Why, in words.
        public var description: String {
            switch self {
            case .malformed: "the assertion is not a JWT with the required claims"
            case let .unsupportedAlgorithm(alg): "the assertion's alg must be RS256 (got \(alg.prefix(16)))"
            case .wrongType: "the assertion's typ must be JWT"
            case .badSignature: "the assertion's signature does not verify under the service account's key"
            case .wrongIssuer: "the assertion's iss is not the service account's client_email"
            case .wrongScope: "the assertion's scope does not include \(FCMAssertion.scope)"
            case .wrongAudience: "the assertion's aud is not this token endpoint"
            case .issuedAtOutOfRange: "the assertion's iat is not within an hour of now"
            case .invalidLifetime: "the assertion's exp must be after iat and at most an hour after it"
            case .expired: "the assertion has expired"
            }
        }
    }

    /// Verifies `assertion` as a token endpoint does: RS256 under `publicKey`, `iss` = `issuer`, `scope` includes
    /// the FCM scope (space-separated), `aud` = `audience`, `iat` within an hour before `now` (and at most
    /// `allowedClockSkew` after it), `exp` after `iat`, at most an hour after it, and after `now`.
    public static func verify(_ assertion: String, publicKey: _RSA.Signing.PublicKey, issuer: String, audience: String,
                              now: Int64) -> Result<Claims, Rejection> {
        guard assertion.utf8.count <= 16 * 1024 else { return .failure(.malformed) }
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = decodeBase64URL(parts[0]), let claimBytes = decodeBase64URL(parts[1]),
              let signatureBytes = decodeBase64URL(parts[2]),
              case let .object(header)? = try? JSON.parse(headerBytes, maxDepth: 4),
              case let .object(claims)? = try? JSON.parse(claimBytes, maxDepth: 4)
        else { return .failure(.malformed) }
        guard let alg = header["alg"]?.stringValue else { return .failure(.malformed) }
        guard alg == "RS256" else { return .failure(.unsupportedAlgorithm(alg)) }
        if let typ = header["typ"] {
            guard typ.stringValue == "JWT" else { return .failure(.wrongType) }
        }
        let kid: String?
        switch header["kid"] {
        case nil: kid = nil
        case let .string(value)?: kid = value
        default: return .failure(.malformed)
        }
        let signingInput = Array((parts[0] + "." + parts[1]).utf8)
        guard signatureBytes.count * 8 == publicKey.keySizeInBits,
              publicKey.isValidSignature(_RSA.Signing.RSASignature(rawRepresentation: signatureBytes), for: signingInput,
                                         padding: .insecurePKCS1v1_5)
        else { return .failure(.badSignature) }
        guard let iss = claims["iss"]?.stringValue, let scopeClaim = claims["scope"]?.stringValue,
              let aud = claims["aud"]?.stringValue, case let .int(iat)? = claims["iat"], case let .int(exp)? = claims["exp"]
        else { return .failure(.malformed) }
        guard iss == issuer else { return .failure(.wrongIssuer) }
        guard scopeClaim.split(separator: " ").contains(where: { $0 == scope }) else { return .failure(.wrongScope) }
        guard aud == audience else { return .failure(.wrongAudience) }
        guard iat >= now - lifetime, iat <= now + allowedClockSkew else { return .failure(.issuedAtOutOfRange) }
        guard exp > iat, exp <= iat + lifetime else { return .failure(.invalidLifetime) }
        guard exp > now else { return .failure(.expired) }
        return .success(Claims(keyID: kid, issuer: iss, scope: scopeClaim, audience: aud, issuedAt: iat, expiresAt: exp))
    }

    /// Base64url without padding (RFC 4648 §5), as JWTs use it (libsodium's, through `SealedPushCrypto`).
    static func base64URL(_ bytes: [UInt8]) -> String {
        Base64.encodeURLSafeNoPadding(bytes)
    }

    /// Decodes canonical unpadded base64url, or `nil`.
    static func decodeBase64URL(_ text: some StringProtocol) -> [UInt8]? {
        try? Base64.decodeURLSafeNoPadding(String(text))
    }
}
