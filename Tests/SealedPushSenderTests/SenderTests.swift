import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

@Suite("Sender: payload, headers, placeholder")
struct PayloadTests {
    @Test func payloadShapeKeepsEverythingSecretInside() throws {
        let device = makeDevice()
        let sender = try makeSender()
        let message = SecretMessage(title: "Agent K", subtitle: "Field report", body: "The eagle lands at noon.",
                                    threadID: "ops-7", category: "SECRET_REPLY", badge: 3, sound: "chime.caf",
                                    data: JSONObject([("conversation", .string("c-42"))]))
        let sealed = try sender.seal(message, to: device.record)
        let root = try payloadObject(sealed)
        #expect(root.members.map(\.key) == ["aps", "ENCRYPTED_DATA"])
        let aps = try #require(root["aps"]?.objectValue)
        #expect(aps.members.map(\.key) == ["alert", "mutable-content", "category"])
        #expect(aps["mutable-content"] == .int(1))
        #expect(aps["category"] == .string("SECRET"))
        #expect(aps["alert"] == .object(JSONObject([("title", .string("Secret Message!")), ("body", .string("(Encrypted)"))])))
        #expect(sealed.payload.count <= 4096)
        let text = sealed.payloadString
        for secret in ["Agent K", "Field report", "eagle", "ops-7", "SECRET_REPLY", "chime", "c-42", "thread-id", "badge", "sound"] {
            #expect(!text.contains(secret), "\(secret) leaked outside ENCRYPTED_DATA")
        }
        #expect(text.hasPrefix(#"{"aps":{"alert":{"title":"Secret Message!","body":"(Encrypted)"},"mutable-content":1,"category":"SECRET"},"ENCRYPTED_DATA":""#))
        #expect(sender.payloadOverhead == text.utf8.count - (try encryptedData(sealed)).utf8.count)

        let opened = try openSealed(sealed, with: [device.pair])
        #expect(opened.body.alert == MessageBody.Alert(title: "Agent K", subtitle: "Field report", body: "The eagle lands at noon."))
        #expect(opened.body.threadID == "ops-7")
        #expect(opened.body.category == "SECRET_REPLY")
        #expect(opened.body.badge == 3)
        #expect(opened.body.sound == "chime.caf")
        #expect(opened.body.data == JSONObject([("conversation", .string("c-42"))]))
        #expect(opened.body.issuedAt == testNow)
        #expect(opened.body.kid == device.record.keyID)
        #expect(opened.body.id == sealed.messageID)
        #expect(opened.paddedLength == sealed.paddedLength)
        #expect(opened.signedBy == nil)
    }

    @Test func codableModelMatchesFastSerializer() throws {
        let device = makeDevice()
        let sealed = try makeSender().seal(SecretMessage(body: "hi"), to: device.record)
        let decoded = try JSONDecoder().decode(APNsPayload.self, from: Data(sealed.payload))
        #expect(decoded == sealed.payloadModel)
        #expect(decoded.aps.mutableContent == 1)
        #expect(decoded.jsonBytes == sealed.payload)
        // The Codable encoding uses the same wire names.
        let reencoded = try JSONEncoder().encode(decoded)
        #expect(try JSONDecoder().decode(APNsPayload.self, from: reencoded) == decoded)
        #expect(String(decoding: reencoded, as: UTF8.self).contains("\"mutable-content\":1"))
        // A model with text needing escapes round-trips through the fast writer and the strict parser.
        let odd = APNsPayload(placeholder: Placeholder(title: "Quote \" back\\slash\nline", body: "é🔐", category: nil), encryptedData: "AQ==")
        #expect(try JSONDecoder().decode(APNsPayload.self, from: Data(odd.jsonBytes)) == odd)
        _ = try JSON.parse(odd.jsonBytes)
    }

