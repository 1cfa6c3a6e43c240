import Crypto
import Foundation
import SealedPushFCM
import SealedPushWire
import Testing
import _CryptoExtras

@Suite("RS256 assertion")
struct AssertionTests {
    let now: Int64 = 1_800_000_000

    /// Signs any header and claims with `key`, as an attacker or a broken signer might.
    func sign(header: JSONObject, claims: JSONObject, key: _RSA.Signing.PrivateKey) throws -> String {
        let input = Fixtures.base64URL(Fixtures.jsonBytes(header)) + "." + Fixtures.base64URL(Fixtures.jsonBytes(claims))
        let signature = try key.signature(for: Array(input.utf8), padding: .insecurePKCS1v1_5)
        return input + "." + Fixtures.base64URL(Array(signature.rawRepresentation))
    }

    func claims(iss: String? = nil, scope: String = FCMAssertion.scope, aud: String = Fixtures.tokenURI, iat: Int64, exp: Int64) throws -> JSONObject {
        JSONObject([("iss", .string(try iss ?? Fixtures.account().clientEmail)), ("scope", .string(scope)), ("aud", .string(aud)),
                    ("iat", .int(iat)), ("exp", .int(exp))])
    }

    let rs256 = JSONObject([("alg", .string("RS256")), ("typ", .string("JWT"))])

    func verify(_ jwt: String) throws -> Result<FCMAssertion.Claims, FCMAssertion.Rejection> {
        let account = try Fixtures.account()
        return FCMAssertion.verify(jwt, publicKey: account.publicKey, issuer: account.clientEmail, audience: Fixtures.tokenURI, now: now)
    }

    @Test("Python's cryptography verifies the RS256 signature; header and claims are §2's")
    func pythonVerifies() throws {
        let account = try Fixtures.account()
        let jwt = try FCMAssertion.make(account: account, issuedAt: now)
        let script = """
        import sys, json, base64
        from cryptography.hazmat.primitives import serialization, hashes
        from cryptography.hazmat.primitives.asymmetric import padding
        d = json.load(sys.stdin)
        h, c, s = d["jwt"].split(".")
        def b(x): return base64.urlsafe_b64decode(x + "=" * (-len(x) % 4))
        key = serialization.load_pem_public_key(d["pem"].encode())
        key.verify(b(s), (h + "." + c).encode(), padding.PKCS1v15(), hashes.SHA256())
        print(json.dumps({"header": json.loads(b(h)), "claims": json.loads(b(c)), "bits": key.key_size}))
        """
        let input = Fixtures.jsonBytes(JSONObject([("jwt", .string(jwt)), ("pem", .string(account.publicKey.pemRepresentation))]))
        let result = try Fixtures.runPython(script, input: input)
        #expect(result.status == 0, "python: \(result.stderr)")
        guard case let .object(out)? = try? JSON.parse(result.stdout) else { Issue.record("python printed \(result.stdoutText)"); return }
        #expect(out["header"] == .object(JSONObject([("alg", .string("RS256")), ("typ", .string("JWT")), ("kid", .string(account.privateKeyID))])))
        #expect(out["claims"] == .object(JSONObject([
            ("iss", .string(account.clientEmail)), ("scope", .string("https://www.googleapis.com/auth/firebase.messaging")),
            ("aud", .string(Fixtures.tokenURI)), ("iat", .int(now)), ("exp", .int(now + 3600)),
        ])))
        #expect(out["bits"] == .int(2048))
    }

    @Test("Our verifier accepts our assertion and reads its claims")
    func verifierAccepts() throws {
        let account = try Fixtures.account()
        let jwt = try FCMAssertion.make(account: account, issuedAt: now - 10)
        let claims = try verify(jwt).get()
        #expect(claims == FCMAssertion.Claims(keyID: account.privateKeyID, issuer: account.clientEmail, scope: FCMAssertion.scope,
                                              audience: Fixtures.tokenURI, issuedAt: now - 10, expiresAt: now + 3590))
    }

    @Test("The verifier refuses wrong claims, another key, and every algorithm but RS256")
    func verifierRejections() throws {
        let key = try Fixtures.account().privateKey
        let ok = try claims(iat: now, exp: now + 3600)
        #expect(try verify(sign(header: rs256, claims: ok, key: key)).map { $0.issuedAt } == .success(now))
        #expect(try verify(sign(header: rs256, claims: claims(scope: "https://www.googleapis.com/auth/cloud-platform", iat: now, exp: now + 3600), key: key)) == .failure(.wrongScope))
        #expect(try verify(sign(header: rs256, claims: claims(aud: "https://oauth2.googleapis.com/token", iat: now, exp: now + 3600), key: key)) == .failure(.wrongAudience))
        #expect(try verify(sign(header: rs256, claims: claims(iss: "someone@else.iam.gserviceaccount.com", iat: now, exp: now + 3600), key: key)) == .failure(.wrongIssuer))
        // Expired: issued 50 minutes ago with a 30-minute life.
        #expect(try verify(sign(header: rs256, claims: claims(iat: now - 3000, exp: now - 1200), key: key)) == .failure(.expired))
        // iat more than an hour old (with an exp still ahead).
        #expect(try verify(sign(header: rs256, claims: claims(iat: now - 3601, exp: now + 100), key: key)) == .failure(.issuedAtOutOfRange))
        // iat from the future beyond the clock skew.
        #expect(try verify(sign(header: rs256, claims: claims(iat: now + 301, exp: now + 3000), key: key)) == .failure(.issuedAtOutOfRange))
        // exp more than an hour after iat, or not after it.
        #expect(try verify(sign(header: rs256, claims: claims(iat: now, exp: now + 3601), key: key)) == .failure(.invalidLifetime))
        #expect(try verify(sign(header: rs256, claims: claims(iat: now, exp: now), key: key)) == .failure(.invalidLifetime))
        // Signed by another key.
        let other = try Fixtures.other.get().account.privateKey
        #expect(try verify(sign(header: rs256, claims: ok, key: other)) == .failure(.badSignature))
        // Tampered claims under a valid signature.
        let good = try sign(header: rs256, claims: ok, key: key)
        let parts = good.split(separator: ".")
        let forged = parts[0] + "." + Fixtures.base64URL(Fixtures.jsonBytes(try claims(iss: "attacker@evil.example", iat: now, exp: now + 3600))) + "." + parts[2]
        #expect(try verify(String(forged)) == .failure(.badSignature))
        // alg none, unsigned.
        let none = Fixtures.base64URL(Fixtures.jsonBytes(JSONObject([("alg", .string("none")), ("typ", .string("JWT"))]))) + "."
            + Fixtures.base64URL(Fixtures.jsonBytes(ok)) + "."
        #expect(try verify(none) == .failure(.unsupportedAlgorithm("none")))
        // HS256 keyed with the public key's bytes (the algorithm-confusion attack).
        let hsHeader = Fixtures.base64URL(Fixtures.jsonBytes(JSONObject([("alg", .string("HS256")), ("typ", .string("JWT"))])))
        let hsInput = hsHeader + "." + Fixtures.base64URL(Fixtures.jsonBytes(ok))
        let mac = HMAC<SHA256>.authenticationCode(for: Array(hsInput.utf8), using: SymmetricKey(data: Array(try Fixtures.account().publicKey.pemRepresentation.utf8)))
        #expect(try verify(hsInput + "." + Fixtures.base64URL(Array(mac))) == .failure(.unsupportedAlgorithm("HS256")))
        // Not a JWT.
        #expect(try verify("abc") == .failure(.malformed))
        #expect(try verify("a.b.c") == .failure(.malformed))
    }
}
