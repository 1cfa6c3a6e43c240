import Crypto
import Foundation
import SealedPushCrypto
import SealedPushWebPush
import SealedPushWire
import Testing

@Suite("Web Push encryption: RFC 8291 / RFC 8188 aes128gcm")
struct EncryptionTests {
    // MARK: RFC 8291 Appendix A, both directions

    @Test func appendixAKeysAreTheOnesTheRFCPrints() throws {
        let ua = try RFC8291.userAgentKeys()
        #expect(ua.subscriptionKeys.p256dh == RFC8291.uaPublic)
        #expect(ua.subscriptionKeys.authBase64URL == RFC8291.authSecret)
        #expect(toB64u(try RFC8291.senderKey().publicKey.x963Representation) == RFC8291.asPublic)
    }

    @Test func theIndependentDerivationMatchesAppendixAIntermediateValues() throws {
        let s = try IndependentRFC8291.steps(sender: RFC8291.senderKey(), uaPublic: b64u(RFC8291.uaPublic),
                                             auth: b64u(RFC8291.authSecret), salt: b64u(RFC8291.salt))
        #expect(toB64u(s.ecdhSecret) == RFC8291.ecdhSecret)
        #expect(toB64u(s.prkKey) == RFC8291.prkKey)
        #expect(toB64u(s.ikm) == RFC8291.ikm)
        #expect(toB64u(s.prk) == RFC8291.prk)
        #expect(toB64u(s.cek) == RFC8291.cek)
        #expect(toB64u(s.nonce) == RFC8291.nonce)
    }

    @Test func encryptingAppendixAInputsGivesTheExpectedBodyByteForByte() throws {
        let subscription = try WebPushSubscriptionKeys(p256dh: RFC8291.uaPublic, auth: RFC8291.authSecret)
        let body = try WebPushEncryptor(subscription: subscription)
            .encrypt(RFC8291.plaintext, senderKey: RFC8291.senderKey(), salt: b64u(RFC8291.salt))
        #expect(body == b64u(RFC8291.body))
        #expect(toB64u(body) == RFC8291.body)
    }

    @Test func decryptingAppendixABodyGivesThePlaintext() throws {
        let plaintext = try WebPushDecryptor(keys: RFC8291.userAgentKeys()).decrypt(b64u(RFC8291.body))
        #expect(plaintext == RFC8291.plaintext)
        let (header, length) = try WebPushContentHeader.parse(b64u(RFC8291.body))
        #expect(length == 86)
        #expect(header.recordSize == 4096)
        #expect(header.salt == b64u(RFC8291.salt))
        #expect(toB64u(header.senderPublicKey.x963Representation) == RFC8291.asPublic)
    }

    // MARK: Shape, budget, freshness

    @Test func aBodyIsOneRecordWithHeaderRs4096AndNoFurtherPadding() throws {
        let ua = WebPushUserAgentKeys.generate()
        let plaintext = WebPushBody.plaintext(encryptedData: "AAAA")
        #expect(plaintext == Array(#"{"ENCRYPTED_DATA":"AAAA","sealedpush":1}"#.utf8))
        let body = try WebPushEncryptor(subscription: ua.subscriptionKeys).encrypt(plaintext)
        #expect(body.count == 86 + plaintext.count + 1 + 16)
        #expect(Array(body[16..<21]) == [0, 0, 0x10, 0, 65])
        #expect(body[21] == 0x04)
        #expect(try WebPushDecryptor(keys: ua).decrypt(body) == plaintext)
    }

    @Test func eachBodyHasAFreshKeyAndSalt() throws {
        let ua = WebPushUserAgentKeys.generate()
        let encryptor = WebPushEncryptor(subscription: ua.subscriptionKeys)
        let a = try encryptor.encrypt([1, 2, 3]), b = try encryptor.encrypt([1, 2, 3])
        #expect(a[0..<16] != b[0..<16])
        #expect(a[21..<86] != b[21..<86])
        #expect(try WebPushDecryptor(keys: ua).decrypt(a) == [1, 2, 3])
        #expect(try WebPushDecryptor(keys: ua).decrypt(b) == [1, 2, 3])
    }