    @Test func headersWithoutOptionalValues() throws {
        // No expiry given: the default of 7 days, in the header and the body.
        let device = makeDevice()
        let defaulted = try makeSender().seal(SecretMessage(body: "hi"), to: device.record)
        #expect(defaulted.headers["apns-expiration"] == String(defaulted.issuedAt + 7 * 86_400))
        #expect(try openSealed(defaulted, with: [device.pair]).body.expiresAt == defaulted.issuedAt + 7 * 86_400)
        // apns-expiration 0 and no exp only on request.
        let sealed = try makeSender().seal(SecretMessage(body: "hi", expiry: .deliverOnce), to: device.record)
        #expect(try openSealed(sealed, with: [device.pair]).body.expiresAt == nil)
        #expect(sealed.headers.fields.map(\.name) == ["apns-push-type", "apns-priority", "apns-expiration"])
        #expect(sealed.headers["apns-push-type"] == "alert")
        #expect(sealed.headers["apns-priority"] == "10")
        #expect(sealed.headers["apns-expiration"] == "0")
        #expect(sealed.headers["apns-collapse-id"] == nil)
        #expect(sealed.headers["apns-topic"] == nil)
        var json: [UInt8] = []
        sealed.headers.writeJSON(into: &json)
        #expect(String(decoding: json, as: UTF8.self) == #"{"apns-push-type":"alert","apns-priority":"10","apns-expiration":"0"}"#)
        #expect(try JSON.parse(json) == .object(sealed.headers.jsonObject))
    }

    @Test func headersWithExpiryCollapseIDAndTopic() throws {
        let device = makeDevice()
        let message = SecretMessage(body: "hi", expiry: .after(seconds: 3600), collapseID: "thread-7", topic: "com.example.secret")
        let sealed = try makeSender().seal(message, to: device.record)
        #expect(sealed.headers["apns-expiration"] == String(testNow + 3600))
        #expect(sealed.headers["apns-collapse-id"] == "thread-7")
        #expect(sealed.headers["apns-topic"] == "com.example.secret")
        #expect(sealed.headers.fields.map(\.name) == ["apns-push-type", "apns-priority", "apns-expiration", "apns-collapse-id", "apns-topic"])
        let opened = try openSealed(sealed, with: [device.pair])
        #expect(opened.body.expiresAt == testNow + 3600)
        // An absolute expiry goes through unchanged.
        let absolute = try makeSender().seal(SecretMessage(body: "hi", expiry: .at(testNow + 60)), to: device.record)
        #expect(absolute.headers.expiration == testNow + 60)
        #expect(try openSealed(absolute, with: [device.pair]).body.expiresAt == testNow + 60)
        // Durations.
        #expect(Expiry.duration("2h") == .after(seconds: 7200))
        #expect(Expiry.duration("500ms") == .after(seconds: 1))
        #expect(Expiry.duration("7d") == .after(seconds: 604_800))
        #expect(Expiry.duration("90") == .after(seconds: 90))
        #expect(Expiry.duration("-5s") == nil)
        #expect(Expiry.duration("2 h") == nil)
    }

