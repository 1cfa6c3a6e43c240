import Foundation
import Testing
import SealedPushTestSupport

/// Staged sender rotation (issue #15 item 1), through the CLI with signed messages in flight.
@Suite("CLI: staged sender rotation", .timeLimit(.minutes(10)))
struct StagedRotationCLITests {
    let dir: URL
    init() throws { dir = try makeScratchDirectory("staged") }

    func path(_ name: String) -> String { dir.appendingPathComponent(name).path }

    @discardableResult
    func ok(_ arguments: [String]) throws -> ChildProcess.Result {
        let r = try ChildProcess.sealedpush(arguments)
        try #require(r.status == 0, Comment(rawValue: "\(arguments) failed: \(r.stderr)"))
        return r
    }

    func write(_ bytes: [UInt8], _ name: String) throws -> String {
        try Data(bytes).write(to: URL(fileURLWithPath: path(name)))
        return path(name)
    }

    /// A device store that trusts `senderRecord` and requires signatures; returns its record's path.
    func device(_ name: String, trusting senderRecord: String) throws -> String {
        let record = try write(try ok(["keys", "generate", "--keychain", path(name)]).stdout, "\(name).json")
        try ok(["trust", "add", senderRecord, "--keychain", path(name)])
        try ok(["trust", "require-signature", "on", "--keychain", path(name)])
        return record
    }

    /// A message to `record` signed with the server store's active key, as the file it would be queued in.
    func seal(_ text: String, to record: String) throws -> String {
        try write(try ok(["seal", "--to", record, "--body", text, "--sign-with", path("srv")]).stdout, "\(UUID().uuidString).payload")
    }

