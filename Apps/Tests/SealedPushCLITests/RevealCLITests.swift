import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushTestSupport

/// Reveal on demand through the CLI (reveal v1, issue #24): the reveal key's lifecycle under `keys`, `seal --reveal`,
/// the notification store (`device notifications`), the press and hold (`device expand`) and `device config --previews`.
@Suite("CLI: reveal on demand", .serialized, .timeLimit(.minutes(10))) struct RevealCLITests {
    static let secret = "The safe house moved to the harbour."

    /// A device whose keys were made with `extra` (`--no-reveal`, say), its record beside it.
    static func device(_ extra: [String] = []) throws -> CLIDevice {
        let d = try CLIDevice(generate: extra)
        return d
    }

    /// `seal --reveal` of the secret to `record` (default: the device's record).
    static func sealReveal(_ d: CLIDevice, to record: String? = nil, _ extra: [String] = []) throws -> [UInt8] {
        try d.seal(["--reveal"] + extra, to: record, body: secret)
    }

    /// `keys list --json` as (kind, state) per key id.
    static func listed(_ d: CLIDevice) throws -> [String: (kind: String, state: String)] {
        let list = try d.run(["keys", "list", "--keychain", d.device, "--json"])
        try #require(list.status == 0, "keys list failed: \(list.stderr)")
        guard case let .array(rows) = try JSON.parse(list.stdout) else { throw NotAJSONObject(output: list.stdoutText) }
        var out: [String: (kind: String, state: String)] = [:]
        for row in rows {
            let o = try #require(row.objectValue)
            out[try #require(o["key_id"]?.stringValue)] = (try #require(o["kind"]?.stringValue), try #require(o["state"]?.stringValue))
        }
        return out
    }

    /// Everything the device's notification store holds, as the file is on disk and as both forms of `device notifications` print it.
    static func storeTexts(_ d: CLIDevice) throws -> [String] {
        let file = try String(contentsOfFile: d.device + "/notifications.json", encoding: .utf8)
        let text = try d.run(["device", "notifications", "--keychain", d.device])
        let json = try d.run(["device", "notifications", "--keychain", d.device, "--json"])
        #expect(text.status == 0 && json.status == 0, "\(text.stderr)\(json.stderr)")
        return [file, text.stdoutText, json.stdoutText]
    }

    @Test("keys generate makes a reveal key and exports it in `reveal`; --no-reveal skips it; add-reveal adds one")
    func generateWithAndWithoutReveal() throws {
        let d = try Self.device()
        let record = try DeviceKeyRecord(jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: d.recordPath))))
        let reveal = try #require(record.reveal, "keys generate exported no reveal member")
        #expect(reveal.keyID != record.keyID)
        #expect(try Self.listed(d).mapValues { "\($0.kind) \($0.state)" } == [record.keyID.hex: "device active", reveal.keyID.hex: "reveal active"])
        let exported = try d.run(["keys", "export", "--keychain", d.device])
        #expect(try DeviceKeyRecord(jsonBytes: exported.stdout) == record)
        let table = try d.run(["keys", "list", "--keychain", d.device]).stdoutText
        #expect(table.contains("KIND") && table.contains("reveal") && table.contains("device"), Comment(rawValue: table))

        let plain = try Self.device(["--no-reveal"])
        let plainRecord = try DeviceKeyRecord(jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: plain.recordPath))))
        #expect(plainRecord.reveal == nil)
        #expect(!(try plain.run(["keys", "export", "--keychain", plain.device]).stdoutText.contains("reveal")))
        #expect(try Self.listed(plain).values.map(\.kind) == ["device"])
        let added = try plain.run(["keys", "add-reveal", "--keychain", plain.device])
        #expect(added.status == 0, "\(added.stderr)")
        let addedRecord = try DeviceKeyRecord(jsonBytes: added.stdout)
        #expect(addedRecord.keyID == plainRecord.keyID && addedRecord.reveal != nil)
        let twice = try plain.run(["keys", "add-reveal", "--keychain", plain.device])
        #expect(twice.status != 0 && twice.stderr.contains("keys rotate --reveal"), Comment(rawValue: twice.stderr))
        let again = try plain.run(["keys", "generate", "--keychain", plain.device])
        #expect(again.status != 0 && again.stderr.contains("rotate"), Comment(rawValue: again.stderr))
    }

    @Test("a reveal key cannot be made while the phone is locked: the error says to unlock it")
    func lockedPhoneSaysUnlock() throws {
        let d = try Self.device(["--no-reveal"])
        #expect(try d.run(["device", "lock", "--keychain", d.device]).status == 0)
        let add = try d.run(["keys", "add-reveal", "--keychain", d.device])
        #expect(add.status != 0)
        #expect(add.stderr.contains("sealedpush device unlock --keychain \(d.device)"), Comment(rawValue: add.stderr))
        // generate on a locked phone whose keys are gone: the same advice, and --no-reveal.
        let record = try DeviceKeyRecord(jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: d.recordPath))))
        #expect(try d.run(["device", "unlock", "--keychain", d.device]).status == 0)
        #expect(try d.run(["keys", "destroy", record.keyID.hex, "--force", "--keychain", d.device]).status == 0)
        #expect(try d.run(["device", "lock", "--keychain", d.device]).status == 0)
        let generate = try d.run(["keys", "generate", "--keychain", d.device])
        #expect(generate.status != 0)
        #expect(generate.stderr.contains("sealedpush device unlock") && generate.stderr.contains("--no-reveal"), Comment(rawValue: generate.stderr))
        #expect(try Self.listed(d).values.allSatisfy { $0.state == "destroyed" }, "a refused generate changed nothing")
        #expect(try d.run(["device", "unlock", "--keychain", d.device]).status == 0)
        #expect(try d.run(["keys", "generate", "--keychain", d.device]).status == 0)
    }

    @Test("keys rotate --reveal: a new reveal key, the device key unchanged; a message in flight still reveals; retire, destroy and prune cover reveal keys")
    func rotateRevealLifecycle() throws {
        let d = try Self.device()
        let old = try DeviceKeyRecord(jsonBytes: Array(try Data(contentsOf: URL(fileURLWithPath: d.recordPath))))
        let oldReveal = try #require(old.reveal).keyID.hex
        let inFlight = try Self.sealReveal(d)
        let rotated = try d.run(["keys", "rotate", "--reveal", "--grace", "1h", "--keychain", d.device])
        #expect(rotated.status == 0, "\(rotated.stderr)")
        let new = try DeviceKeyRecord(jsonBytes: rotated.stdout)
        let newReveal = try #require(new.reveal).keyID.hex
        #expect(new.keyID == old.keyID && newReveal != oldReveal)
        let listed = try Self.listed(d)
        #expect(listed[oldReveal].map { "\($0.kind) \($0.state)" } == "reveal retired")
        #expect(listed[newReveal].map { "\($0.kind) \($0.state)" } == "reveal active")

        // The message sealed to the retired reveal key is held, then revealed within the grace.
        let pushed = try d.push(inFlight, ["--request-id", "in-flight"]).json
        #expect(pushed["outcome"]?.stringValue == "held")
        let expanded = try d.run(["device", "expand", "in-flight", "--keychain", d.device, "--json"])
        #expect(expanded.status == 0, "\(expanded.stderr)")
        let view = try #require(try JSON.parse(expanded.stdout).objectValue)
        #expect(view["outcome"] == .string("revealed") && view["view"]?.objectValue?["body"] == .string(Self.secret))

        // export --key-id names a device key; the record carries the active reveal key (after the rotation, the new one).
        let oldExport = try d.run(["keys", "export", "--key-id", old.keyID.hex, "--keychain", d.device])
        #expect(try DeviceKeyRecord(jsonBytes: oldExport.stdout).reveal?.keyID.hex == newReveal, "\(oldExport.stderr)")
        let revealExport = try d.run(["keys", "export", "--key-id", newReveal, "--keychain", d.device])
        #expect(revealExport.status != 0 && revealExport.stderr.contains("is a reveal key"), Comment(rawValue: revealExport.stderr))

        // A plain rotate changes the device key only.
        let deviceRotated = try DeviceKeyRecord(jsonBytes: try d.run(["keys", "rotate", "--keychain", d.device]).stdout)
        #expect(deviceRotated.keyID != old.keyID && deviceRotated.reveal?.keyID.hex == newReveal)

        let refuseRetire = try d.run(["keys", "retire", newReveal, "--keychain", d.device])
        #expect(refuseRetire.status != 0 && refuseRetire.stderr.contains("active reveal key")
                && refuseRetire.stderr.contains("keys rotate --reveal"), Comment(rawValue: refuseRetire.stderr))
        let refuseDestroy = try d.run(["keys", "destroy", newReveal, "--keychain", d.device])
        #expect(refuseDestroy.status != 0 && refuseDestroy.stderr.contains("--force"), Comment(rawValue: refuseDestroy.stderr))
        let retired = try d.run(["keys", "retire", oldReveal, "--grace", "0s", "--keychain", d.device, "--json"])
        #expect(retired.status == 0 && retired.stdoutText.contains("\"kind\":\"reveal\""), "\(retired.stdoutText)\(retired.stderr)")
        let pruned = try d.run(["keys", "prune", "--keychain", d.device, "--json"])
        #expect(pruned.status == 0 && pruned.stdoutText.contains(oldReveal), "\(pruned.stdoutText)\(pruned.stderr)")
        #expect(try Self.listed(d)[oldReveal]?.state == "destroyed")
        let unknown = try d.run(["keys", "destroy", "0000000000000000", "--keychain", d.device])
        #expect(unknown.status != 0 && unknown.stderr.contains("0000000000000000"))
        // Destroying the active reveal key with --force leaves a record without `reveal`.
        #expect(try d.run(["keys", "destroy", newReveal, "--force", "--keychain", d.device]).status == 0)
        #expect(try DeviceKeyRecord(jsonBytes: try d.run(["keys", "export", "--keychain", d.device]).stdout).reveal == nil)
    }

    @Test("seal --reveal through device push: held with the placeholder; the store never holds the text; expand reveals it")
    func revealRoundTrip() throws {
        let d = try Self.device()
        let payload = try Self.sealReveal(d, ["--subtitle", "Field report"])
        #expect(!String(decoding: payload, as: UTF8.self).contains("harbour"))
        let (r, o) = try d.push(payload, ["--request-id", "reveal-1"])
        #expect(r.status == 0)
        #expect(o["outcome"] == .string("held") && o["reason"] == .null)
        #expect(o["request_id"] == .string("reveal-1"))
        let shown = try #require(o["notification"]?.objectValue)
        #expect(shown["body"] == .string("Press and hold to read") && shown["title"] == .string("Secret Message!"))
        #expect(shown["categoryIdentifier"] == .string("SEALED_REVEAL"))
        #expect(!r.stdoutText.contains("harbour") && !r.stderr.contains("harbour"))

        let banner = try d.run(["device", "push", "--keychain", d.device, "--request-id", "reveal-2", "-"], stdin: try Self.sealReveal(d))
        #expect(banner.stdoutText.contains("outcome: held") && banner.stdoutText.contains("device expand reveal-2"), Comment(rawValue: banner.stdoutText))
        #expect(banner.stdoutText.contains("Press and hold to read") && !banner.stdoutText.contains("harbour"))

        for text in try Self.storeTexts(d) {
            #expect(text.contains("reveal-1") && text.contains("Press and hold to read"))
            #expect(!text.contains("harbour") && !text.contains("Field report"), Comment(rawValue: text))
        }

        let expanded = try d.run(["device", "expand", "reveal-1", "--keychain", d.device])
        #expect(expanded.status == 0, "\(expanded.stderr)")
        #expect(expanded.stdoutText.contains(Self.secret) && expanded.stdoutText.contains("Field report"))
        #expect(expanded.stdoutText.contains("outcome: revealed"))
        #expect(!expanded.stderr.contains("harbour"))
        let json = try #require(try JSON.parse(try d.run(["device", "expand", "reveal-1", "--keychain", d.device, "--json"]).stdout).objectValue)
        #expect(json["outcome"] == .string("revealed") && json["reason"] == .null)
        #expect(json["view"]?.objectValue?["subtitle"] == .string("Field report"))
        #expect(json["view"]?.objectValue?["attachments"] == .array([]))
        // Pressing and holding showed the text; none of it was written to the store.
        for text in try Self.storeTexts(d) { #expect(!text.contains("harbour"), Comment(rawValue: text)) }
    }

    @Test("seal --reveal to a record without a reveal key is refused, saying what to do; too large states what fits")
    func revealRefusals() throws {
        let plain = try Self.device(["--no-reveal"])
        let refused = try plain.run(["seal", "--to", plain.recordPath, "--body", Self.secret, "--reveal"])
        #expect(refused.status != 0 && refused.stdout.isEmpty)
        #expect(refused.stderr.contains("has no reveal key") && refused.stderr.contains("sealedpush keys add-reveal")
                && refused.stderr.contains("--no-reveal"), Comment(rawValue: refused.stderr))
        #expect(!refused.stderr.contains("harbour"))

        let d = try Self.device()
        let large = try d.run(["seal", "--to", d.recordPath, "--body", String(repeating: "a", count: 3500), "--reveal"])
        #expect(large.status != 0)
        let fits = try #require(large.stderr.firstMatch(of: /at most (\d+) bytes/).flatMap { Int($0.output.1) }, Comment(rawValue: large.stderr))
        #expect(fits > 100 && fits < 3500)
        #expect(large.stderr.contains("--body"))
        // The number stated fits.
        #expect(try d.run(["seal", "--to", d.recordPath, "--body", String(repeating: "a", count: fits), "--reveal"]).status == 0)

        // A batch line's "reveal": true: sealed for a record with a reveal key, refused on its line without.
        let withReveal = try String(contentsOfFile: d.recordPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let without = try String(contentsOfFile: plain.recordPath, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let lines = "{\"to\": \(withReveal), \"body\": \"\(Self.secret)\", \"reveal\": true}\n{\"to\": \(without), \"body\": \"x\", \"reveal\": true}\n"
        let batch = try d.run(["seal", "--batch", "-"], stdin: Array(lines.utf8))
        #expect(batch.status != 0)
        let out = batch.stdoutText.split(separator: "\n")
        #expect(out.count == 2)
        let first = try #require(try JSON.parse(Array(out[0].utf8)).objectValue)
        let payload = JSON.serialize(try #require(first["payload"]))
        #expect(try d.push(payload).json["outcome"] == .string("held"))
        #expect(out[1].contains("\"line\":2") && out[1].contains("no reveal key"))
        #expect(try plain.run(["seal", "--batch", "-", "--reveal"], stdin: Array(lines.utf8)).stderr.contains("--reveal cannot be used with --batch"))
    }

    @Test("device expand: locked, then revealed after unlock; an unknown id and a tampered store are clear errors")
    func expandOutcomes() throws {
        let d = try Self.device()
        #expect(try d.push(try Self.sealReveal(d), ["--request-id", "r1"]).json["outcome"] == .string("held"))
        #expect(try d.run(["device", "lock", "--keychain", d.device]).status == 0)
        let locked = try d.run(["device", "expand", "r1", "--keychain", d.device, "--json"])
        #expect(locked.status == 0, "\(locked.stderr)")
        let lockedView = try #require(try JSON.parse(locked.stdout).objectValue)
        #expect(lockedView["outcome"] == .string("locked") && lockedView["reason"] == .null)
        #expect(lockedView["view"]?.objectValue?["body"] == .string("Unlock iPhone to read"))
        #expect(!locked.stdoutText.contains("harbour"))
        let lockedText = try d.run(["device", "expand", "r1", "--keychain", d.device])
        #expect(lockedText.stdoutText.contains("Unlock iPhone to read") && lockedText.stdoutText.contains("outcome: locked"))

        #expect(try d.run(["device", "unlock", "--keychain", d.device]).status == 0)
        let revealed = try #require(try JSON.parse(try d.run(["device", "expand", "r1", "--keychain", d.device, "--json"]).stdout).objectValue)
        #expect(revealed["outcome"] == .string("revealed") && revealed["view"]?.objectValue?["body"] == .string(Self.secret))
        // Pressing and holding twice on one notification opens it twice.
        let twice = try #require(try JSON.parse(try d.run(["device", "expand", "r1", "--keychain", d.device, "--json"]).stdout).objectValue)
        #expect(twice["outcome"] == .string("revealed"))

        let unknown = try d.run(["device", "expand", "no-such-request", "--keychain", d.device])
        #expect(unknown.status == 1 && unknown.stdout.isEmpty)
        #expect(unknown.stderr.contains("no-such-request") && unknown.stderr.contains("device notifications"), Comment(rawValue: unknown.stderr))

        // An entry whose sealed envelope was changed in the store: a defined fallback, never the text, exit 0.
        let storePath = URL(fileURLWithPath: d.device + "/notifications.json")
        guard case var .array(entries) = try JSON.parse(Array(try Data(contentsOf: storePath))), case var .object(entry)? = entries.last,
              case var .object(info)? = entry["userInfo"], var envelope = info["SEALEDPUSH_REVEAL"]?.stringValue.map(Array.init) else {
            Issue.record("the notification store is not as expected"); return
        }
        envelope[envelope.count / 2] = envelope[envelope.count / 2] == "A" ? "B" : "A"
        info["SEALEDPUSH_REVEAL"] = .string(String(envelope))
        entry["userInfo"] = .object(info)
        entries[entries.count - 1] = .object(entry)
        try Data(JSON.serialize(.array(entries))).write(to: storePath)
        let edited = try d.run(["device", "expand", "r1", "--keychain", d.device, "--json"])
        #expect(edited.status == 0, "\(edited.stderr)")
        let editedView = try #require(try JSON.parse(edited.stdout).objectValue)
        #expect(editedView["outcome"] == .string("fallback") && editedView["reason"]?.stringValue != nil, "\(edited.stdoutText)")
        #expect(editedView["view"]?.objectValue?["body"] == .string("(Encrypted)") && !edited.stdoutText.contains("harbour"))

        try Data("{\"not\": \"a store\"".utf8).write(to: URL(fileURLWithPath: d.device + "/notifications.json"))
        for args in [["device", "expand", "r1"], ["device", "expand", "r1", "--json"], ["device", "notifications"], ["device", "notifications", "--json"]] {
            let tampered = try d.run(args + ["--keychain", d.device])
            #expect(tampered.status == 1, "\(args): \(tampered.status) \(tampered.stderr)")
            #expect(tampered.stderr.contains("notification store cannot be read"), Comment(rawValue: "\(args): \(tampered.stderr)"))
            #expect(!tampered.stdoutText.contains("harbour"))
        }
    }

    @Test("device config --previews: none and title keep the text out of the store; expand opens it; full is the default")
    func previewPolicy() throws {
        let d = try Self.device()
        #expect(try d.run(["device", "status", "--keychain", d.device]).stdoutText.contains("previews: full"))
        let noneSet = try d.run(["device", "config", "--previews", "none", "--keychain", d.device])
        #expect(noneSet.status == 0 && noneSet.stdoutText.contains("previews: none"), "\(noneSet.stderr)")
        #expect(try d.run(["device", "status", "--keychain", d.device]).stdoutText.contains("previews: none"))
        let hidden = try d.push(try d.seal([], body: Self.secret), ["--request-id", "p-none"]).json
        #expect(hidden["outcome"] == .string("decrypted"))
        let shownHidden = try #require(hidden["notification"]?.objectValue)
        #expect(shownHidden["title"] == .string("Secret Message!") && shownHidden["body"] == .string("Press and hold to read"))
        for text in try Self.storeTexts(d) { #expect(!text.contains("harbour") && !text.contains("Agent K"), Comment(rawValue: text)) }
        let opened = try #require(try JSON.parse(try d.run(["device", "expand", "p-none", "--keychain", d.device, "--json"]).stdout).objectValue)
        #expect(opened["outcome"] == .string("revealed") && opened["view"]?.objectValue?["body"] == .string(Self.secret))

        #expect(try d.run(["device", "config", "--previews", "title", "--keychain", d.device]).status == 0)
        let titled = try #require(try d.push(try d.seal([], body: Self.secret)).json["notification"]?.objectValue)
        #expect(titled["title"] == .string("Agent K") && titled["body"] == .string("Press and hold to read"))
        for text in try Self.storeTexts(d) { #expect(!text.contains("harbour"), Comment(rawValue: text)) }

        #expect(try d.run(["device", "config", "--previews", "full", "--keychain", d.device]).status == 0)
        let full = try #require(try d.push(try d.seal([], body: Self.secret)).json["notification"]?.objectValue)
        #expect(full["body"] == .string(Self.secret))

        let bad = try d.run(["device", "config", "--previews", "some", "--keychain", d.device])
        #expect(bad.status != 0 && bad.stderr.contains("--previews"))
        let nothing = try d.run(["device", "config", "--keychain", d.device])
        #expect(nothing.status != 0 && nothing.stderr.contains("--previews"))
        let both = try d.run(["device", "config", "--report-url", "https://push.example.com/r", "--previews", "none", "--keychain", d.device])
        #expect(both.status == 0 && both.stdoutText.contains("report URL") && both.stdoutText.contains("previews: none"))
    }
}

@Suite("CLI: reveal v1 revision 2 — nothing openable in the store, the pending queue", .serialized, .timeLimit(.minutes(10)))
struct RevealRevision2CLITests {
    @Test("previews none: device notifications --json holds no ENCRYPTED_DATA, only SEALEDPUSH_LOCAL; expand still reveals")
    func nothingOpenableInStore() throws {
        let d = try RevealCLITests.device()
        #expect(try d.run(["device", "config", "--previews", "none", "--keychain", d.device]).status == 0)
        let pushed = try d.push(try d.seal([], body: RevealCLITests.secret), ["--request-id", "p-local"]).json
        #expect(pushed["outcome"] == .string("decrypted"))
        let listed = try d.run(["device", "notifications", "--keychain", d.device, "--json"])
        #expect(listed.status == 0, "\(listed.stderr)")
        #expect(!listed.stdoutText.contains("ENCRYPTED_DATA") && listed.stdoutText.contains("SEALEDPUSH_LOCAL"), "\(listed.stdoutText)")
        let opened = try #require(try JSON.parse(try d.run(["device", "expand", "p-local", "--keychain", d.device, "--json"]).stdout).objectValue)
        #expect(opened["outcome"] == .string("revealed") && opened["view"]?.objectValue?["body"] == .string(RevealCLITests.secret))
        // Locked (after first unlock): the reveal key does not read, so the local envelope does not open.
        #expect(try d.run(["device", "lock", "--keychain", d.device]).status == 0)
        let locked = try #require(try JSON.parse(try d.run(["device", "expand", "p-local", "--keychain", d.device, "--json"]).stdout).objectValue)
        #expect(locked["outcome"] == .string("locked"))
    }

    @Test("device push --filtering: a replay is suppressed (not shown), without the entitlement it is (Encrypted)")
    func replaySuppressedWithFiltering() throws {
        let d = try RevealCLITests.device()
        let payload = try d.seal([], body: RevealCLITests.secret)
        #expect(try d.push(payload, ["--request-id", "f-1"]).json["outcome"] == .string("decrypted"))
        let shown = try d.push(payload, ["--request-id", "f-2"]).json
        #expect(shown["outcome"] == .string("fallback") && shown["reason"] == .string("replayed"))
        let filtered = try d.push(payload, ["--request-id", "f-3", "--filtering"]).json
        #expect(filtered["outcome"] == .string("suppressed"), "\(filtered)")
        #expect(filtered["notification"] == .null || filtered["notification"] == nil)
    }

    @Test("before first unlock: fallback without ENCRYPTED_DATA, counted in status --json; device unlock opens it and replaces the notification")
    func pendingQueue() throws {
        let d = try RevealCLITests.device()
        let payload = try d.seal([], body: RevealCLITests.secret)
        #expect(try d.run(["device", "reboot", "--keychain", d.device]).status == 0)
        let arrived = try d.push(payload, ["--request-id", "p-bfu"]).json
        #expect(arrived["outcome"] == .string("fallback") && arrived["reason"] == .string("keychainLocked"))
        let shown = try #require(arrived["notification"]?.objectValue)
        #expect(shown["userInfo"]?.objectValue?["ENCRYPTED_DATA"] == nil)
        #expect(shown["userInfo"]?.objectValue?["SEALEDPUSH_PENDING"] == .string("p-bfu"))
        func status() throws -> JSONObject {
            let run = try d.run(["device", "status", "--keychain", d.device, "--json"])
            #expect(run.status == 0, "\(run.stderr)")
            return try #require(try JSON.parse(run.stdout).objectValue)
        }
        let before = try status()
        #expect(before["pending"] == .int(1) && before["pending_dropped"] == .int(0) && before["lock_state"] == .string("beforeFirstUnlock"))
        let unlock = try d.run(["device", "unlock", "--keychain", d.device])
        #expect(unlock.status == 0 && unlock.stdoutText.contains("pending queue: 1 opened"), "\(unlock.stdoutText) \(unlock.stderr)")
        #expect(try status()["pending"] == .int(0))
        guard case let .array(listed) = try JSON.parse(try d.run(["device", "notifications", "--keychain", d.device, "--json"]).stdout) else {
            Issue.record("device notifications --json printed no array"); return
        }
        let mine = listed.compactMap(\.objectValue).filter { $0["request_id"] == .string("p-bfu") }
        #expect(mine.count == 1 && mine.first?["body"] == .string(RevealCLITests.secret), "\(listed)")
        // An unlock with nothing waiting prints only the state.
        #expect(!(try d.run(["device", "unlock", "--keychain", d.device]).stdoutText.contains("pending queue")))
    }
}
