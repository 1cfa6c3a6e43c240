import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushTestSupport

/// A device keychain and a server store in a temporary directory, driven through the CLI.
struct CLIDevice {
    let dir: URL
    var device: String { dir.appendingPathComponent("device").path }
    var server: String { dir.appendingPathComponent("server").path }
    var recordPath: String { dir.appendingPathComponent("device.json").path }

    /// A fresh device whose keys `keys generate` made (with `generate`'s extra arguments, `--no-reveal` say).
    init(generate extra: [String] = []) throws {
        dir = try makeScratchDirectory("device")
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", device] + extra)
        try #require(generated.status == 0, "keys generate failed: \(generated.stderr)")
        try Data(generated.stdout).write(to: URL(fileURLWithPath: recordPath))
    }

    func run(_ args: [String], stdin: [UInt8]? = nil) throws -> ChildProcess.Result { try ChildProcess.sealedpush(args, stdin: stdin) }

    func seal(_ extra: [String] = [], to record: String? = nil, body: String = "The eagle lands at noon.") throws -> [UInt8] {
        let r = try run(["seal", "--to", record ?? recordPath, "--title", "Agent K", "--body", body] + extra)
        try #require(r.status == 0, "seal failed: \(r.stderr)")
        return r.stdout
    }

    func push(_ payload: [UInt8], _ extra: [String] = []) throws -> (result: ChildProcess.Result, json: JSONObject) {
        let r = try run(["device", "push", "--keychain", device, "--json"] + extra + ["-"], stdin: payload)
        guard case let .object(o) = try JSON.parse(r.stdout) else { throw NotAJSONObject(output: r.stdoutText + r.stderr) }
        return (r, o)
    }
}

private func outcome(_ o: JSONObject) -> String? { o["outcome"]?.stringValue }
private func reason(_ o: JSONObject) -> String? { o["reason"]?.stringValue }
private func shown(_ o: JSONObject, _ field: String) -> String? { o["notification"]?.objectValue?[field]?.stringValue }

/// `device push --json` printed something other than a JSON object.
struct NotAJSONObject: Error, CustomStringConvertible {
    let output: String
    var description: String { "push printed no JSON object: \(output)" }
}

