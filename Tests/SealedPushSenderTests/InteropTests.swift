import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Runs the independent Python peer (Tests/Peer/peer.py, PyNaCl) with one JSON request on stdin.
enum Peer {
    /// `$SEALEDPUSH_PYTHON`, else the venv `make pydeps` creates under .build/pyenv.
    static var python: URL {
        if let env = ProcessInfo.processInfo.environment["SEALEDPUSH_PYTHON"], !env.isEmpty { return URL(fileURLWithPath: env) }
        return ProjectPaths.root.appendingPathComponent(".build/pyenv/bin/python")
    }

    static var script: URL { ProjectPaths.root.appendingPathComponent("Tests/Peer/peer.py") }

    /// Runs `peer.py command` with `request`; fails the test (never skips) when the interpreter is missing.
    static func run(_ command: String, _ request: JSONObject) throws -> JSONObject {
        try #require(FileManager.default.isExecutableFile(atPath: python.path),
                     "no Python with PyNaCl at \(python.path): run `make test` (or `make pydeps`), or set SEALEDPUSH_PYTHON")
        let r = try ChildProcess.run(python, [script.path, command], stdin: JSON.serialize(.object(request)), timeout: 120)
        try #require(r.status == 0, "peer.py \(command) failed: \(r.stderr)")
        return try #require(try JSON.parse(r.stdout).objectValue, "peer.py printed no JSON object")
    }
}

@Suite("Interop with the Python peer (PyNaCl)", .serialized, .timeLimit(.minutes(10)))
struct InteropTests {
    static let now: Int64 = 1_795_000_000

