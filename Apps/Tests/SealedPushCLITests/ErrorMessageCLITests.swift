import Foundation
import Testing
import SealedPushTestSupport

/// Errors a newcomer meets, in the CLI's terms: the exact message, the command that fixes it.
@Suite("CLI: errors in the user's terms", .timeLimit(.minutes(10)))
struct ErrorMessageCLITests {
    /// A scratch directory with a device store (`dev`) and its record (`dev.json`).
    static func scratch() throws -> (dir: URL, device: String, record: String) {
        let dir = try makeScratchDirectory("errors")
        let device = dir.appendingPathComponent("dev").path
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", device])
        try #require(generated.status == 0, "keys generate failed: \(generated.stderr)")
        let record = dir.appendingPathComponent("dev.json")
        try Data(generated.stdout).write(to: record)
        return (dir, device, record.path)
    }

    static func failure(_ arguments: [String]) throws -> String {
        let r = try ChildProcess.sealedpush(arguments)
        #expect(r.status != 0, Comment(rawValue: "\(arguments) succeeded"))
        return r.stderr
    }

    @Test("a missing store names the command that creates it")
    func missingStore() throws {
        let (dir, _, _) = try Self.scratch()
        let missing = dir.appendingPathComponent("nostore").path
        for args in [["keys", "list"], ["trust", "list"], ["device", "status"]] {
            let stderr = try Self.failure(args + ["--keychain", missing])
            #expect(stderr.contains("no key store at \(missing): create one with `sealedpush keys generate --keychain \(missing)`"), Comment(rawValue: "\(args): \(stderr)"))
            #expect(!stderr.contains("itemNotFound") && !stderr.contains("genericPassword"), Comment(rawValue: "store internals leak: \(stderr)"))
        }
        let sender = try Self.failure(["sender", "list", "--keychain", missing])
        #expect(sender.contains("`sealedpush sender generate --keychain \(missing)`"), Comment(rawValue: sender))
    }

    @Test("trust remove of an unknown key says so and points at trust list")
    func trustRemoveUnknown() throws {
        let (_, device, _) = try Self.scratch()
        let stderr = try Self.failure(["trust", "remove", "0000000000000000", "--keychain", device])
        #expect(stderr.contains("no trusted sender key 0000000000000000 (see `sealedpush trust list --keychain \(device)`)"), Comment(rawValue: stderr))
        #expect(!stderr.contains("itemNotFound"), Comment(rawValue: stderr))
    }

    @Test("seal --sign-with a device store names sender generate for that directory")
    func signWithDeviceStore() throws {
        let (_, device, record) = try Self.scratch()
        let stderr = try Self.failure(["seal", "--to", record, "--body", "x", "--sign-with", device])
        #expect(stderr.contains("has no active signing key: create one with `sealedpush sender generate --keychain \(device)`"), Comment(rawValue: stderr))
    }

    @Test("destroying or retiring the active key names rotate, and --force")
    func activeKeyRefusals() throws {
        let (_, device, _) = try Self.scratch()
        let list = try ChildProcess.sealedpush(["keys", "list", "--json", "--keychain", device])
        let keyID = try #require(((try JSONSerialization.jsonObject(with: Data(list.stdout))) as? [[String: Any]])?.first?["key_id"] as? String)
        let destroy = try Self.failure(["keys", "destroy", keyID, "--keychain", device])
        #expect(destroy.contains("run `sealedpush keys rotate --keychain \(device)` first, or pass --force"), Comment(rawValue: destroy))
        let retire = try Self.failure(["keys", "retire", keyID, "--keychain", device])
        #expect(retire.contains("cannot be retired directly: `sealedpush keys rotate --keychain \(device)`"), Comment(rawValue: retire))
    }

    @Test("a malformed key id says what a key id is")
    func malformedKeyID() throws {
        let (_, device, _) = try Self.scratch()
        for args in [["keys", "retire", "abc"], ["sender", "destroy", "ABCDEF0123456789"], ["trust", "remove", "12"]] {
            let stderr = try Self.failure(args + ["--keychain", device])
            #expect(stderr.contains("is not a key id: a key id is 16 lowercase hex digits"), Comment(rawValue: "\(args): \(stderr)"))
        }
    }

    @Test("--badge -1 is refused with the rule")
    func negativeBadge() throws {
        let (_, _, record) = try Self.scratch()
        let stderr = try Self.failure(["seal", "--to", record, "--body", "x", "--badge", "-1"])
        #expect(stderr.contains("--badge must be 0 or more"), Comment(rawValue: stderr))
    }

    @Test("device push names seal --headers output and batch lines instead of answering invalidPayload")
    func sealOutputWrappers() throws {
        let (dir, device, record) = try Self.scratch()
        let headers = try ChildProcess.sealedpush(["seal", "--to", record, "--body", "x", "--headers"])
        let headersFile = dir.appendingPathComponent("headers.json")
        try Data(headers.stdout).write(to: headersFile)
        let r = try ChildProcess.sealedpush(["device", "push", "--keychain", device, headersFile.path])
        #expect(r.status == 1 && r.stdout.isEmpty)
        #expect(r.stderr == "Error: this is `seal --headers` output, not an APNs payload; pass its `payload`, e.g. "
                + "`jq -c .payload FILE | sealedpush device push -` (or seal without --headers)\n")