    /// `device push --json` of `payload` on device `name`: (outcome, reason).
    func push(_ payload: String, on name: String) throws -> (outcome: String, reason: String?) {
        let r = try ChildProcess.sealedpush(["device", "push", "--json", "--keychain", path(name), payload])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [String: Any], Comment(rawValue: r.stderr))
        return (object["outcome"] as? String ?? "?", object["reason"] as? String)
    }

    func states() throws -> [String: String] {
        let list = try ok(["sender", "list", "--json", "--keychain", path("srv")])
        let keys = try #require(try JSONSerialization.jsonObject(with: Data(list.stdout)) as? [[String: Any]])
        return Dictionary(uniqueKeysWithValues: keys.map { ($0["key_id"] as! String, $0["state"] as! String) })
    }

    @Test("rotate --stage, export, trust, activate: no device that followed it sees untrustedSender")
    func wholeSequence() throws {
        let srv = path("srv")
        let oldRecord = try write(try ok(["sender", "generate", "--keychain", srv]).stdout, "sender-old.json")
        let oldID = try #require(try states().first?.key)
        let devices = ["phoneA", "phoneB", "phoneC"]
        var records: [String: String] = [:]
        for name in devices { records[name] = try device(name, trusting: oldRecord) }

        // In flight before anything changes (signed by the old key).
        var inFlight: [(payload: String, device: String)] = try devices.map { (try seal("before staging", to: records[$0]!), $0) }

        // 1. Stage: a next key; the active key keeps signing.
        let staged = try ok(["sender", "rotate", "--stage", "--json", "--keychain", srv])
        let stagedList = try #require(try JSONSerialization.jsonObject(with: Data(staged.stdout)) as? [[String: Any]])
        let nextID = try #require(stagedList.first?["key_id"] as? String)
        #expect(stagedList.first?["state"] as? String == "next")
        #expect(staged.stderr.contains("sealedpush sender export --key-id \(nextID) --keychain \(srv) > sender-next.json"), Comment(rawValue: staged.stderr))
        #expect(try states() == [oldID: "active", nextID: "next"])
        inFlight += try devices.map { (try seal("staged, not yet distributed", to: records[$0]!), $0) }

        // Activating a key whose record never left the server is refused, with the commands that fix it.
        let early = try ChildProcess.sealedpush(["sender", "activate", nextID, "--keychain", srv])
        #expect(early.status == 1)
        #expect(early.stderr == "Error: next signing key \(nextID) was never exported, so no device trusts it yet: run "
                + "`sealedpush sender export --key-id \(nextID) --keychain \(srv) > sender-next.json`, have every device run "
                + "`sealedpush trust add sender-next.json`, then activate it; --force activates it anyway "
                + "(devices that do not trust it answer untrustedSender)\n")
        // A plain rotate would bypass the staged key: refused too.
        let plain = try ChildProcess.sealedpush(["sender", "rotate", "--keychain", srv])
        #expect(plain.status == 1 && plain.stderr.contains("signing key \(nextID) is already staged as the next key"), Comment(rawValue: plain.stderr))
        #expect(try states() == [oldID: "active", nextID: "next"])

        // 2. Distribute: export the next record; devices trust it one by one while messages keep flowing.
        let nextRecord = try write(try ok(["sender", "export", "--key-id", nextID, "--keychain", srv]).stdout, "sender-next.json")
        for name in devices {
            try ok(["trust", "add", nextRecord, "--keychain", path(name)])
            inFlight += try devices.map { (try seal("distributing", to: records[$0]!), $0) }
            // Some of the queue reaches devices now (in the middle of the distribution).
            let (payload, device) = inFlight.removeFirst()
            #expect(try push(payload, on: device) == ("decrypted", nil), Comment(rawValue: "\(device) during distribution"))
        }
        let trusted = try ok(["trust", "list", "--keychain", path("phoneA")]).stdoutText
        #expect(trusted.contains(oldID) && trusted.contains(nextID), Comment(rawValue: trusted))

        // 3. Activate: the next key signs from now on; the old one is retired for the grace.
        let activated = try ok(["sender", "activate", nextID, "--grace", "1d", "--keychain", srv])
        #expect(activated.stdoutText.contains(nextID) && activated.stdoutText.contains("retired"), Comment(rawValue: activated.stdoutText))
        #expect(try states() == [nextID: "active", oldID: "retired"])
        inFlight += try devices.map { (try seal("after activation", to: records[$0]!), $0) }

        // Everything still queued — signed by the old key before activation and by the new one after — opens.
        for (payload, device) in inFlight.reversed() {
            #expect(try push(payload, on: device) == ("decrypted", nil), Comment(rawValue: device))
        }

        // 4. After the grace: devices drop the old key; new messages still open.
        for name in devices { try ok(["trust", "remove", oldID, "--keychain", path(name)]) }
        #expect(try push(try seal("old key gone", to: records["phoneB"]!), on: "phoneB") == ("decrypted", nil))
    }

    @Test("a device that never trusted the next key is why activation waits for the export")
    func skippingTheProcedureIsVisible() throws {
        let srv = path("srv")
        let oldRecord = try write(try ok(["sender", "generate", "--keychain", srv]).stdout, "sender-old.json")
        let record = try device("phone", trusting: oldRecord)
        let staged = try ok(["sender", "rotate", "--stage", "--json", "--keychain", srv])
        let nextID = try #require((try JSONSerialization.jsonObject(with: Data(staged.stdout)) as? [[String: Any]])?.first?["key_id"] as? String)
        try ok(["sender", "activate", nextID, "--force", "--keychain", srv])
        #expect(try push(try seal("forced", to: record), on: "phone") == ("fallback", "untrustedSender"))
        let again = try ChildProcess.sealedpush(["sender", "activate", nextID, "--keychain", srv])
        #expect(again.stderr == "Error: key \(nextID) is already the active signing key: nothing to activate "
                + "(`sealedpush sender rotate --stage --keychain \(srv)` stages a new one)\n")
    }

    @Test("the next key can be dropped with retire, and destroy clears it too")
    func dropTheNextKey() throws {
        let srv = path("srv")
        try ok(["sender", "generate", "--keychain", srv])
        for drop in [["retire"], ["destroy"]] {
            let staged = try ok(["sender", "rotate", "--stage", "--json", "--keychain", srv])
            let nextID = try #require((try JSONSerialization.jsonObject(with: Data(staged.stdout)) as? [[String: Any]])?.first?["key_id"] as? String)
            try ok(["sender"] + drop + [nextID, "--keychain", srv])
            #expect(try states()[nextID] == (drop == ["retire"] ? "retired" : "destroyed"))
            let refused = try ChildProcess.sealedpush(["sender", "activate", nextID, "--keychain", srv])
            #expect(refused.status == 1 && refused.stderr.contains("not the staged next key"), Comment(rawValue: refused.stderr))
        }
        try ok(["sender", "rotate", "--keychain", srv])  // nothing staged any more: a plain rotation works
    }
}
