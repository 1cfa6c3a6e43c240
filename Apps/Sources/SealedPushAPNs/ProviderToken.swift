public import Crypto
#if canImport(FoundationEssentials)
public import FoundationEssentials
#else
public import Foundation
#endif
import SealedPushWire
public import SealedPushCrypto
public import SealedPushAPNsCore

/// An APNs token-authentication signing key: the P-256 key of an `AuthKey_<KEY_ID>.p8` file with its
/// key id and the team that owns it.
public struct APNsSigningKey: Sendable {
    /// The 10-character key id Apple shows for the key (the `kid` of every token).
    public let keyID: String
    /// The team id (the `iss` of every token).
    public let teamID: String
    /// The private key (held by swift-crypto, which clears it when released).
    public let privateKey: P256.Signing.PrivateKey

    /// A signing key from its parts.
    public init(keyID: String, teamID: String, privateKey: P256.Signing.PrivateKey) {
        self.keyID = keyID
        self.teamID = teamID
        self.privateKey = privateKey
    }

    /// Loads `AuthKey_<KEY_ID>.p8` (PKCS#8 PEM, as Apple's developer site gives it).
    ///
    /// The file is opened once without following a symbolic link, and checked on that descriptor: a regular
    /// file owned by this user and readable by its owner only (`chmod 600`), like every other key file
    /// SealedPush reads. Its bytes, and the DER inside them, stay in wiped storage.
    public init(p8File path: String, keyID: String, teamID: String) throws(APNsError) {
        let text: SecureBytes
        do { text = try PrivateFile.read(path, limit: APNsSigningKey.maximumFileSize) } catch {
            switch error {
            case .unreadable, .readFailed: throw .authKey(.unreadable(path: path))
            case .symbolicLink: throw .authKey(.symbolicLink(path: path))
            case let .notRegularFile(isDirectory): throw .authKey(isDirectory ? .directory(path: path) : .notRegularFile(path: path))
            case .notOwner: throw .authKey(.notOwner(path: path))
            case let .accessibleByOthers(mode): throw .authKey(.readableByOthers(path: path, mode: Int(mode)))
            case let .tooLarge(limit): throw .authKey(.tooLarge(path: path, limit: limit))
            }
        }
        try self.init(pem: text, keyID: keyID, teamID: teamID, source: path)
    }

    /// The largest `.p8` file read (Apple's are about 250 bytes).
    public static let maximumFileSize = 16 * 1024

    /// A signing key from the bytes of a `.p8` file (`source` names it in errors). The caller clears `pem`.
    public init(pem: Data, keyID: String, teamID: String, source: String = "the APNs auth key") throws(APNsError) {
        try self.init(pem: SecureBytes(pem), keyID: keyID, teamID: teamID, source: source)
    }

    /// A signing key from the bytes of a `.p8` file held in wiped storage (`source` names it in errors).
    public init(pem: SecureBytes, keyID: String, teamID: String, source: String = "the APNs auth key") throws(APNsError) {
        guard APNsSigningKey.isValidID(keyID) else {
            throw .authKey(.invalidKeyID(length: keyID.count))
        }
        guard APNsSigningKey.isValidID(teamID) else {
            throw .authKey(.invalidTeamID(length: teamID.count))
        }
        let der: SecureBytes
        do { der = try PEM.decode(pem, label: "PRIVATE KEY") } catch {
            switch error {
            case .noBlock: throw .authKey(.notPEM(source: source))
            case .invalidBase64: throw .authKey(.invalidBase64(source: source))
            }
        }
        // swift-crypto reads the DER in place (it copies the scalar into BoringSSL's own key, cleared on release).
        do {
            privateKey = try der.withUnsafeBytes { bytes in try P256.Signing.PrivateKey(derRepresentation: bytes) }
        } catch {
            throw .authKey(.notP256(source: source))
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Key and team ids are 10 ASCII letters and digits.
    public static func isValidID(_ id: String) -> Bool {
        id.utf8.count == 10 && id.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) }
    }
}