    static func peerKeyPair() throws -> (pair: BoxKeyPair, record: JSONObject) {
        let keys = try Peer.run("keygen", JSONObject())
        let secret = try Base64.decode(try #require(keys["secret_key"]?.stringValue))
        let pair = try BoxKeyPair(secretKey: SecureBytes(secret))
        let record = try #require(keys["record"]?.objectValue)
        // The peer's record is one this implementation accepts, with the same key id.
        #expect(try DeviceKeyRecord(json: record).keyID == pair.keyID)
        #expect(keys["key_id"] == .string(pair.keyID.hex))
        return (pair, record)
    }

    static let message = JSONObject([
        ("alert", .object(JSONObject([("title", .string("Agent K")), ("subtitle", .string("")), ("body", .string("Ünïcödé 🔐 \"quoted\"\nline"))]))),
        ("thread-id", .string("ops-7")), ("badge", .int(3)), ("sound", .string("default")),
        ("data", .object(JSONObject([("n", .int(7)), ("nested", .object(JSONObject([("ok", .bool(true))])))]))),
        ("exp", .int(now + 3600)),
    ])

    @Test(arguments: [false, true])
    func peerSealsAndSwiftOpens(signed: Bool) throws {
        let device = try Self.peerKeyPair()
        let signer = SigningKeyPair.generate()
        for padding in ["bucket", "none", "max"] {
            var request = JSONObject([("record", .object(device.record)), ("message", .object(Self.message)),
                                      ("now", .int(Self.now)), ("padding", .string(padding)), ("id", .string("peer-\(padding)"))])
            if signed { request["signing_seed"] = .string(Base64.encode(signer.seed.unsafeCopyToArray())) }
            let sealed = try Peer.run("seal", request)
            let payloadText = try #require(sealed["payload"]?.stringValue)
            let payload = try #require(try JSON.parse(Array(payloadText.utf8)).objectValue)
            #expect(payloadText.utf8.count <= 4096)
            #expect(payload["aps"]?.objectValue?["mutable-content"] == .int(1))
            let opener = MessageOpener(keys: InMemoryKeys([device.pair]),
                                       policy: ReceiverPolicy(trustedSenders: [signer.publicKey], requireSignature: signed))
            let data = try #require(payload["ENCRYPTED_DATA"]?.stringValue)
            let opened = try opener.open(encryptedData: data, now: Self.now)
            #expect(opened.body.id == "peer-\(padding)")
            #expect(opened.body.alert == MessageBody.Alert(title: "Agent K", subtitle: "", body: "Ünïcödé 🔐 \"quoted\"\nline"))
            #expect(opened.body.threadID == "ops-7")
            #expect(opened.body.badge == 3)
            #expect(opened.body.expiresAt == Self.now + 3600)
            #expect(opened.body.data?["nested"] == .object(JSONObject([("ok", .bool(true))])))
            #expect(opened.signedBy == (signed ? signer.keyID : nil))
            #expect(sealed["padded_length"] == .int(Int64(opened.paddedLength)))
            // Both sides pick the same P for the same inner length and overhead.
            let sender = try makeSender(padding: PaddingPolicy(rawValue: padding)!)
            #expect(opened.paddedLength == PaddingPolicy(rawValue: padding)!.paddedLength(
                innerLength: innerLength(of: opened), payloadOverhead: sender.payloadOverhead))
        }
        if signed {
            // The peer's signature does not verify for an untrusted key set.
            var request = JSONObject([("record", .object(device.record)), ("message", .object(Self.message)), ("now", .int(Self.now))])
            request["signing_seed"] = .string(Base64.encode(signer.seed.unsafeCopyToArray()))
            let sealed = try Peer.run("seal", request)
            let text = try #require(sealed["payload"]?.stringValue)
            let payload = try #require(try JSON.parse(Array(text.utf8)).objectValue)
            let data = try #require(payload["ENCRYPTED_DATA"]?.stringValue)
            let opener = MessageOpener(keys: InMemoryKeys([device.pair]))
            do {
                _ = try opener.open(encryptedData: data, now: Self.now)
                Issue.record("a message signed by an untrusted key opened")
            } catch {
                #expect(error.reason == .untrustedSender)
            }
        }
    }

    @Test(arguments: [false, true])
    func swiftSealsAndPeerOpens(signed: Bool) throws {
        let device = BoxKeyPair.generate()
        let record = DeviceKeyRecord(publicKey: device.publicKey, createdAt: nil)
        let signer = SigningKeyPair.generate()
        let secret = Base64.encode(device.secretKey.unsafeCopyToArray())
        var rng = SeededGenerator(seed: signed ? 11 : 12)
        for policy in PaddingPolicy.allCases {
            for round in 0..<4 {
                let sender = try makeSender(padding: policy, signer: signed ? signer : nil)
                let text = round == 3 ? String(repeating: "長", count: 700) : "b" + randomText(&rng, maxPieces: 40 * (round + 1))
                let message = SecretMessage(title: "Agent K", subtitle: round == 0 ? "" : nil, body: text, threadID: "t-\(round)",
                                            category: "SECRET_REPLY", badge: Int64(round), sound: "default",
                                            data: JSONObject([("round", .int(Int64(round)))]), expiry: .after(seconds: 600))
                let sealed = try sender.seal(message, to: record)
                let result = try Peer.run("open", JSONObject([
                    ("payload", .string(sealed.payloadString)), ("secret_key", .string(secret)),
                    ("trusted_senders", .array([.string(Base64.encode(signer.publicKey.bytes))])),
                    ("require_signature", .bool(signed)), ("now", .int(testNow)),
                ]))
                try #require(result["ok"] == .bool(true), "peer refused: \(result["reason"]?.stringValue ?? "?") \(result["detail"]?.stringValue ?? "")")
                let body = try #require(result["body"]?.objectValue)
                #expect(body["kid"] == .string(record.keyID.hex))
                #expect(body["id"] == .string(sealed.messageID))
                #expect(body["iat"] == .int(testNow))
                #expect(body["exp"] == .int(testNow + 600))
                let alert = try #require(body["alert"]?.objectValue)
                #expect(alert["title"] == .string("Agent K"))
                #expect(alert["subtitle"] == (round == 0 ? .string("") : nil))
                #expect(alert["body"] == .string(text))
                #expect(body["thread-id"] == .string("t-\(round)"))
                #expect(body["category"] == .string("SECRET_REPLY"))
                #expect(body["badge"] == .int(Int64(round)))
                #expect(body["sound"] == .string("default"))
                #expect(body["data"] == .object(JSONObject([("round", .int(Int64(round)))])))
                #expect(body["sender"] == (signed ? .string(signer.keyID.hex) : nil))
                #expect(result["signed_by"] == (signed ? .string(signer.keyID.hex) : .null))
                #expect(result["padded_length"] == .int(Int64(sealed.paddedLength)))
                #expect(result["payload_bytes"] == .int(Int64(sealed.payload.count)))
                #expect(sealed.payload.count <= 4096)
            }
        }
    }

    /// Both implementations budget the payload the same way: identical sizes and P for the same
    /// message, and the same largest body at the 4096-byte limit.
    @Test(arguments: PaddingPolicy.allCases)
    func sizeAccountingAgrees(policy: PaddingPolicy) throws {
        let (pair, peerRecord) = try Self.peerKeyPair()
        let record = try DeviceKeyRecord(json: peerRecord)
        let sender = try makeSender(padding: policy)
        func peerSeal(_ n: Int) throws -> JSONObject {
            try Peer.run("seal", JSONObject([
                ("record", .object(peerRecord)), ("now", .int(testNow)), ("id", .string("m")), ("padding", .string(policy.rawValue)),
                ("message", .object(JSONObject([("alert", .object(JSONObject([("title", .string("t")), ("body", .string(String(repeating: "a", count: n)))])))]))),
            ]))
        }
        let largest = SizeTests.largestFittingBody(sender, record)
        for n in [0, 100, 600, largest] {
            let swift = try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: n), expiry: .deliverOnce, messageID: "m"), to: record)
            let peer = try peerSeal(n)
            #expect(peer["payload_bytes"] == .int(Int64(swift.payload.count)), "n = \(n)")
            #expect(peer["padded_length"] == .int(Int64(swift.paddedLength)), "n = \(n)")
            let peerText = try #require(peer["payload"]?.stringValue)
            let peerPayload = try #require(try JSON.parse(Array(peerText.utf8)).objectValue)
            let peerData = try #require(peerPayload["ENCRYPTED_DATA"]?.stringValue)
            let opened = try MessageOpener(keys: InMemoryKeys([pair])).open(encryptedData: peerData, now: testNow)
            #expect(opened.body.alert.body?.utf8.count == n)
        }
        // One byte more: both refuse.
        #expect(try peerSeal(largest + 1)["error"] != nil)
        #expect(throws: SenderError.self) {
            try sender.seal(SecretMessage(title: "t", body: String(repeating: "a", count: largest + 1), expiry: .deliverOnce, messageID: "m"), to: record)
        }
    }
}
