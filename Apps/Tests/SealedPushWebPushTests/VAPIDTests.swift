import Crypto
import Foundation
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWebPush
import SealedPushWire
import Testing

@Suite("VAPID (RFC 8292): key, token, cache, verifier")
struct VAPIDTests {
    static let origin = "https://push.example.net"
    static let subject = "mailto:ops@example.com"

    // MARK: Key files

    func writeKey(_ text: String, mode: Int = 0o600) throws -> (dir: URL, path: String) {
        let dir = try makeScratchDirectory("vapid")
        let path = dir.appendingPathComponent("vapid.p8").path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode]))
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: path)
        return (dir, path)
    }

    @Test func aGeneratedKeyIsWrittenAndReadBackAsPKCS8PEM() throws {
        let (key, pem) = VAPIDKey.generate()
        let text = String(decoding: pem.unsafeCopyToArray(), as: UTF8.self)
        #expect(text.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let (dir, path) = try writeKey(text)
        defer { try? FileManager.default.removeItem(at: dir) }
        let loaded = try VAPIDKey(pemFile: path)
        #expect(loaded.publicKeyBytes == key.publicKeyBytes)
        #expect(key.publicKeyBytes.count == 65 && key.publicKeyBytes[0] == 4)
        #expect(b64u(key.publicKeyBase64URL) == key.publicKeyBytes)
        #expect(!key.publicKeyBase64URL.contains("=") && key.publicKeyBase64URL.count == 87)
    }

    @Test func keyFilesAreCheckedLikeTheP8() throws {
        let pem = String(decoding: VAPIDKey.generate().pem.unsafeCopyToArray(), as: UTF8.self)
        let (dir, path) = try writeKey(pem, mode: 0o644)
        defer { try? FileManager.default.removeItem(at: dir) }
        #expect(throws: WebPushError.vapidKey(.readableByOthers(path: path, mode: 0o644))) { try VAPIDKey(pemFile: path) }
        let link = dir.appendingPathComponent("link.p8").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: path)
        #expect(throws: WebPushError.vapidKey(.symbolicLink(path: link))) { try VAPIDKey(pemFile: link) }
        #expect(throws: WebPushError.vapidKey(.directory(path: dir.path))) { try VAPIDKey(pemFile: dir.path) }
        let missing = dir.appendingPathComponent("missing.p8").path
        let error = #expect(throws: WebPushError.self) { try VAPIDKey(pemFile: missing) }
        #expect(error == .vapidKey(.unreadable(path: missing)))
        #expect(error?.description.contains("generate-vapid") == true)
    }

    @Test func keyContentsAreChecked() throws {
        let p384 = P384.Signing.PrivateKey().pemRepresentation
        let sec1 = "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n"
        let rows: [(String, WebPushError)] = [
            ("not a key", .vapidKey(.notPEM(source: "k"))),
            (sec1, .vapidKey(.notPEM(source: "k"))),
            ("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----\n", .vapidKey(.invalidBase64(source: "k"))),
            ("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", .vapidKey(.notP256(source: "k"))),
            (p384, .vapidKey(.notP256(source: "k"))),
        ]
        for (text, expected) in rows {
            let error = #expect(throws: WebPushError.self) { try VAPIDKey(pem: SecureBytes(Array(text.utf8)), source: "k") }
            #expect(error == expected)
        }
        #expect(WebPushError.vapidKey(.notPEM(source: "k")).description.contains("openssl pkcs8 -topk8"))
    }

    // MARK: Subject

    @Test(arguments: ["mailto:ops@example.com", "MAILTO:a@b", "https://example.com", "https://example.com/contact"])
    func validSubjects(_ subject: String) throws {
        #expect(try VAPIDSubject(subject).value == subject)
    }

    @Test(arguments: ["", "ops@example.com", "mailto:", "mailto:ops", "mailto:@example.com", "http://example.com",
                      "https://", "https:///path", "mailto:a b@example.com", "https://exämple.com", "tel:+15551234"])
    func invalidSubjects(_ subject: String) {
        let error = #expect(throws: WebPushError.self) { try VAPIDSubject(subject) }
        #expect(error?.description.contains("mailto:") == true)
    }

    // MARK: Tokens

    @Test func aTokenIsAnES256JWTWithAudExpSub() throws {
        let key = VAPIDKey.generate().key
        let token = try VAPIDToken.make(key: key, audience: Self.origin, subject: VAPIDSubject(Self.subject), expiresAt: 1_800_000_000)
        let parts = token.split(separator: ".").map(String.init)
        #expect(parts.count == 3)
        #expect(String(decoding: b64u(parts[0]), as: UTF8.self) == #"{"typ":"JWT","alg":"ES256"}"#)
        #expect(String(decoding: b64u(parts[1]), as: UTF8.self)
            == #"{"aud":"https://push.example.net","exp":1800000000,"sub":"mailto:ops@example.com"}"#)
        #expect(b64u(parts[2]).count == 64)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: b64u(parts[2]))
        #expect(key.privateKey.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)))
        let header = VAPIDToken.authorization(token: token, key: key)
        #expect(header == "vapid t=\(token), k=\(key.publicKeyBase64URL)")
    }

    @Test func theCacheReusesATokenPerOriginUntilAnHourBeforeExp() throws {
        let clock = TestClock(1_700_000_000)
        let cache = VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject(Self.subject), clock: clock.closure)
        let first = try cache.token(origin: Self.origin)
        #expect(first.expiresAt == 1_700_000_000 + 12 * 3600)
        clock.set(1_700_000_000 + 11 * 3600 - 1)
        #expect(try cache.token(origin: Self.origin) == first)
        #expect(try cache.authorization(origin: Self.origin).contains(first.token))
        let other = try cache.token(origin: "https://fcm.googleapis.com")
        #expect(other.token != first.token)
        clock.set(1_700_000_000 + 11 * 3600)
        let renewed = try cache.token(origin: Self.origin)
        #expect(renewed.token != first.token)
        #expect(renewed.expiresAt == 1_700_000_000 + 23 * 3600)
        clock.set(1_700_000_000 + 11 * 3600 + 60)
        #expect(try cache.token(origin: Self.origin) == renewed)
    }

    @Test(arguments: ["https://push.example.net/", "https://push.example.net/wpush/abc", "https://Push.example.net",
                      "https://push.example.net:443", "http://push.example.net", "push.example.net"])
    func theCacheSignsOnlyForOrigins(_ audience: String) throws {
        let cache = VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject(Self.subject), clock: { 0 })
        #expect(throws: WebPushError.invalidAudience) { try cache.token(origin: audience) }
    }

    @Test func theCacheIsBoundedAndSafeAcrossTasks() async throws {
        let clock = TestClock(1_700_000_000)
        let cache = VAPIDTokenCache(key: VAPIDKey.generate().key, subject: try VAPIDSubject(Self.subject), capacity: 8, clock: clock.closure)
        try await withThrowingTaskGroup(of: String.self) { group in
            for i in 0..<64 { group.addTask { try cache.token(origin: "https://p\(i % 16).example.net").token } }
            for try await token in group { #expect(!token.isEmpty) }
        }
        let a = try cache.token(origin: "https://p1.example.net")
        #expect(try cache.token(origin: "https://p1.example.net") == a)
    }

    // MARK: Verifier

    static let now: Int64 = 1_700_000_000

    func verifier() -> VAPIDVerifier { VAPIDVerifier(origin: Self.origin, clock: { Self.now }) }

    func header(key: VAPIDKey, audience: String = origin, exp: Int64 = now + 12 * 3600, k: String? = nil) throws -> String {
        let token = try VAPIDToken.make(key: key, audience: audience, subject: VAPIDSubject(Self.subject), expiresAt: exp)
        return "vapid t=\(token), k=\(k ?? key.publicKeyBase64URL)"
    }

    /// A token with any header and claims JSON, signed by `key`.
    func signed(_ headerJSON: String, _ claimsJSON: String, key: VAPIDKey) throws -> String {
        let input = toB64u(Array(headerJSON.utf8)) + "." + toB64u(Array(claimsJSON.utf8))
        let signature = try key.privateKey.signature(for: Data(input.utf8))
        return "vapid t=\(input).\(toB64u(signature.rawRepresentation)), k=\(key.publicKeyBase64URL)"
    }

    @Test func theVerifierAcceptsTheGatewaysHeader() throws {
        let key = VAPIDKey.generate().key
        let verified = try verifier().verify(authorization: header(key: key), expectedKey: key.publicKeyBytes)
        #expect(verified.claims == VAPIDClaims(audience: Self.origin, expiresAt: Self.now + 12 * 3600, subject: Self.subject))
        #expect(verified.publicKey == key.publicKeyBytes)
        // Exactly 24 hours ahead is allowed; parameters in any order, quoted, other parameters ignored.
        _ = try verifier().verify(authorization: header(key: key, exp: Self.now + 24 * 3600))
        let token = try VAPIDToken.make(key: key, audience: Self.origin, subject: VAPIDSubject(Self.subject), expiresAt: Self.now + 60)
        _ = try verifier().verify(authorization: "Vapid  k=\"\(key.publicKeyBase64URL)\" ,x=y, t=\(token)")
    }

    @Test func theVerifierRefuses() throws {
        let key = VAPIDKey.generate().key, other = VAPIDKey.generate().key
        let good = try header(key: key)
        let t = try VAPIDToken.make(key: key, audience: Self.origin, subject: VAPIDSubject(Self.subject), expiresAt: Self.now + 60)
        let parts = t.split(separator: ".").map(String.init)
        var badSignature = b64u(parts[2])
        badSignature[10] ^= 0x01
        let rows: [(String, String?, WebPushError.VAPIDRefusal)] = [
            ("no header", nil, .missing),
            ("empty", "", .missing),
            ("too long", "vapid t=" + String(repeating: "a", count: 9000), .missing),
            ("bearer", "Bearer \(t)", .malformedHeader),
            ("no k", "vapid t=\(t)", .malformedHeader),
            ("no t", "vapid k=\(key.publicKeyBase64URL)", .malformedHeader),
            ("two t", "vapid t=\(t), t=\(t), k=\(key.publicKeyBase64URL)", .malformedHeader),
            ("scheme only", "vapid", .malformedHeader),
            ("parameter without =", "vapid t=\(t), k", .malformedHeader),
            ("k not a point", "vapid t=\(t), k=AAAA", .invalidKey),
            ("k not base64url", "vapid t=\(t), k=***", .invalidKey),
            ("t not a JWT", "vapid t=abc, k=\(key.publicKeyBase64URL)", .malformedToken),
            ("t JSON garbage", "vapid t=\(toB64u(Array("x".utf8))).\(parts[1]).\(parts[2]), k=\(key.publicKeyBase64URL)", .malformedToken),
            ("wrong k (signed by another key)", try header(key: key, k: other.publicKeyBase64URL), .badSignature),
            ("bad signature", "vapid t=\(parts[0]).\(parts[1]).\(toB64u(badSignature)), k=\(key.publicKeyBase64URL)", .badSignature),
            ("short signature", "vapid t=\(parts[0]).\(parts[1]).\(toB64u(badSignature.prefix(63))), k=\(key.publicKeyBase64URL)", .badSignature),
            ("wrong aud", try header(key: key, audience: "https://other.example.net"), .wrongAudience),
            ("aud with path", try header(key: key, audience: Self.origin + "/"), .wrongAudience),
            ("expired", try header(key: key, exp: Self.now), .expired),
            ("exp over 24 h", try header(key: key, exp: Self.now + 24 * 3600 + 1), .expiryTooFar),
            ("alg none", try signed(#"{"typ":"JWT","alg":"none"}"#, #"{"aud":"https://push.example.net","exp":1700000060,"sub":"mailto:a@b"}"#, key: key), .unsupportedAlgorithm),
            ("alg HS256", try signed(#"{"alg":"HS256"}"#, #"{"aud":"https://push.example.net","exp":1700000060,"sub":"mailto:a@b"}"#, key: key), .unsupportedAlgorithm),
            ("typ not JWT", try signed(#"{"typ":"JOSE+X","alg":"ES256"}"#, #"{"aud":"https://push.example.net","exp":1700000060,"sub":"mailto:a@b"}"#, key: key), .unsupportedAlgorithm),
            ("no exp", try signed(#"{"alg":"ES256"}"#, #"{"aud":"https://push.example.net","sub":"mailto:a@b"}"#, key: key), .missingExpiry),
            ("exp a string", try signed(#"{"alg":"ES256"}"#, #"{"aud":"https://push.example.net","exp":"1700000060","sub":"mailto:a@b"}"#, key: key), .missingExpiry),
            ("no sub", try signed(#"{"alg":"ES256"}"#, #"{"aud":"https://push.example.net","exp":1700000060}"#, key: key), .invalidSubject),
            ("sub not mailto/https", try signed(#"{"alg":"ES256"}"#, #"{"aud":"https://push.example.net","exp":1700000060,"sub":"ops"}"#, key: key), .invalidSubject),
            ("duplicate claim", try signed(#"{"alg":"ES256"}"#, #"{"aud":"https://push.example.net","aud":"x","exp":1700000060,"sub":"mailto:a@b"}"#, key: key), .malformedToken),
        ]
        for (name, value, expected) in rows {
            let error = #expect(throws: WebPushError.self, "\(name)") { try verifier().verify(authorization: value) }
            #expect(error == .vapidRefused(expected), "\(name)")
            #expect(error?.description.contains(t) == false, "\(name): the message must not hold the JWT")
        }
        #expect(throws: WebPushError.vapidRefused(.keyMismatch)) {
            try verifier().verify(authorization: good, expectedKey: other.publicKeyBytes)
        }
    }
}