    @Test func headerValuesAreValidated() throws {
        let record = makeDevice().record
        let sender = try makeSender()
        #expect(throws: SenderError.invalidCollapseID("is 65 bytes, over the APNs limit of 64")) {
            try sender.seal(SecretMessage(body: "hi", collapseID: String(repeating: "c", count: 65)), to: record)
        }
        _ = try sender.seal(SecretMessage(body: "hi", collapseID: String(repeating: "c", count: 64)), to: record)
        #expect(senderErrorCase { _ = try sender.seal(SecretMessage(body: "hi", collapseID: "a\r\nx: y"), to: record) } == "invalidCollapseID")
        #expect(senderErrorCase { _ = try sender.seal(SecretMessage(body: "hi", topic: "com.example app"), to: record) } == "invalidTopic")
        #expect(senderErrorCase { _ = try sender.seal(SecretMessage(body: "hi", topic: ""), to: record) } == "invalidTopic")
        #expect(senderErrorCase { _ = try sender.seal(SecretMessage(body: "hi", expiry: .after(seconds: -1)), to: record) } == "invalidExpiry")
        #expect(senderErrorCase { _ = try sender.seal(SecretMessage(body: "hi", expiry: .at(testNow - 1)), to: record) } == "invalidExpiry")
    }

    @Test func placeholderIsConfigurable() throws {
        let device = makeDevice()
        let sender = try makeSender(placeholder: Placeholder(title: "New message", body: "Tap to read", category: "PRIVATE"))
        let aps = try #require(try payloadObject(try sender.seal(SecretMessage(body: "x"), to: device.record))["aps"]?.objectValue)
        #expect(aps["alert"] == .object(JSONObject([("title", .string("New message")), ("body", .string("Tap to read"))])))
        #expect(aps["category"] == .string("PRIVATE"))

        let bare = try makeSender(placeholder: Placeholder(title: nil, category: nil))
        let bareSealed = try bare.seal(SecretMessage(body: "x"), to: device.record)
        let bareAPS = try #require(try payloadObject(bareSealed)["aps"]?.objectValue)
        #expect(bareAPS.members.map(\.key) == ["alert", "mutable-content"])
        #expect(bareAPS["alert"] == .object(JSONObject([("body", .string("(Encrypted)"))])))
        #expect(try openSealed(bareSealed, with: [device.pair]).body.alert.body == "x")

        #expect(senderErrorCase { _ = try NotificationSender(placeholder: Placeholder(title: "", body: "")) } == "invalidPlaceholder")
        #expect(senderErrorCase { _ = try NotificationSender(placeholder: Placeholder(title: String(repeating: "T", count: 4000))) } == "invalidPlaceholder")
    }

    @Test func sealerErrorsAreTypedAndSayWhatToDo() throws {
        let record = makeDevice().record
        let sender = try makeSender()
        #expect(throws: SenderError.sealing(.emptyAlert)) { try sender.seal(SecretMessage(title: "", body: ""), to: record) }
        #expect(throws: SenderError.sealing(.invalidMessageID)) { try sender.seal(SecretMessage(body: "x", messageID: ""), to: record) }
        #expect(throws: SenderError.sealing(.dataHoldsAPS)) {
            try sender.seal(SecretMessage(body: "x", data: JSONObject([("aps", .int(1))])), to: record)
        }
        do {
            _ = try sender.seal(SecretMessage(body: "top secret words " + String(repeating: "z", count: 5000)), to: record)
            Issue.record("an oversized message was sealed")
        } catch {
            #expect(error.sealError != nil)
            #expect(error.description.contains("4096"))
            #expect(!error.description.contains("top secret"))
        }
    }
}

@Suite("Sender: signing, fan-out, batch")
struct SigningFanOutTests {
    @Test func signedMessagesOpenWhenTheSignerIsTrusted() throws {
        let device = makeDevice()
        let signer = SigningKeyPair.generate()
        let sealed = try makeSender(signer: signer).seal(SecretMessage(title: "Signed", body: "by the server"), to: device.record)
        let opened = try openSealed(sealed, with: [device.pair], trusting: [signer.publicKey], requireSignature: true)
        #expect(opened.signedBy == signer.keyID)
        #expect(opened.body.sender == signer.keyID)
        #expect(opened.body.alert.body == "by the server")
        #expect(innerLength(of: opened) + 1 <= opened.paddedLength)

        #expect(throws: OpenFailure.self) { try openSealed(sealed, with: [device.pair], trusting: []) }
        do {
            _ = try openSealed(sealed, with: [device.pair], trusting: [SigningKeyPair.generate().publicKey])
        } catch let failure as OpenFailure {
            #expect(failure.reason == .untrustedSender)
        }
        let unsigned = try makeSender().seal(SecretMessage(body: "x"), to: device.record)
        do {
            _ = try openSealed(unsigned, with: [device.pair], trusting: [signer.publicKey], requireSignature: true)
            Issue.record("an unsigned message passed a policy requiring signatures")
        } catch let failure as OpenFailure {
            #expect(failure.reason == .signatureRequired)
        }
    }

    @Test func fanOutSealsEachDeviceSeparatelyAndIsolatesFailures() throws {
        let devices = (0..<5).map { _ in makeDevice() }
        // An all-zero X25519 key is a low-order point: sealing to it fails, and must not stop the others.
        let broken = DeviceKeyRecord(publicKey: try BoxPublicKey(bytes: [UInt8](repeating: 0, count: 32)), createdAt: nil)
        var records = devices.map(\.record)
        records.insert(broken, at: 2)
        let results = try makeSender().seal(SecretMessage(title: "All hands", body: "Meet at six"), toEach: records)
        #expect(results.count == 6)
        #expect(results.map(\.keyID) == records.map(\.keyID))
        var envelopes = Set<String>()
        var ids = Set<String>()
        for (index, result) in results.enumerated() {
            if index == 2 {
                guard case let .failure(error) = result.result, case .invalidRecipient? = error.sealError else {
                    Issue.record("sealing to a low-order key should fail with invalidRecipient")
                    continue
                }
                continue
            }
            let sealed = try result.result.get()
            let deviceIndex = index < 2 ? index : index - 1
            let device = devices[deviceIndex]
            let opened = try openSealed(sealed, with: [device.pair])
            #expect(opened.body.kid == device.record.keyID)
            #expect(opened.body.alert.body == "Meet at six")
            envelopes.insert(try encryptedData(sealed))
            ids.insert(opened.body.id)
            // No other device's key opens this copy.
            let other = devices[(deviceIndex + 1) % devices.count]
            #expect(throws: OpenFailure.self) { try openSealed(sealed, with: [other.pair]) }
        }
        #expect(envelopes.count == 5)
        #expect(ids.count == 1, "one message, one id across its copies")
    }

