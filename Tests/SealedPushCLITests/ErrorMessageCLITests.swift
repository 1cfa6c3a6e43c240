import Foundation
import Testing
import SealedPushTestSupport

/// Errors a newcomer meets, in the CLI's terms: the exact message, the command that fixes it.
@Suite("CLI: errors in the user's terms")
struct ErrorMessageCLITests {
    /// A scratch directory with a device store (`dev`) and its record (`dev.json`).
    static func scratch() throws -> (dir: URL, device: String, record: String) {
        let dir = try CLIRunner.temporaryDirectory("errors")
        let device = dir.appendingPathComponent("dev").path
        let generated = try CLIRunner.run(["keys", "generate", "--keychain", device])
        try #require(generated.status == 0, "keys generate failed: \(generated.stderr)")
        let record = dir.appendingPathComponent("dev.json")
        try Data(generated.stdout).write(to: record)
        return (dir, device, record.path)
    }

    static func failure(_ arguments: [String]) throws -> String {
        let r = try CLIRunner.run(arguments)
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
        let list = try CLIRunner.run(["keys", "list", "--json", "--keychain", device])
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
}