@Suite("CLI: device, keys and trust", .serialized, .timeLimit(.minutes(10))) struct DeviceCLITests {
    @Test func sealThenPushDecrypts() throws {
        let d = try CLIDevice()
        let (r, o) = try d.push(try d.seal(["--subtitle", "Field report", "--thread-id", "ops-7", "--badge", "3"]))
        #expect(r.status == 0)
        #expect(outcome(o) == "decrypted")
        #expect(o["reason"] == .null)
        #expect(shown(o, "title") == "Agent K" && shown(o, "subtitle") == "Field report")
        #expect(shown(o, "body") == "The eagle lands at noon." && shown(o, "threadIdentifier") == "ops-7")
        #expect(o["notification"]?.objectValue?["badge"] == .int(3))
        // A person-readable banner without --json; logs carry the reason code, never the plaintext.
        let text = try d.run(["device", "push", "--keychain", d.device, "-"], stdin: try d.seal())
        #expect(text.stdoutText.contains("The eagle lands at noon."))
        #expect(text.stdoutText.contains("outcome: decrypted"))
        #expect(!text.stderr.contains("eagle"))
    }

    @Test func replayedPayloadFallsBack() throws {
        let d = try CLIDevice()
        let payload = try d.seal()
        #expect(outcome(try d.push(payload).json) == "decrypted")
        let again = try d.push(payload).json
        #expect(outcome(again) == "fallback" && reason(again) == "replayed")
        #expect(shown(again, "body") == "(Encrypted)")
    }

    @Test("device push --request-id: the same push under the same request identifier opens again, under another it is replayed")
    func requestIdentifierRule() throws {
        let d = try CLIDevice()
        let payload = try d.seal()
        let first = try d.push(payload, ["--request-id", "collapse-7"]).json
        #expect(outcome(first) == "decrypted")
        #expect(first["request_id"] == .string("collapse-7"))
        let retry = try d.push(payload, ["--request-id", "collapse-7"]).json
        #expect(outcome(retry) == "decrypted" && shown(retry, "body") == "The eagle lands at noon.")
        let other = try d.push(payload, ["--request-id", "collapse-8"]).json
        #expect(reason(other) == "replayed")
        let drawn = try d.push(payload).json
        #expect(reason(drawn) == "replayed")
        #expect(drawn["request_id"]?.stringValue?.count == 36, "a drawn identifier is shaped like an apns-id: \(drawn)")
        let empty = try d.run(["device", "push", "--keychain", d.device, "--request-id", "", "-"], stdin: payload)
        #expect(empty.status != 0 && empty.stderr.contains("--request-id"))
    }

    @Test func rejectedPayloadsExitNonZero() throws {
        let d = try CLIDevice()
        for (input, expected) in [("not json", "invalidPayload"), ("{\"no\":\"aps\"}", "invalidPayload"), ("", "invalidPayload"),
                                  ("{\"aps\":{\"alert\":\"x\"},\"pad\":\"" + String(repeating: "a", count: 4100) + "\"}", "payloadTooLarge")] {
            let (r, o) = try d.push(Array(input.utf8))
            #expect(r.status != 0)
            #expect(outcome(o) == "rejected" && reason(o) == expected)
            #expect(o["notification"] == .null)
        }
        let dirAsFile = try d.run(["device", "push", "--keychain", d.device, d.dir.path])
        #expect(dirAsFile.status != 0)
        #expect(dirAsFile.stderr.contains("is a directory"))
    }

    /// The strict switches of #45 (`device config --signatures`, `--plaintext`): absent, today's behaviour (unsigned
    /// accepted, plaintext shown as it came); `--plaintext refuse` shows a push without ENCRYPTED_DATA as
    /// `(Encrypted)`; `--signatures required` refuses an unsigned message; both are in `device status`.
    @Test func strictSwitchesRefusePlaintextAndUnsignedMessages() throws {
        let d = try CLIDevice()
        func status() throws -> JSONObject {
            let r = try d.run(["device", "status", "--keychain", d.device, "--json"])
            return try #require(try JSON.parse(r.stdout).objectValue, "\(r.stderr)")
        }
        #expect(try status()["signatures"] == .string("optional") && status()["plaintext"] == .string("show"))
        let plain = Array(#"{"aps":{"alert":{"title":"Hello","body":"forged text"},"mutable-content":1}}"#.utf8)
        #expect(shown(try d.push(plain).json, "body") == "forged text", "absent a setting, plaintext is shown as before")

        let refuse = try d.run(["device", "config", "--plaintext", "refuse", "--keychain", d.device])
        #expect(refuse.status == 0 && refuse.stdoutText.contains("plaintext: refuse"), "\(refuse.stderr)")
        let refused = try d.push(plain)
        #expect(reason(refused.json) == "notEncrypted" && shown(refused.json, "body") == "(Encrypted)", "\(refused.json)")
        let refusedShown = try #require(refused.json["notification"]?.objectValue)
        for field in ["title", "subtitle", "body"] {
            #expect(refusedShown[field]?.stringValue?.contains("forged text") != true, "\(field) shows the push's own text")
        }

        #expect(outcome(try d.push(try d.seal()).json) == "decrypted", "unsigned accepted while signatures are optional")
        let required = try d.run(["device", "config", "--signatures", "required", "--keychain", d.device])
        #expect(required.status == 0 && required.stdoutText.contains("signatures: required"), "\(required.stderr)")
        let unsigned = try d.push(try d.seal()).json
        #expect(outcome(unsigned) == "fallback" && reason(unsigned) == "signatureRequired" && shown(unsigned, "body") == "(Encrypted)")
        #expect(try status()["signatures"] == .string("required") && status()["plaintext"] == .string("refuse"))

        #expect(try d.run(["device", "config", "--signatures", "optional", "--plaintext", "show", "--keychain", d.device]).status == 0)
        #expect(outcome(try d.push(try d.seal()).json) == "decrypted")
        for bad in [["--signatures", "maybe"], ["--plaintext", "hide"]] {
            let r = try d.run(["device", "config"] + bad + ["--keychain", d.device])
            #expect(r.status != 0 && r.stderr.contains(bad[0]), "\(bad): \(r.stderr)")
        }
    }

    @Test func simctlStylePayloadsAndPassThrough() throws {
        let d = try CLIDevice()
        let plain = #"{"Simulator Target Bundle":"com.example.app","aps":{"alert":{"title":"Hello","body":"plain"},"mutable-content":1}}"#
        let o = try d.push(Array(plain.utf8)).json
        #expect(outcome(o) == "original" && reason(o) == "notEncrypted" && shown(o, "body") == "plain")
        let notMutable = try d.push(Array(#"{"aps":{"alert":{"title":"Hello"}}}"#.utf8)).json
        #expect(outcome(notMutable) == "original" && reason(notMutable) == "notMutable")
        let noAlert = try d.push(Array(#"{"aps":{"mutable-content":1,"badge":2}}"#.utf8)).json
        #expect(outcome(noAlert) == "original" && reason(noAlert) == "noAlert")
    }

    @Test func lockStatesAfterReboot() throws {
        let d = try CLIDevice()
        let payload = try d.seal()
        #expect(try d.run(["device", "reboot", "--keychain", d.device]).status == 0)
        #expect(try d.run(["device", "status", "--keychain", d.device]).stdoutText.contains("beforeFirstUnlock"))
        let locked = try d.push(payload).json
        #expect(outcome(locked) == "fallback" && reason(locked) == "keychainLocked" && shown(locked, "body") == "(Encrypted)")
        #expect(try d.run(["device", "unlock", "--keychain", d.device]).status == 0)
        // The unlock opened the message from the pending queue (reveal v1 §9): the same payload arriving again under
        // another notification is a replay, and a new message opens.
        let again = try d.push(payload).json
        #expect(outcome(again) == "fallback" && reason(again) == "replayed")
        #expect(outcome(try d.push(try d.seal()).json) == "decrypted")
        // After a first unlock, locking again keeps afterFirstUnlock keys readable.
        #expect(try d.run(["device", "lock", "--keychain", d.device]).status == 0)
        #expect(outcome(try d.push(try d.seal()).json) == "decrypted")
    }

    @Test func timeoutCrashAndClock() throws {
        let d = try CLIDevice()
        let stalled = try d.push(try d.seal(), ["--time-limit", "100ms", "--extension-delay", "600ms", "--expiry-grace", "300ms"]).json
        #expect(outcome(stalled) == "timeout" && reason(stalled) == "timeExpired")
        #expect(shown(stalled, "subtitle") == "(Encrypted)" && shown(stalled, "body") == "")
        let crashed = try d.push(try d.seal(), ["--extension-crash"]).json
        #expect(outcome(crashed) == "original" && reason(crashed) == "extensionCrashed" && shown(crashed, "body") == "(Encrypted)")
        let later = Int(Date().timeIntervalSince1970) + 3600
        let expired = try d.push(try d.seal(["--expires-in", "1m"]), ["--clock", String(later)]).json
        #expect(outcome(expired) == "fallback" && reason(expired) == "expired")
        let early = try d.push(try d.seal(), ["--clock", "2020-01-01T00:00:00Z"]).json
        #expect(reason(early) == "notYetValid")
        #expect(try d.run(["device", "push", "--keychain", d.device, "--clock", "yesterday", "-"], stdin: try d.seal()).status != 0)
    }

    @Test func keyLifecycleThroughTheCLI() throws {
        let d = try CLIDevice()
        let again = try d.run(["keys", "generate", "--keychain", d.device])
        #expect(again.status != 0)
        #expect(again.stderr.contains("rotate"))
        let inFlight = try d.seal()
        let rotated = try d.run(["keys", "rotate", "--keychain", d.device, "--grace", "1h"])
        #expect(rotated.status == 0)
        let newRecord = try DeviceKeyRecord(jsonBytes: rotated.stdout)
        let oldRecord = try DeviceKeyRecord(jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: d.recordPath))))
        #expect(newRecord.keyID != oldRecord.keyID)
        #expect(outcome(try d.push(inFlight).json) == "decrypted")

        let list = try d.run(["keys", "list", "--keychain", d.device, "--json"])
        guard case let .array(rows) = try JSON.parse(list.stdout) else { Issue.record("list --json is not an array"); return }
        // Two device keys and the reveal key `keys generate` made beside them (rotate left it alone).
        #expect(rows.count == 3)
        #expect(rows.filter { $0.objectValue?["kind"] == .string("reveal") }.count == 1)
        let states = rows.compactMap { $0.objectValue }.filter { $0["kind"] == .string("device") }.reduce(into: [String: String]()) { $0[$1["key_id"]!.stringValue!] = $1["state"]!.stringValue! }
        #expect(states == [newRecord.keyID.hex: "active", oldRecord.keyID.hex: "retired"])
        #expect(rows.allSatisfy { row in ["key_id", "kind", "state", "created_at", "retire_after", "destroyed_at"].allSatisfy { row.objectValue?[$0] != nil } })
        #expect(!list.stdoutText.contains("secret"))

        let exported = try d.run(["keys", "export", "--keychain", d.device])
        #expect(try DeviceKeyRecord(jsonBytes: exported.stdout) == newRecord)

        // Past the deadline, prune destroys the retired key: the in-flight kind of message now falls back.
        let pending = try d.seal()
        #expect(try d.run(["keys", "retire", oldRecord.keyID.hex, "--keychain", d.device, "--grace", "0s"]).status == 0)
        #expect(try d.run(["keys", "prune", "--keychain", d.device]).status == 0)
        let pruned = try d.push(pending).json
        #expect(outcome(pruned) == "fallback" && reason(pruned) == "unknownKey")

        let refuse = try d.run(["keys", "destroy", newRecord.keyID.hex, "--keychain", d.device])
        #expect(refuse.status != 0)
        #expect(refuse.stderr.contains("force"))
        let badID = try d.run(["keys", "destroy", "not-hex", "--keychain", d.device])
        #expect(badID.status != 0)
    }

    @Test func trustAndSignatures() throws {
        let d = try CLIDevice()
        let sender = try d.run(["sender", "generate", "--keychain", d.server])
        #expect(sender.status == 0)
        let senderRecord = d.dir.appendingPathComponent("sender.json")
        try Data(sender.stdout).write(to: senderRecord)
        #expect(try d.run(["trust", "require-signature", "on", "--keychain", d.device]).status == 0)
        let unsigned = try d.push(try d.seal()).json
        #expect(reason(unsigned) == "signatureRequired")
        let untrusted = try d.push(try d.seal(["--sign-with", d.server])).json
        #expect(reason(untrusted) == "untrustedSender")
        #expect(try d.run(["trust", "add", senderRecord.path, "--keychain", d.device]).status == 0)
        #expect(outcome(try d.push(try d.seal(["--sign-with", d.server])).json) == "decrypted")

        // A rotated sender key: the old one stays trusted, so a message signed before the rotation still verifies.
        let signedOld = try d.seal(["--sign-with", d.server])
        let rotated = try d.run(["sender", "rotate", "--keychain", d.server])
        let rotatedPath = d.dir.appendingPathComponent("sender2.json")
        try Data(rotated.stdout).write(to: rotatedPath)
        #expect(try d.run(["trust", "add", rotatedPath.path, "--keychain", d.device]).status == 0)
        #expect(outcome(try d.push(signedOld).json) == "decrypted")
        #expect(outcome(try d.push(try d.seal(["--sign-with", d.server])).json) == "decrypted")

        let list = try d.run(["trust", "list", "--keychain", d.device, "--json"])
        guard case let .object(o) = try JSON.parse(list.stdout), case let .array(trusted)? = o["trusted"] else {
            Issue.record("trust list --json shape"); return
        }
        #expect(trusted.count == 2)
        #expect(o["require_signature"] == .bool(true))
        let old = try SenderKeyRecord(jsonBytes: Array(try Data(contentsOf: senderRecord)))
        #expect(try d.run(["trust", "remove", old.keyID.hex, "--keychain", d.device]).status == 0)
        let afterRemoval = try d.push(try d.seal(["--sign-with", d.server])).json
        #expect(outcome(afterRemoval) == "decrypted")
        let tampered = Array("{\"type\":\"sealedpush-sender-key\",\"version\":1,\"key_id\":\"0000000000000000\",\"public_key\":\"\(Base64.encode(old.publicKey.bytes))\"}".utf8)
        let refused = try d.run(["trust", "add", "-", "--keychain", d.device], stdin: tampered)
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("key_id"))
    }

    @Test func missingStoreIsAClearError() throws {
        let dir = try makeScratchDirectory("nostore")
        let r = try ChildProcess.sealedpush(["keys", "list", "--keychain", dir.appendingPathComponent("absent").path])
        #expect(r.status != 0)
        #expect(r.stderr.contains("--keychain") || r.stderr.contains("keys generate"))
    }

    @Test func demoRunsAndTellsTheStory() throws {
        let r = try ChildProcess.sealedpushServer(["demo"])
        #expect(r.status == 0, "demo failed: \(r.stderr)")
        let text = r.stdoutText
        for expected in ["outcome: decrypted", "reason: decryptionFailed", "reason: keychainLocked", "reason: timeExpired",
                         "The eagle lands at noon.", "Secret Message!",
                         "phone-1: delivered, phone-2: delivered", "skipped: phone-2 (unregistered)",
                         "Press and hold to read", "outcome: held", "the secret text is in none of them", "Unlock iPhone to read",
                         "outcome: locked", "outcome: revealed", "The safe house moved to the harbour.",
                         // Mailbox mode (issue #46): a handle in the push, a 20 KB message, before first unlock, the list, a retraction.
                         "SEALEDPUSH_FETCH (a handle):", "The handover is at the old mill.", "the phone shows 20174 bytes of text",
                         "Arrived while the phone was still starting.", "list: 2 never seen", "shown  Off 1: the meeting moved to Tuesday.",
                         "shown  Off 2: bring the second key.", "retraction: sent", "reason: retracted"] {
            #expect(text.contains(expected), "demo output lacks \(expected)")
        }
        #expect(!text.contains("\u{1B}["), "piped demo output must be plain text")
    }
}
