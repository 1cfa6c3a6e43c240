import Crypto
import Foundation
import SealedPushCrypto
import SealedPushWebPush
import SealedPushWire
import Testing

/// Web Push against independent implementations: Python's `http_ece` (Mozilla's RFC 8188/8291 library) and
/// `cryptography` (OpenSSL) for ES256. Python comes from `$SEALEDPUSH_PYTHON`, else `<repo>/.build/pyenv`
/// (`make pydeps`); without it these tests fail, saying so.
@Suite("Web Push against Python peers (http_ece, cryptography)", .serialized)
struct PythonPeerTests {
    static let ece = PythonPeer.prelude + """
    import http_ece
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    def key(raw): return ec.derive_private_key(int.from_bytes(d(raw), "big"), ec.SECP256R1())
    if req["op"] == "decrypt":
        out = http_ece.decrypt(d(req["body"]), private_key=key(req["ua_private"]), auth_secret=d(req["auth"]), version="aes128gcm")
        print(json.dumps({"plaintext": e(out)}))
    else:
        sender = key(req["sender_private"]) if "sender_private" in req else ec.generate_private_key(ec.SECP256R1())
        salt = d(req["salt"]) if "salt" in req else None
        out = http_ece.encrypt(d(req["plaintext"]), salt=salt, private_key=sender, dh=d(req["ua_public"]),
                               auth_secret=d(req["auth"]), version="aes128gcm", rs=4096)
        print(json.dumps({"body": e(out)}))
    """

    static func rawKey(_ keys: WebPushUserAgentKeys) -> String {
        keys.rawPrivateKey.withUnsafeBytes { toB64u($0) }
    }

    @Test func httpECEDecryptsWhatWeEncrypt() throws {
        let ua = WebPushUserAgentKeys.generate()
        let encryptor = WebPushEncryptor(subscription: ua.subscriptionKeys)
        for plaintext in [[], RFC8291.plaintext, WebPushBody.plaintext(encryptedData: String(repeating: "QUJD", count: 900)),
                          [UInt8](repeating: 0x5A, count: WebPushBody.maximumPlaintextSize)] {
            let body = try encryptor.encrypt(plaintext)
            let out = try PythonPeer.run(Self.ece, .object(JSONObject([
                ("op", .string("decrypt")), ("body", .string(toB64u(body))),
                ("ua_private", .string(Self.rawKey(ua))), ("auth", .string(ua.subscriptionKeys.authBase64URL)),
            ])))
            #expect(out["plaintext"]?.stringValue.map(b64u) == plaintext, "\(plaintext.count) bytes")
        }
    }