    @Test func theBodyBudgetIs4096Bytes() throws {
        let ua = WebPushUserAgentKeys.generate()
        let encryptor = WebPushEncryptor(subscription: ua.subscriptionKeys)
        #expect(WebPushBody.maximumPlaintextSize == 3993)
        let full = [UInt8](repeating: 0x41, count: 3993)
        let body = try encryptor.encrypt(full)
        #expect(body.count == 4096)
        #expect(try WebPushDecryptor(keys: ua).decrypt(body) == full)
        let error = #expect(throws: WebPushError.self) { try encryptor.encrypt(full + [0x41]) }
        #expect(error == .bodyTooLarge(size: 4097, limit: 4096))
        #expect(error?.description.contains("4097") == true && error?.description.contains("4096") == true)
    }

    @Test func anInjectedSaltMustBe16Bytes() throws {
        let encryptor = WebPushEncryptor(subscription: WebPushUserAgentKeys.generate().subscriptionKeys)
        #expect(throws: WebPushError.invalidSalt(length: 15)) { try encryptor.encrypt([1], salt: Array(repeating: 0, count: 15)) }
    }

    @Test func paddingZerosAfterTheDelimiterAreAccepted() throws {
        let ua = WebPushUserAgentKeys.generate()
        let keys = ua.subscriptionKeys
        let body = try IndependentRFC8291.seal(record: Array("hello".utf8) + [2] + Array(repeating: 0, count: 40),
                                              uaPublic: b64u(keys.p256dh), auth: b64u(keys.authBase64URL))
        #expect(try WebPushDecryptor(keys: ua).decrypt(body) == Array("hello".utf8))
        let empty = try IndependentRFC8291.seal(record: [2], uaPublic: b64u(keys.p256dh), auth: b64u(keys.authBase64URL))
        #expect(try WebPushDecryptor(keys: ua).decrypt(empty) == [])
    }

    // MARK: Hostile bodies

    struct Hostile: CustomTestStringConvertible, Sendable {
        let name: String
        let expected: WebPushError.BodyProblem
        let make: @Sendable ([UInt8], WebPushSubscriptionKeys) throws -> [UInt8]
        var testDescription: String { name }
    }

    static func set(_ body: [UInt8], _ index: Int, _ value: UInt8) -> [UInt8] {
        var copy = body
        copy[index] = value
        return copy
    }

    static func withRS(_ body: [UInt8], _ rs: UInt32) -> [UInt8] {
        var copy = body
        copy[16] = UInt8(rs >> 24 & 0xFF); copy[17] = UInt8(rs >> 16 & 0xFF); copy[18] = UInt8(rs >> 8 & 0xFF); copy[19] = UInt8(rs & 0xFF)
        return copy
    }

    static func sealed(_ record: [UInt8], _ keys: WebPushSubscriptionKeys) throws -> [UInt8] {
        try IndependentRFC8291.seal(record: record, uaPublic: b64u(keys.p256dh), auth: b64u(keys.authBase64URL))
    }

