import Foundation
import SealedPushCrypto
import SealedPushTestSupport
import SealedPushWire
import Testing

/// `sealedpush seal`, run as a separate process.
@Suite("CLI: seal", .serialized, .timeLimit(.minutes(10)))
struct SealCLITests {
    /// A device key pair and its record written to a temporary file.
    struct Device {
        let pair: BoxKeyPair
        let record: DeviceKeyRecord
        let recordFile: URL
    }

    static func makeDevice(in dir: URL, name: String = "device-key.json") throws -> Device {
        let pair = BoxKeyPair.generate()
        let record = DeviceKeyRecord(publicKey: pair.publicKey, createdAt: Date())
        let file = dir.appendingPathComponent(name)
        try Data(record.jsonBytes).write(to: file)
        return Device(pair: pair, record: record, recordFile: file)
    }

    static func open(_ payload: JSONObject, with pair: BoxKeyPair) throws -> OpenedMessage {
        let data = try #require(payload["ENCRYPTED_DATA"]?.stringValue)
        return try MessageOpener(keys: InMemoryKeys([pair])).open(encryptedData: data, now: Int64(Date().timeIntervalSince1970))
    }

    @Test func sealSinglePrintsExactlyThePayload() throws {
        let dir = try makeScratchDirectory("seal")
        defer { try? FileManager.default.removeItem(at: dir) }
        let device = try Self.makeDevice(in: dir)
        let result = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--title", "Agent K", "--body", "The eagle lands at noon.",
                                        "--subtitle", "Report", "--thread-id", "ops-7", "--badge", "4", "--sound", "default"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.isEmpty)
        #expect(result.stdout.count <= 4096)
        #expect(result.stdout.last == UInt8(ascii: "}"), "no trailing newline when stdout is not a terminal")
        let payload = try #require(try JSON.parse(result.stdout).objectValue)
        let aps = try #require(payload["aps"]?.objectValue)
        #expect(aps["mutable-content"] == .int(1))
        #expect(aps["category"] == .string("SECRET"))
        #expect(aps["alert"]?.objectValue?["title"] == .string("Secret Message!"))
        #expect(aps["alert"]?.objectValue?["body"] == .string("(Encrypted)"))
        #expect(!result.stdoutText.contains("eagle") && !result.stdoutText.contains("ops-7"))
        let opened = try Self.open(payload, with: device.pair)
        #expect(opened.body.alert == MessageBody.Alert(title: "Agent K", subtitle: "Report", body: "The eagle lands at noon."))
        #expect(opened.body.threadID == "ops-7")
        #expect(opened.body.badge == 4)
        #expect(opened.body.sound == "default")
        #expect(opened.paddedLength == 256)
    }

    @Test func sealWithHeadersAndOptions() throws {
        let dir = try makeScratchDirectory("seal")
        defer { try? FileManager.default.removeItem(at: dir) }
        let device = try Self.makeDevice(in: dir)
        let before = Int64(Date().timeIntervalSince1970)
        let result = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "Meet at six", "--headers",
                                        "--expires-in", "2h", "--collapse-id", "meet", "--topic", "com.example.secret",
                                        "--padding", "max", "--placeholder-title", "New message"])
        #expect(result.status == 0, "\(result.stderr)")
        let root = try #require(try JSON.parse(result.stdout).objectValue)
        #expect(root.members.map(\.key) == ["headers", "payload"])
        let headers = try #require(root["headers"]?.objectValue)
        #expect(headers["apns-push-type"] == .string("alert"))
        #expect(headers["apns-priority"] == .string("10"))
        #expect(headers["apns-collapse-id"] == .string("meet"))
        #expect(headers["apns-topic"] == .string("com.example.secret"))
        let expiration = try #require(headers["apns-expiration"]?.stringValue.flatMap { Int64($0) })
        #expect(expiration >= before + 7200 && expiration <= before + 7200 + 5)
        let payload = try #require(root["payload"]?.objectValue)
        #expect(payload["aps"]?.objectValue?["alert"]?.objectValue?["title"] == .string("New message"))
        #expect(JSON.serialize(.object(payload)).count <= 4096)
        let opened = try Self.open(payload, with: device.pair)
        #expect(opened.body.expiresAt == expiration)
        #expect(opened.body.alert.body == "Meet at six")
        // --padding max fills the payload to within one base64 quantum of the limit.
        #expect(JSON.serialize(.object(payload)).count > 4092)

        let plain = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "x", "--headers"])
        let plainHeaders = try #require(try JSON.parse(plain.stdout).objectValue?["headers"]?.objectValue)
        #expect(plainHeaders.members.map(\.key) == ["apns-push-type", "apns-priority", "apns-expiration"])
        let defaultExpiration = try #require(plainHeaders["apns-expiration"]?.stringValue.flatMap { Int64($0) })
        #expect(defaultExpiration >= before + 7 * 86_400 && defaultExpiration <= before + 7 * 86_400 + 5, "the 7-day default")

        let once = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "x", "--headers", "--deliver-once"])
        #expect(try JSON.parse(once.stdout).objectValue?["headers"]?.objectValue?["apns-expiration"] == .string("0"))
        let both = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "x", "--deliver-once", "--expires-in", "2h"])
        #expect(both.status != 0)
        #expect(both.stderr.contains("--deliver-once and --expires-in contradict each other"))
    }

    @Test func recordFromStandardInput() throws {
        let device = BoxKeyPair.generate()
        let record = DeviceKeyRecord(publicKey: device.publicKey, createdAt: nil)
        let result = try ChildProcess.sealedpush(["seal", "--to", "-", "--body", "via stdin"], stdin: record.jsonBytes)
        #expect(result.status == 0, "\(result.stderr)")
        let payload = try #require(try JSON.parse(result.stdout).objectValue)
        #expect(try Self.open(payload, with: device).body.alert.body == "via stdin")
    }

    @Test func errors() throws {
        let dir = try makeScratchDirectory("seal")
        defer { try? FileManager.default.removeItem(at: dir) }
        let device = try Self.makeDevice(in: dir)

        let missing = try ChildProcess.sealedpush(["seal", "--to", dir.appendingPathComponent("nope.json").path, "--body", "x"])
        #expect(missing.status != 0)
        #expect(missing.stdout.isEmpty)
        #expect(missing.stderr.contains("does not exist"))

        // A record whose key_id was changed is refused.
        var tampered = device.record.jsonObject
        tampered["key_id"] = .string("0123456789abcdef")
        let tamperedFile = dir.appendingPathComponent("tampered.json")
        try Data(JSON.serialize(.object(tampered))).write(to: tamperedFile)
        let refused = try ChildProcess.sealedpush(["seal", "--to", tamperedFile.path, "--body", "x"])
        #expect(refused.status != 0)
        #expect(refused.stdout.isEmpty)
        #expect(refused.stderr.contains("key_id 0123456789abcdef"))
        #expect(refused.stderr.contains(device.record.keyID.hex))

        // An oversized message names its size and the limit, and never echoes the text.
        let big = "classified " + String(repeating: "x", count: 4000)
        let oversized = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", big])
        #expect(oversized.status != 0)
        #expect(oversized.stdout.isEmpty)
        #expect(oversized.stderr.contains("4096 bytes"))
        #expect(oversized.stderr.range(of: #"would be \d+ bytes"#, options: .regularExpression) != nil)
        #expect(!oversized.stderr.contains("classified"))

        // Bad arguments are usage errors.
        for arguments in [["seal", "--body", "x"], ["seal", "--to", device.recordFile.path],
                          ["seal", "--to", device.recordFile.path, "--body", "x", "--expires-in", "soon"],
                          ["seal", "--to", device.recordFile.path, "--body", "x", "--padding", "huge"],
                          ["seal", "--batch", "in.jsonl", "--title", "x"]] {
            let usage = try ChildProcess.sealedpush(arguments)
            #expect(usage.status == 64, "\(arguments)")
            #expect(usage.stdout.isEmpty)
        }
        let help = try ChildProcess.sealedpush(["seal", "--help"])
        #expect(help.status == 0)
        #expect(help.stdoutText.contains("--batch") && help.stdoutText.contains("Examples:") && help.stdoutText.contains("apns-expiration"))
    }

    @Test func batchWithGoodAndBadLines() throws {
        let dir = try makeScratchDirectory("batch")
        defer { try? FileManager.default.removeItem(at: dir) }
        let a = try Self.makeDevice(in: dir, name: "a.json"), b = try Self.makeDevice(in: dir, name: "b.json")
        let recordA = String(decoding: a.record.jsonBytes, as: UTF8.self), recordB = String(decoding: b.record.jsonBytes, as: UTF8.self)
        var tampered = b.record.jsonObject
        tampered["key_id"] = .string("0123456789abcdef")
        let lines = [
            #"{"to":\#(recordA),"title":"one","body":"first"}"#,                                   // 1 ok
            #"{"to":\#(recordB),"body":"second","badge":2,"expires_in":"1h","collapse_id":"c2"}"#, // 2 ok
            "",                                                                                      // 3 blank
            "this is not json",                                                                      // 4 error
            #"{"to":\#(String(decoding: JSON.serialize(.object(tampered)), as: UTF8.self)),"body":"x"}"#, // 5 error
            #"{"to":\#(recordA),"body":"\#(String(repeating: "y", count: 5000))"}"#,               // 6 error: too large
            #"{"to":\#(recordA),"title":""}"#,                                                     // 7 error: no text
            #"{"to":\#(recordB),"title":"last","data":{"k":"v"}}"#,                                // 8 ok (no final newline)
        ]
        let file = dir.appendingPathComponent("in.jsonl")
        try Data(lines.joined(separator: "\n").utf8).write(to: file)
        let result = try ChildProcess.sealedpush(["seal", "--batch", file.path])
        #expect(result.status == 1)
        #expect(result.stderr.contains("4 of 7"))
        let out = result.stdoutLines
        #expect(out.count == 7)
        let objects = try out.map { try #require(try JSON.parse(Array($0.utf8)).objectValue) }
        let errorLines = objects.compactMap { $0["line"]?.intValue }
        #expect(errorLines == [4, 5, 6, 7])
        #expect(objects[2]["error"]?.stringValue?.contains("not valid JSON") == true)
        #expect(objects[3]["error"]?.stringValue?.contains("key_id") == true)
        #expect(objects[4]["error"]?.stringValue?.contains("4096") == true)
        #expect(objects[5]["error"]?.stringValue?.contains("visible text") == true)

        let expectations: [(Int, Device, String)] = [(0, a, "first"), (1, b, "second"), (6, b, "last")]
        for (index, device, text) in expectations {
            let payload = try #require(objects[index]["payload"]?.objectValue)
            #expect(JSON.serialize(.object(payload)).count <= 4096)
            let opened = try Self.open(payload, with: device.pair)
            #expect((opened.body.alert.body ?? opened.body.alert.title) == text)
            #expect(objects[index]["headers"]?.objectValue?["apns-push-type"] == .string("alert"))
        }
        #expect(objects[1]["headers"]?.objectValue?["apns-collapse-id"] == .string("c2"))

        // The same input on stdin; and an all-good batch exits 0.
        let good = [lines[0], lines[1], lines[7]].joined(separator: "\n") + "\n"
        let ok = try ChildProcess.sealedpush(["seal", "--batch", "-"], stdin: Array(good.utf8))
        #expect(ok.status == 0, "\(ok.stderr)")
        #expect(ok.stdoutLines.count == 3)
    }

    /// Issue #15 item 3: which key signed is visible in --headers output and in every batch output line.
    @Test func signWithNamesTheKeyThatSigned() throws {
        let dir = try makeScratchDirectory("signedby")
        defer { try? FileManager.default.removeItem(at: dir) }
        let device = try Self.makeDevice(in: dir)
        let srv = dir.appendingPathComponent("srv").path
        let generated = try ChildProcess.sealedpush(["sender", "generate", "--keychain", srv])
        try #require(generated.status == 0, Comment(rawValue: generated.stderr))
        let senderID = try #require(try JSON.parse(generated.stdout).objectValue?["key_id"]?.stringValue)

        let headers = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "x", "--sign-with", srv, "--headers"])
        try #require(headers.status == 0, Comment(rawValue: headers.stderr))
        let object = try #require(try JSON.parse(headers.stdout).objectValue)
        #expect(object.members.map(\.key) == ["headers", "payload", "signed_by"])
        #expect(object["signed_by"] == .string(senderID))
        #expect(object["headers"]?.objectValue?["signed_by"] == nil, "signed_by must not reach the APNs request headers")
        let senderKey = try SenderKeyRecord(jsonBytes: generated.stdout).publicKey
        let data = try #require(object["payload"]?.objectValue?["ENCRYPTED_DATA"]?.stringValue)
        let opener = MessageOpener(keys: InMemoryKeys([device.pair]), policy: ReceiverPolicy(trustedSenders: [senderKey], requireSignature: true))
        #expect(try opener.open(encryptedData: data, now: Int64(Date().timeIntervalSince1970)).signedBy?.hex == senderID)
        // Unsigned output is unchanged: no signed_by member.
        let unsigned = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "x", "--headers"])
        #expect(try JSON.parse(unsigned.stdout).objectValue?.members.map(\.key) == ["headers", "payload"])

        let record = String(decoding: device.record.jsonBytes, as: UTF8.self)
        let batch = try ChildProcess.sealedpush(["seal", "--batch", "-", "--sign-with", srv],
                                      stdin: Array((#"{"to":\#(record),"body":"one"}"# + "\n" + #"{"to":\#(record),"body":"two"}"# + "\n").utf8))
        try #require(batch.status == 0, Comment(rawValue: batch.stderr))
        #expect(batch.stdoutLines.count == 2)
        for line in batch.stdoutLines {
            let o = try #require(try JSON.parse(Array(line.utf8)).objectValue)
            #expect(o.members.map(\.key) == ["payload", "headers", "signed_by"])
            #expect(o["signed_by"] == .string(senderID))
        }

        // After a staged rotation the new key id shows up.
        let staged = try ChildProcess.sealedpush(["sender", "rotate", "--stage", "--json", "--keychain", srv])
        guard case let .array(stagedKeys) = try JSON.parse(staged.stdout) else { Issue.record("not a JSON array: \(staged.stdoutText)"); return }
        let nextID = try #require(stagedKeys.first?.objectValue?["key_id"]?.stringValue)
        #expect(try ChildProcess.sealedpush(["sender", "export", "--key-id", nextID, "--keychain", srv]).status == 0)
        #expect(try ChildProcess.sealedpush(["sender", "activate", nextID, "--keychain", srv]).status == 0)
        let after = try ChildProcess.sealedpush(["seal", "--to", device.recordFile.path, "--body", "x", "--sign-with", srv, "--headers"])
        #expect(try JSON.parse(after.stdout).objectValue?["signed_by"] == .string(nextID))
    }

    @Test func largeBatchKeepsOrder() throws {
        let dir = try makeScratchDirectory("batch")
        defer { try? FileManager.default.removeItem(at: dir) }
        let device = try Self.makeDevice(in: dir)
        let record = String(decoding: device.record.jsonBytes, as: UTF8.self)
        let count = 3000
        var input = ""
        for i in 1...count {
            input += i % 500 == 0 ? "{\"to\":\(record)}\n" : "{\"to\":\(record),\"body\":\"message \(i)\",\"id\":\"m\(i)\"}\n"
        }
        let result = try ChildProcess.sealedpush(["seal", "--batch", "-"], stdin: Array(input.utf8))
        #expect(result.status == 1)
        let out = result.stdoutLines
        #expect(out.count == count)
        let opener = MessageOpener(keys: InMemoryKeys([device.pair]))
        let now = Int64(Date().timeIntervalSince1970)
        for (index, line) in out.enumerated() where index % 97 == 0 || (index + 1) % 500 == 0 {
            let object = try #require(try JSON.parse(Array(line.utf8)).objectValue)
            if (index + 1) % 500 == 0 {
                #expect(object["line"] == .int(Int64(index + 1)))
            } else {
                let data = try #require(object["payload"]?.objectValue?["ENCRYPTED_DATA"]?.stringValue)
                #expect(try opener.open(encryptedData: data, now: now).body.id == "m\(index + 1)")
            }
        }
    }
}