    @Test func weDecryptWhatHttpECEEncrypts() throws {
        let ua = WebPushUserAgentKeys.generate()
        for plaintext in [Array("hello from http_ece".utf8), [UInt8](repeating: 7, count: 3000)] {
            let out = try PythonPeer.run(Self.ece, .object(JSONObject([
                ("op", .string("encrypt")), ("plaintext", .string(toB64u(plaintext))),
                ("ua_public", .string(ua.subscriptionKeys.p256dh)), ("auth", .string(ua.subscriptionKeys.authBase64URL)),
            ])))
            let body = b64u(try #require(out["body"]?.stringValue))
            #expect(try WebPushDecryptor(keys: ua).decrypt(body) == plaintext)
        }
    }

    @Test func httpECEAgreesWithAppendixA() throws {
        let out = try PythonPeer.run(Self.ece, .object(JSONObject([
            ("op", .string("encrypt")), ("plaintext", .string(toB64u(RFC8291.plaintext))), ("sender_private", .string(RFC8291.asPrivate)),
            ("salt", .string(RFC8291.salt)), ("ua_public", .string(RFC8291.uaPublic)), ("auth", .string(RFC8291.authSecret)),
        ])))
        #expect(out["body"]?.stringValue == RFC8291.body)
    }

    static let jwt = PythonPeer.prelude + """
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature, decode_dss_signature
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
    if req["op"] == "verify":
        scheme, rest = req["authorization"].split(" ", 1)
        assert scheme == "vapid"
        params = dict(p.strip().split("=", 1) for p in rest.split(","))
        h, c, s = params["t"].split(".")
        pub = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), d(params["k"]))
        sig = d(s)
        assert len(sig) == 64
        pub.verify(encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")),
                   (h + "." + c).encode(), ec.ECDSA(hashes.SHA256()))
        print(json.dumps({"header": json.loads(d(h)), "claims": json.loads(d(c))}))
    elif req["op"] == "load":
        priv = serialization.load_pem_private_key(req["pem"].encode(), password=None)
        assert isinstance(priv.curve, ec.SECP256R1)
        print(json.dumps({"public": e(priv.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint))}))
    else:
        priv = ec.generate_private_key(ec.SECP256R1())
        h = e(json.dumps({"typ": "JWT", "alg": "ES256"}).encode())
        c = e(json.dumps({"aud": req["aud"], "exp": req["exp"], "sub": "mailto:py@example.com"}).encode())
        r, s = decode_dss_signature(priv.sign((h + "." + c).encode(), ec.ECDSA(hashes.SHA256())))
        k = e(priv.public_key().public_bytes(Encoding.X962, PublicFormat.UncompressedPoint))
        pem = priv.private_bytes(Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
        print(json.dumps({"authorization": "vapid t=%s.%s.%s, k=%s" % (h, c, e(r.to_bytes(32, "big") + s.to_bytes(32, "big")), k),
                          "pem": pem, "public": k}))
    """

    @Test func cryptographyVerifiesOurVAPIDJWT() throws {
        let (key, pem) = VAPIDKey.generate()
        let cache = VAPIDTokenCache(key: key, subject: try VAPIDSubject("mailto:ops@example.com"), clock: { 1_700_000_000 })
        let authorization = try cache.authorization(origin: "https://push.example.net")
        let out = try PythonPeer.run(Self.jwt, .object(JSONObject([("op", .string("verify")), ("authorization", .string(authorization))])))
        #expect(out["header"] == .object(JSONObject([("typ", .string("JWT")), ("alg", .string("ES256"))])))
        #expect(out["claims"] == .object(JSONObject([
            ("aud", .string("https://push.example.net")), ("exp", .int(1_700_000_000 + 12 * 3600)), ("sub", .string("mailto:ops@example.com")),
        ])))
        // The PKCS#8 PEM we write is a P-256 key to OpenSSL, with the public key we print.
        let loaded = try PythonPeer.run(Self.jwt, .object(JSONObject([
            ("op", .string("load")), ("pem", .string(String(decoding: pem.unsafeCopyToArray(), as: UTF8.self))),
        ])))
        #expect(loaded["public"]?.stringValue == key.publicKeyBase64URL)
    }

    @Test func ourVerifierAcceptsAPythonSignedJWTAndLoadsItsPEM() throws {
        let now: Int64 = 1_700_000_000
        let out = try PythonPeer.run(Self.jwt, .object(JSONObject([
            ("op", .string("sign")), ("aud", .string("https://127.0.0.1:8443")), ("exp", .int(now + 3600)),
        ])))
        let authorization = try #require(out["authorization"]?.stringValue)
        let verified = try VAPIDVerifier(origin: "https://127.0.0.1:8443", clock: { now }).verify(authorization: authorization)
        #expect(verified.claims == VAPIDClaims(audience: "https://127.0.0.1:8443", expiresAt: now + 3600, subject: "mailto:py@example.com"))
        #expect(throws: WebPushError.vapidRefused(.wrongAudience)) {
            try VAPIDVerifier(origin: "https://push.example.net", clock: { now }).verify(authorization: authorization)
        }
        let pem = try #require(out["pem"]?.stringValue)
        #expect(try VAPIDKey(pem: SecureBytes(Array(pem.utf8))).publicKeyBase64URL == out["public"]?.stringValue)
    }
}
