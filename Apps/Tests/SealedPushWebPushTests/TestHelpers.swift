import Crypto
import Foundation
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Synchronization
import Testing

/// Base64url (with or without padding) to bytes; test constants only.
func b64u(_ text: String) -> [UInt8] {
    var s = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while s.count % 4 != 0 { s += "=" }
    guard let data = Data(base64Encoded: s) else { preconditionFailure("bad test constant \(text)") }
    return [UInt8](data)
}

/// Bytes to unpadded base64url, written independently of the module.
func toB64u(_ bytes: some Sequence<UInt8>) -> String {
    Data(Array(bytes)).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// A clock the tests move by hand (Unix seconds).
final class TestClock: Sendable {
    private let value: Mutex<Int64>
    init(_ start: Int64) { value = Mutex(start) }
    var now: Int64 { value.withLock { $0 } }
    func set(_ seconds: Int64) { value.withLock { $0 = seconds } }
    var closure: UnixClock { { [self] in now } }
}

/// The Python the peer tests run: `$SEALEDPUSH_PYTHON`, else the venv `make pydeps` makes.
enum PythonPeer {
    static var executable: URL { ProjectPaths.python }

    /// Runs `script` with `input` as JSON on standard input and returns its standard output parsed as JSON. A missing
    /// Python or module fails the test, saying to run `make pydeps`.
    static func run(_ script: String, _ input: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONObject {
        try #require(FileManager.default.isExecutableFile(atPath: executable.path),
                     "no Python at \(executable.path): run `make pydeps` (or `make test`), or set SEALEDPUSH_PYTHON",
                     sourceLocation: sourceLocation)
        let result = try ChildProcess.run(executable, ["-c", script], stdin: JSON.serialize(input), timeout: 60)
        if result.stderr.contains("ModuleNotFoundError") {
            Issue.record("Python at \(executable.path) lacks a module (http_ece or cryptography): run `make pydeps`\n\(result.stderr)",
                         sourceLocation: sourceLocation)
        }
        try #require(result.status == 0, "the Python peer failed: \(result.stderr)", sourceLocation: sourceLocation)
        guard case let .object(object) = try JSON.parse(Array(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines).utf8))
        else { throw PeerFailure.notAnObject(result.stdoutText) }
        return object
    }

    enum PeerFailure: Error { case notAnObject(String) }

    /// Helpers every script starts with: base64url both ways.
    static let prelude = """
    import sys, json, base64
    def d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
    def e(b): return base64.urlsafe_b64encode(b).rstrip(b"=").decode()
    req = json.load(sys.stdin)

    """
}

/// RFC 8291 Appendix A: keys, salt, plaintext and the expected body (public test vectors).
enum RFC8291 {
    static let plaintext = Array("When I grow up, I want to be a watermelon".utf8)
    static let asPublic = "BP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A8"
    static let asPrivate = "yfWPiYE-n46HLnH0KqZOF1fJJU3MYrct3AELtAQ-oRw"
    static let uaPublic = "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4"
    static let uaPrivate = "q1dXpw3UpT5VOmu_cf_v6ih07Aems3njxI-JWgLcM94"
    static let salt = "DGv6ra1nlYgDCS1FRnbzlw"
    static let authSecret = "BTBZMqHH6r4Tts7J_aSIgg"
    static let body = "DGv6ra1nlYgDCS1FRnbzlwAAEABBBP4z9KsN6nGRTbVYI_c7VJSPQTBtkgcy27mlmlMoZIIgDll6e3vCYLocInmYWAmS6TlzAC8wEqKK6PBru3jl7A_yl95bQpu6cVPTpK4Mqgkf1CXztLVBSt2Ks3oZwbuwXPXLWyouBWLVWGNWQexSgSxsj_Qulcy4a-fN"
    // Intermediate values of Appendix A (the key derivation, step by step).
    static let ecdhSecret = "kyrL1jIIOHEzg3sM2ZWRHDRB62YACZhhSlknJ672kSs"
    static let prkKey = "Snr3JMxaHVDXHWJn5wdC52WjpCtd2EIEGBykDcZW32k"
    static let ikm = "S4lYMb_L0FxCeq0WhDx813KgSYqU26kOyzWUdsXYyrg"
    static let prk = "09_eUZGrsvxChDCGRCdkLiDXrReGOEVeSCdCcPBSJSc"
    static let cek = "oIhVW04MRdy2XN9CiKLxTg"
    static let nonce = "4h_95klXJ5E_qnoN"

    static func userAgentKeys() throws -> WebPushUserAgentKeys {
        try WebPushUserAgentKeys(privateKey: P256.KeyAgreement.PrivateKey(rawRepresentation: b64u(uaPrivate)),
                                 auth: SecureBytes(b64u(authSecret)))
    }

    static func senderKey() throws -> P256.KeyAgreement.PrivateKey {
        try P256.KeyAgreement.PrivateKey(rawRepresentation: b64u(asPrivate))
    }
}

/// RFC 8291 §3.3–§3.4 written out step by step with HMAC-SHA-256, independently of the module: the tests check it
/// against Appendix A's intermediate values, then use it to seal records the module would never write (bad padding).
enum IndependentRFC8291 {
    struct Steps {
        var ecdhSecret: [UInt8], prkKey: [UInt8], ikm: [UInt8], prk: [UInt8], cek: [UInt8], nonce: [UInt8]
    }

    static func hmac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] {
        Array(HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key)))
    }

    static func steps(sender: P256.KeyAgreement.PrivateKey, uaPublic: [UInt8], auth: [UInt8], salt: [UInt8]) throws -> Steps {
        let ua = try P256.KeyAgreement.PublicKey(x963Representation: uaPublic)
        let ecdh = try sender.sharedSecretFromKeyAgreement(with: ua).withUnsafeBytes { Array($0) }
        let prkKey = hmac(auth, ecdh)
        let keyInfo = Array("WebPush: info".utf8) + [0] + uaPublic + Array(sender.publicKey.x963Representation)
        let ikm = hmac(prkKey, keyInfo + [1])
        let prk = hmac(salt, ikm)
        let cek = Array(hmac(prk, Array("Content-Encoding: aes128gcm".utf8) + [0, 1]).prefix(16))
        let nonce = Array(hmac(prk, Array("Content-Encoding: nonce".utf8) + [0, 1]).prefix(12))
        return Steps(ecdhSecret: ecdh, prkKey: prkKey, ikm: ikm, prk: prk, cek: cek, nonce: nonce)
    }

    /// A body with one record holding exactly `record` (data, delimiter and padding as the caller wants them).
    static func seal(record: [UInt8], uaPublic: [UInt8], auth: [UInt8], rs: UInt32 = 4096,
                     sender: P256.KeyAgreement.PrivateKey = P256.KeyAgreement.PrivateKey(),
                     salt: [UInt8] = Array(repeating: 7, count: 16)) throws -> [UInt8] {
        let s = try steps(sender: sender, uaPublic: uaPublic, auth: auth, salt: salt)
        let box = try AES.GCM.seal(record, using: SymmetricKey(data: s.cek), nonce: AES.GCM.Nonce(data: s.nonce))
        let rsBytes: [UInt8] = [UInt8(rs >> 24 & 0xFF), UInt8(rs >> 16 & 0xFF), UInt8(rs >> 8 & 0xFF), UInt8(rs & 0xFF)]
        return salt + rsBytes + [65] + Array(sender.publicKey.x963Representation) + Array(box.ciphertext) + Array(box.tag)
    }
}