    static let hostile: [Hostile] = [
        Hostile(name: "empty", expected: .truncatedHeader(length: 0, needed: 21)) { _, _ in [] },
        Hostile(name: "20 bytes", expected: .truncatedHeader(length: 20, needed: 21)) { b, _ in Array(b.prefix(20)) },
        Hostile(name: "key id cut short", expected: .truncatedHeader(length: 50, needed: 86)) { b, _ in Array(b.prefix(50)) },
        Hostile(name: "rs 0", expected: .recordSizeTooSmall(rs: 0)) { b, _ in withRS(b, 0) },
        Hostile(name: "rs 17", expected: .recordSizeTooSmall(rs: 17)) { b, _ in withRS(b, 17) },
        Hostile(name: "rs 18 with a longer record", expected: .multipleRecords(length: 58, rs: 18)) { b, _ in withRS(b, 18) },
        Hostile(name: "idlen 0", expected: .keyIDLength(length: 0)) { b, _ in set(b, 20, 0) },
        Hostile(name: "idlen 64", expected: .keyIDLength(length: 64)) { b, _ in set(b, 20, 64) },
        Hostile(name: "idlen 255", expected: .keyIDLength(length: 255)) { b, _ in set(b, 20, 255) },
        Hostile(name: "compressed point marker", expected: .invalidSenderKey) { b, _ in set(b, 21, 0x02) },
        Hostile(name: "point off the curve", expected: .invalidSenderKey) { b, _ in set(b, 85, b[85] ^ 0x01) },
        Hostile(name: "all-zero key id", expected: .invalidSenderKey) { b, _ in Array(b[0..<21]) + Array(repeating: 0, count: 65) + Array(b[86...]) },
        Hostile(name: "header only", expected: .recordTooShort(length: 0)) { b, _ in Array(b.prefix(86)) },
        Hostile(name: "16-byte record", expected: .recordTooShort(length: 16)) { b, _ in Array(b.prefix(86 + 16)) },
        Hostile(name: "tag tampered", expected: .authenticationFailed) { b, _ in set(b, b.count - 1, b[b.count - 1] ^ 0x80) },
        Hostile(name: "ciphertext tampered", expected: .authenticationFailed) { b, _ in set(b, 90, b[90] ^ 0x01) },
        Hostile(name: "salt tampered", expected: .authenticationFailed) { b, _ in set(b, 0, b[0] ^ 0x01) },
        Hostile(name: "record truncated", expected: .authenticationFailed) { b, _ in Array(b.dropLast(1)) },
        Hostile(name: "another subscription's body", expected: .authenticationFailed) { _, _ in
            try WebPushEncryptor(subscription: WebPushUserAgentKeys.generate().subscriptionKeys).encrypt([1, 2, 3])
        },
        Hostile(name: "two records (rs 40)", expected: .multipleRecords(length: 58, rs: 40)) { b, _ in withRS(b, 40) },
        Hostile(name: "over 4096 bytes", expected: .tooLarge(size: 4097, limit: 4096)) { b, _ in b + Array(repeating: 0, count: 4097 - b.count) },
        Hostile(name: "no delimiter (all zeros)", expected: .missingDelimiter) { _, k in try sealed([0, 0, 0], k) },
        Hostile(name: "tag alone", expected: .recordTooShort(length: 16)) { _, k in try sealed([], k) },
        Hostile(name: "delimiter 0x01 (not last)", expected: .notLastRecord) { _, k in try sealed(Array("hi".utf8) + [1], k) },
        Hostile(name: "no delimiter (data last)", expected: .invalidPadding(value: 0x69)) { _, k in try sealed(Array("hi".utf8), k) },
        Hostile(name: "non-zero padding", expected: .invalidPadding(value: 5)) { _, k in try sealed(Array("hi".utf8) + [2, 0, 5], k) },
    ]

    @Test(arguments: hostile)
    func hostileBodiesAreRefusedWithTypedErrors(_ row: Hostile) throws {
        let ua = WebPushUserAgentKeys.generate()
        let valid = try WebPushEncryptor(subscription: ua.subscriptionKeys).encrypt(RFC8291.plaintext)
        let body = try row.make(valid, ua.subscriptionKeys)
        #expect(throws: WebPushError.undecryptable(row.expected)) { try WebPushDecryptor(keys: ua).decrypt(body) }
    }