    @Test func batchAPIKeepsOrderAndIsolatesFailures() throws {
        let a = makeDevice(), b = makeDevice()
        let requests = [
            SealRequest(message: SecretMessage(body: "first"), device: a.record),
            SealRequest(message: SecretMessage(title: "", body: ""), device: a.record),
            SealRequest(message: SecretMessage(body: "third"), device: b.record),
        ]
        let results = try makeSender().seal(batch: requests)
        #expect(results.count == 3)
        #expect(try openSealed(try results[0].get(), with: [a.pair]).body.alert.body == "first")
        #expect(throws: SenderError.sealing(.emptyAlert)) { try results[1].get() }
        #expect(try openSealed(try results[2].get(), with: [b.pair]).body.alert.body == "third")
        #expect(try results[0].get().messageID != results[2].get().messageID)
    }

    @Test func jsonlSealerWritesOneLinePerRequest() throws {
        let device = makeDevice()
        let sealer = JSONLSealer(sender: try makeSender())
        let record = String(decoding: device.record.jsonBytes, as: UTF8.self)
        let good = Array(#"{"to":\#(record),"title":"T","body":"B","thread_id":"t","badge":2,"data":{"k":[1,true]},"expires_in":"1h","collapse_id":"c","topic":"com.x"}"#.utf8)
        var out: [UInt8] = []
        #expect(sealer.process(line: good.span, number: 1, into: &out) == .sealed)
        #expect(out.last == 0x0a)
        let line = try #require(try JSON.parse(Array(out.dropLast())).objectValue)
        #expect(line.members.map(\.key) == ["payload", "headers"])
        let headers = try #require(line["headers"]?.objectValue)
        #expect(headers["apns-expiration"] == .string(String(testNow + 3600)))
        #expect(headers["apns-collapse-id"] == .string("c"))
        #expect(headers["apns-topic"] == .string("com.x"))
        let data = try #require(line["payload"]?.objectValue?["ENCRYPTED_DATA"]?.stringValue)
        let opened = try MessageOpener(keys: InMemoryKeys([device.pair])).open(encryptedData: data, now: testNow)
        #expect(opened.body.threadID == "t")
        #expect(opened.body.badge == 2)
        #expect(opened.body.data == JSONObject([("k", .array([.int(1), .bool(true)]))]))

        let bad: [(String, String)] = [
            ("not json", "not valid JSON"),
            ("[1]", "not a JSON object"),
            (#"{"title":"x"}"#, "'to'"),
            (#"{"to":\#(record),"body":"x","badge":"3"}"#, "'badge'"),
            (#"{"to":\#(record),"body":"x","bogus":1}"#, "unknown member 'bogus'"),
            (#"{"to":\#(record),"body":"x","expires_in":"soon"}"#, "'expires_in'"),
            (#"{"to":\#(record.replacingOccurrences(of: device.record.keyID.hex, with: "0000000000000000")),"body":"x"}"#, "key_id"),
        ]
        for (n, (text, fragment)) in bad.enumerated() {
            out.removeAll()
            #expect(sealer.process(line: Array(text.utf8).span, number: n + 10, into: &out) == .failed)
            let error = try #require(try JSON.parse(Array(out.dropLast())).objectValue)
            #expect(error["line"] == .int(Int64(n + 10)))
            let message = try #require(error["error"]?.stringValue)
            #expect(message.contains(fragment), "\(message)")
        }
        out.removeAll()
        #expect(sealer.process(line: Array(" \t\r".utf8).span, number: 99, into: &out) == .blank)
        #expect(out.isEmpty)
    }
}