        let recordText = try String(contentsOfFile: record, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let batch = try ChildProcess.sealedpush(["seal", "--batch", "-"], stdin: Array("{\"to\":\(recordText),\"body\":\"x\"}\n".utf8))
        let line = try ChildProcess.sealedpush(["device", "push", "--keychain", device, "--json", "-"], stdin: batch.stdout)
        #expect(line.status == 1)
        #expect(line.stderr == "Error: this is a `seal --batch` output line, not an APNs payload; pass its `payload`, e.g. "
                + "`jq -c .payload FILE | sealedpush device push -`\n")
        let errorLine = try ChildProcess.sealedpush(["device", "push", "--keychain", device, "-"], stdin: Array(#"{"line":3,"error":"x"}"#.utf8))
        #expect(errorLine.stderr.hasPrefix("Error: this is a `seal --batch` error line"), Comment(rawValue: errorLine.stderr))
        // The payload itself still goes through (and an unrelated JSON object is still iOS's invalidPayload).
        let payload = try ChildProcess.sealedpush(["seal", "--to", record, "--body", "x"])
        #expect(try ChildProcess.sealedpush(["device", "push", "--keychain", device, "-"], stdin: payload.stdout).status == 0)
        let other = try ChildProcess.sealedpush(["device", "push", "--keychain", device, "--json", "-"], stdin: Array(#"{"payload":1}"#.utf8))
        #expect(other.stdoutText.contains(#""reason":"invalidPayload""#), Comment(rawValue: other.stdoutText))
    }

    @Test("batch members are snake_case; an old spelling is refused with the new name")
    func batchMemberSpelling() throws {
        let (_, _, record) = try Self.scratch()
        let recordText = try String(contentsOfFile: record, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let lines = ["thread-id", "threadId", "expires-in", "collapseId"].map { "{\"to\":\(recordText),\"body\":\"x\",\"\($0)\":\"v\"}" }
            + ["{\"to\":\(recordText),\"body\":\"x\",\"thread_id\":\"ops\",\"expires_in\":\"1h\",\"collapse_id\":\"c\"}"]
        let r = try ChildProcess.sealedpush(["seal", "--batch", "-"], stdin: Array(lines.joined(separator: "\n").utf8))
        #expect(r.status == 1)
        let out = r.stdoutLines
        try #require(out.count == 5)
        #expect(out[0] == #"{"line":1,"error":"the request is invalid: member 'thread-id' is spelled 'thread_id' (batch members are snake_case)"}"#)
        #expect(out[1] == #"{"line":2,"error":"the request is invalid: member 'threadId' is spelled 'thread_id' (batch members are snake_case)"}"#)
        #expect(out[2] == #"{"line":3,"error":"the request is invalid: member 'expires-in' is spelled 'expires_in' (batch members are snake_case)"}"#)
        #expect(out[3] == #"{"line":4,"error":"the request is invalid: member 'collapseId' is spelled 'collapse_id' (batch members are snake_case)"}"#)
        #expect(out[4].hasPrefix(#"{"payload":"#) && out[4].contains(#""apns-collapse-id":"c""#), Comment(rawValue: out[4]))
        let help = try ChildProcess.sealedpush(["seal", "--help"], environment: ["COLUMNS": "200"]).stdoutText
        #expect(help.contains(#""thread_id": "...""#) && !help.contains(#""thread-id": "...""#))
    }

    @Test("a fallback is logged at notice for a person; --json stays quiet unless --log-level asks")
    func fallbackLogging() throws {
        let (dir, _, record) = try Self.scratch()
        let other = dir.appendingPathComponent("other").path
        #expect(try ChildProcess.sealedpush(["keys", "generate", "--keychain", other]).status == 0)
        let payload = try ChildProcess.sealedpush(["seal", "--to", record, "--body", "x"]).stdout
        let unset = ["SEALEDPUSH_LOG_LEVEL": ""]
        let human = try ChildProcess.sealedpush(["device", "push", "--keychain", other, "-"], stdin: payload, environment: unset)
        #expect(human.stderr.contains("notice sealedpush.extension: reason=unknownKey"), Comment(rawValue: human.stderr))
        let json = try ChildProcess.sealedpush(["device", "push", "--json", "--keychain", other, "-"], stdin: payload, environment: unset)
        #expect(json.status == 0 && json.stderr.isEmpty, Comment(rawValue: json.stderr))
        #expect(json.stdoutText.contains(#""reason":"unknownKey""#))
        let asked = try ChildProcess.sealedpush(["device", "push", "--json", "--log-level", "notice", "--keychain", other, "-"], stdin: payload, environment: unset)
        #expect(asked.stderr.contains("reason=unknownKey"), Comment(rawValue: asked.stderr))
        let bad = try ChildProcess.sealedpush(["device", "push", "--log-level", "loud", "--keychain", other, "-"], stdin: payload)
        #expect(bad.status != 0 && bad.stderr.contains("--log-level"), Comment(rawValue: bad.stderr))
    }

    @Test("keys list refuses a store whose generation or .lock file group or others can read, with the chmod")
    func storeFilePermissions() throws {
        let (_, device, _) = try Self.scratch()
        for name in ["generation", ".lock"] {
            let path = device + "/" + name
            #expect(chmod(path, 0o644) == 0)
            let stderr = try Self.failure(["keys", "list", "--keychain", device])
            #expect(stderr == "Error: insecurePermissions: \(path) has mode 644, which lets group or others at it; the store refuses "
                    + "to use it. Fix it with: chmod 600 '\(path)'\n")
            #expect(chmod(path, 0o600) == 0)
            #expect(try ChildProcess.sealedpush(["keys", "list", "--keychain", device]).status == 0)
        }
    }
}