    @Test func randomBytesNeverCrashTheDecryptor() throws {
        let ua = WebPushUserAgentKeys.generate()
        var generator = SystemRandomNumberGenerator()
        let valid = try WebPushEncryptor(subscription: ua.subscriptionKeys).encrypt(RFC8291.plaintext)
        for _ in 0..<500 {
            var body = valid
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                body[Int.random(in: 0..<body.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            }
            body = Array(body.prefix(Int.random(in: 0...body.count, using: &generator)))
            _ = try? WebPushDecryptor(keys: ua).decrypt(body)
        }
    }

    // MARK: Subscription keys

    struct SubscriptionRow: CustomTestStringConvertible, Sendable {
        let name: String, p256dh: String, auth: String
        let expected: WebPushError?
        var testDescription: String { name }
    }

    static let point = b64u(RFC8291.uaPublic)
    static let offCurve: [UInt8] = { var p = point; p[64] ^= 0x01; return p }()
    static let p256dh = WebPushSubscriptionKeys.p256dhMember, auth = WebPushSubscriptionKeys.authMember

    static let subscriptions: [SubscriptionRow] = [
        SubscriptionRow(name: "browser keys", p256dh: RFC8291.uaPublic, auth: RFC8291.authSecret, expected: nil),
        SubscriptionRow(name: "padded base64url", p256dh: RFC8291.uaPublic + "=", auth: RFC8291.authSecret + "==", expected: nil),
        SubscriptionRow(name: "p256dh not base64url", p256dh: "not base64!", auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .notBase64URL)),
        SubscriptionRow(name: "p256dh standard base64", p256dh: Data(point).base64EncodedString(), auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .notBase64URL)),
        SubscriptionRow(name: "p256dh bad padding", p256dh: RFC8291.uaPublic + "===", auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .notBase64URL)),
        SubscriptionRow(name: "p256dh 64 bytes", p256dh: toB64u(point.prefix(64)), auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .wrongLength(length: 64, expected: 65))),
        SubscriptionRow(name: "p256dh compressed", p256dh: toB64u([0x03] + point[1..<33]), auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .wrongLength(length: 33, expected: 65))),
        SubscriptionRow(name: "p256dh without 0x04", p256dh: toB64u([0x06] + point.dropFirst()), auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .notUncompressedPoint)),
        SubscriptionRow(name: "p256dh off the curve", p256dh: toB64u(offCurve), auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .notOnCurve)),
        SubscriptionRow(name: "p256dh empty", p256dh: "", auth: RFC8291.authSecret,
                        expected: .subscription(member: p256dh, problem: .wrongLength(length: 0, expected: 65))),
        SubscriptionRow(name: "auth 15 bytes", p256dh: RFC8291.uaPublic, auth: toB64u([UInt8](repeating: 1, count: 15)),
                        expected: .subscription(member: auth, problem: .wrongLength(length: 15, expected: 16))),
        SubscriptionRow(name: "auth 17 bytes", p256dh: RFC8291.uaPublic, auth: toB64u([UInt8](repeating: 1, count: 17)),
                        expected: .subscription(member: auth, problem: .wrongLength(length: 17, expected: 16))),
        SubscriptionRow(name: "auth not base64url", p256dh: RFC8291.uaPublic, auth: "BTBZMqHH6r4Tts7J/aSIgg",
                        expected: .subscription(member: auth, problem: .notBase64URL)),
    ]

    @Test(arguments: subscriptions)
    func subscriptionKeysAreValidated(_ row: SubscriptionRow) throws {
        if let expected = row.expected {
            let error = #expect(throws: WebPushError.self) { try WebPushSubscriptionKeys(p256dh: row.p256dh, auth: row.auth) }
            #expect(error == expected)
            let text = error?.description ?? ""
            #expect(text.hasPrefix("webpush/keys/"))
            #expect(!text.contains(RFC8291.authSecret) && !text.contains(RFC8291.uaPublic))
        } else {
            let keys = try WebPushSubscriptionKeys(p256dh: row.p256dh, auth: row.auth)
            #expect(keys.p256dh == RFC8291.uaPublic)
            #expect(keys.authBase64URL == RFC8291.authSecret)
        }
    }

    @Test func userAgentKeysRoundTripThroughTheirStoredForm() throws {
        let ua = WebPushUserAgentKeys.generate()
        #expect(ua.auth.count == 16)
        let again = try WebPushUserAgentKeys(rawPrivateKey: ua.rawPrivateKey, auth: ua.auth)
        #expect(again.subscriptionKeys == ua.subscriptionKeys)
        #expect(throws: WebPushError.invalidDeviceKey) { try WebPushUserAgentKeys(rawPrivateKey: SecureBytes([1, 2, 3]), auth: ua.auth) }
        #expect(throws: WebPushError.subscription(member: WebPushSubscriptionKeys.authMember, problem: .wrongLength(length: 8, expected: 16))) {
            try WebPushUserAgentKeys(rawPrivateKey: ua.rawPrivateKey, auth: SecureBytes([UInt8](repeating: 0, count: 8)))
        }
        let json = ua.subscriptionJSON(endpoint: "https://push.example.net/wpush/abc")
        guard case let .object(object) = json, case let .object(keys)? = object["keys"] else {
            Issue.record("not an object: \(json)")
            return
        }
        #expect(object["endpoint"]?.stringValue == "https://push.example.net/wpush/abc")
        #expect(object["expirationTime"] == .null)
        let parsed = try WebPushSubscriptionKeys(p256dh: keys["p256dh"]?.stringValue ?? "", auth: keys["auth"]?.stringValue ?? "")
        #expect(parsed == ua.subscriptionKeys)
    }

    // MARK: Registration

    @Test func aRegistrationsWebpushMemberIsRead() throws {
        let endpoint = "https://fcm.googleapis.com/fcm/send/SECRET-capability"
        func json(_ text: String) throws -> JSONValue { try JSON.parse(Array(text.utf8)) }
        let good = try json(#"{"endpoint":"\#(endpoint)","expirationTime":null,"keys":{"p256dh":"\#(RFC8291.uaPublic)","auth":"\#(RFC8291.authSecret)"}}"#)
        let subscription = try WebPushSubscription(json: good, policy: WebPushEndpointPolicy())
        #expect(subscription.endpoint.origin == "https://fcm.googleapis.com")
        #expect(subscription.keys.p256dh == RFC8291.uaPublic)
        let rows: [(String, WebPushError)] = [
            (#"[]"#, .subscription(member: "webpush", problem: .missing)),
            (#"{"keys":{"p256dh":"x","auth":"y"}}"#, .subscription(member: "webpush/endpoint", problem: .missing)),
            (#"{"endpoint":1,"keys":{}}"#, .subscription(member: "webpush/endpoint", problem: .missing)),
            (#"{"endpoint":"\#(endpoint)"}"#, .subscription(member: "webpush/keys", problem: .missing)),
            (#"{"endpoint":"\#(endpoint)","keys":{"auth":"\#(RFC8291.authSecret)"}}"#, .subscription(member: "webpush/keys/p256dh", problem: .missing)),
            (#"{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(RFC8291.uaPublic)"}}"#, .subscription(member: "webpush/keys/auth", problem: .missing)),
            (#"{"endpoint":"\#(endpoint)","endpont":"x","keys":{}}"#, .subscription(member: "webpush/endpont", problem: .unknownMember)),
            (#"{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(RFC8291.uaPublic)","auth":"\#(RFC8291.authSecret)","x":1}}"#,
             .subscription(member: "webpush/keys/x", problem: .unknownMember)),
            (#"{"endpoint":"http://push.example.net/SECRET","keys":{"p256dh":"\#(RFC8291.uaPublic)","auth":"\#(RFC8291.authSecret)"}}"#,
             .endpoint(.notHTTPS)),
            (#"{"endpoint":"\#(endpoint)","keys":{"p256dh":"\#(RFC8291.uaPublic)","auth":"AAAA"}}"#,
             .subscription(member: "webpush/keys/auth", problem: .wrongLength(length: 3, expected: 16))),
        ]
        for (text, expected) in rows {
            let error = #expect(throws: WebPushError.self, "\(text)") { try WebPushSubscription(json: json(text), policy: WebPushEndpointPolicy()) }
            #expect(error == expected, "\(text)")
            #expect(error?.description.contains("SECRET") == false)
        }
    }
}