/// What a provider token says: who signed it and when.
public struct ProviderTokenClaims: Sendable, Equatable {
    /// `kid`: the key id.
    public let keyID: String
    /// `iss`: the team id.
    public let teamID: String
    /// `iat`: issued-at, Unix seconds.
    public let issuedAt: Int64
}

/// The APNs provider authentication token: a JWT with header `{"alg":"ES256","kid":KEY_ID}`, claims
/// `{"iss":TEAM_ID,"iat":SECONDS}`, signed with ES256 (P-256, SHA-256, the 64-byte r‖s signature).
public enum ProviderToken {
    /// A token signed by `key`, issued at `issuedAt` (Unix seconds).
    public static func make(key: APNsSigningKey, issuedAt: Int64) throws(APNsError) -> String {
        let header = Base64URL.encode(Array(#"{"alg":"ES256","kid":"\#(key.keyID)"}"#.utf8))
        let claims = Base64URL.encode(Array(#"{"iss":"\#(key.teamID)","iat":\#(issuedAt)}"#.utf8))
        let signingInput = header + "." + claims
        let signature: P256.Signing.ECDSASignature
        do { signature = try key.privateKey.signature(for: Data(signingInput.utf8)) } catch {
            throw .authKey(.signingFailed)
        }
        return signingInput + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    /// Why a token was refused, as the APNs reason it answers with.
    public enum Failure: Error, Sendable, Equatable {
        /// The token is malformed, names an unknown key, or its signature does not verify.
        case invalid
        /// The token's key id is not one APNs knows for the team.
        case unrelatedKey
    }

    /// Reads and verifies `token`: the header must say ES256 with a `kid`, the claims carry `iss` and `iat`,
    /// and the signature must verify under `publicKey(kid)`; `teamOf(kid)` must match `iss`.
    public static func verify(_ token: String, publicKey: (String) -> P256.Signing.PublicKey?,
                              teamOf: (String) -> String?) -> Result<ProviderTokenClaims, Failure> {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let headerBytes = Base64URL.decode(parts[0]), let claimBytes = Base64URL.decode(parts[1]),
              let signatureBytes = Base64URL.decode(parts[2]), signatureBytes.count == 64,
              case let .object(header)? = try? JSON.parse(headerBytes),
              case let .object(claims)? = try? JSON.parse(claimBytes),
              header["alg"]?.stringValue == "ES256",
              let kid = header["kid"]?.stringValue,
              let iss = claims["iss"]?.stringValue,
              case let .int(iat)? = claims["iat"]
        else { return .failure(.invalid) }
        guard let key = publicKey(kid) else { return .failure(.invalid) }
        guard teamOf(kid) == iss else { return .failure(.unrelatedKey) }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes),
              key.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8))
        else { return .failure(.invalid) }
        return .success(ProviderTokenClaims(keyID: kid, teamID: iss, issuedAt: iat))
    }
}

/// Base64url without padding (RFC 4648 §5), as JWTs use it.
public enum Base64URL {
    /// Encodes `bytes`.
    public static func encode(_ bytes: [UInt8]) -> String {
        var s = Data(bytes).base64EncodedString()
        while s.last == "=" { s.removeLast() }
        return String(s.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 })
    }

    /// Decodes `text`, or `nil` when it is not base64url.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        guard text.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5A) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D || $0 == 0x5F })
        else { return nil }
        var s = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        switch s.utf8.count % 4 {
        case 2: s += "=="
        case 3: s += "="
        case 1: return nil
        default: break
        }
        return Data(base64Encoded: s).map { [UInt8]($0) }
    }
}

extension APNsSigningKey {
    /// A new P-256 key as an `AuthKey_<KEY_ID>.p8` would hold it (PKCS#8 PEM), for a local APNs and tests:
    /// Apple's real keys come from the developer site.
    public static func generateForDevelopment(keyID: String, teamID: String) throws(APNsError) -> (key: APNsSigningKey, pem: String) {
        let privateKey = P256.Signing.PrivateKey()
        let pem = privateKey.pemRepresentation
        return (try APNsSigningKey(pem: Data(pem.utf8), keyID: keyID, teamID: teamID), pem)
    }
}
