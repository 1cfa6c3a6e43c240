import Foundation
import SealedPushTestSupport
import SealedPushCrypto
import SealedPushKeychain
import SealedPushWire
import Testing

/// Secret hygiene of the CLI (issue 7, item 5): with logging at its most verbose level
/// (`SEALEDPUSH_LOG_LEVEL=trace`), succeeding and failing flows never put the plaintext or a key's
/// secret bytes in the logs (stderr), failing flows never put them on stdout either, and every file
/// the stores write is 0600 in 0700 directories.
@Suite("CLI: secret hygiene", .serialized, .timeLimit(.minutes(10)))
struct SecretHygieneTests {
    static let title = "HYGIENE-TITLE-5d1e"
    static let subtitle = "HYGIENE-SUBTITLE-c07b"
    static let body = "HYGIENE-BODY-a93f"
    static let plaintexts = [title, subtitle, body]
    static let verbose = ["SEALEDPUSH_LOG_LEVEL": "trace"]

    /// One thing that must not appear, and how it was spelled.
    struct Needle {
        let label: String
        let bytes: [UInt8]
    }

    /// Every spelling of `secret` a log line might use: raw, lower and upper hex, base64 with and
    /// without padding, base64url, and the same for its first 16 bytes (a truncated dump).
    static func spellings(of secret: [UInt8], _ label: String) -> [Needle] {
        var out: [Needle] = []
        for (part, bytes) in [("", secret), (" (first 16 bytes)", Array(secret.prefix(16)))] {
            let hex = bytes.map { String(format: "%02x", $0) }.joined()
            let b64 = Data(bytes).base64EncodedString()
            let unpadded = String(b64.prefix { $0 != "=" })
            let url = unpadded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            out += [Needle(label: "\(label)\(part) raw", bytes: bytes),
                    Needle(label: "\(label)\(part) hex", bytes: Array(hex.utf8)),
                    Needle(label: "\(label)\(part) HEX", bytes: Array(hex.uppercased().utf8)),
                    Needle(label: "\(label)\(part) base64", bytes: Array(unpadded.utf8)),
                    Needle(label: "\(label)\(part) base64url", bytes: Array(url.utf8))]
        }
        return out
    }

    /// The labels of the needles found in `haystack`.
    static func found(_ needles: [Needle], in haystack: [UInt8]) -> [String] {
        needles.filter { contains(haystack, $0.bytes) }.map(\.label)
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = needle[0]
        var i = 0
        while i <= haystack.count - needle.count {
            if haystack[i] == first && haystack[i..<(i + needle.count)].elementsEqual(needle) { return true }
            i += 1
        }
        return false
    }

    /// One CLI run of the flows and what it may show.
    struct Run {
        let label: String
        let result: ChildProcess.Result
        /// Only a push that really decrypted may show the plaintext, and only on stdout.
        let mayShowPlaintext: Bool
    }

    /// A temporary directory with a device store, a second device store and a sender store.
    struct Stores {
        let dir: URL
        var device: String { dir.appendingPathComponent("device").path }
        var otherDevice: String { dir.appendingPathComponent("other-device").path }
        var sender: String { dir.appendingPathComponent("sender").path }
        var record: String { dir.appendingPathComponent("device.json").path }
        var otherRecord: String { dir.appendingPathComponent("other-device.json").path }
        var senderRecord: String { dir.appendingPathComponent("sender.json").path }
    }

    @Test func searchFindsEverySpelling() {
        let secret: [UInt8] = (0..<32).map { UInt8($0 * 7 + 3) }
        let needles = Self.spellings(of: secret, "k")
        for needle in needles {
            let line = Array("2026-01-01T00:00:00+0000 info sealedpush: key=".utf8) + needle.bytes + Array(" [x]\n".utf8)
            #expect(Self.found([needle], in: line) == [needle.label])
        }
        let plain = Array("notice sealedpush.extension: opened \(Self.body) for you".utf8)
        #expect(Self.found(Self.plaintexts.map { Needle(label: $0, bytes: Array($0.utf8)) }, in: plain) == [Self.body])
        #expect(Self.found(needles, in: Array("nothing to see here".utf8)).isEmpty)
    }

    @Test func logsNeverCarrySecretsOrPlaintext() throws {
        let stores = Stores(dir: try makeScratchDirectory("hygiene"))
        defer { try? FileManager.default.removeItem(at: stores.dir) }
        var runs: [Run] = []
        func run(_ label: String, _ args: [String], stdin: [UInt8]? = nil, mayShowPlaintext: Bool = false) throws -> ChildProcess.Result {
            let r = try ChildProcess.sealedpush(args, stdin: stdin, environment: Self.verbose, timeout: 60)
            #expect(r.exitedNormally, "\(label): killed by a signal")
            runs.append(Run(label: label, result: r, mayShowPlaintext: mayShowPlaintext))
            return r
        }
        func succeed(_ label: String, _ args: [String], stdin: [UInt8]? = nil, mayShowPlaintext: Bool = false) throws -> ChildProcess.Result {
            let r = try run(label, args, stdin: stdin, mayShowPlaintext: mayShowPlaintext)
            try #require(r.status == 0, "\(label) failed: \(r.stderr)")
            return r
        }
        func push(_ label: String, _ payload: [UInt8], _ extra: [String] = [], keychain: String? = nil,
                  expect outcome: String, reason: String? = nil) throws {
            let decrypts = outcome == "decrypted"
            let r = try run(label, ["device", "push", "--keychain", keychain ?? stores.device, "--json"] + extra + ["-"], stdin: payload,
                            mayShowPlaintext: decrypts)
            let o = try #require(try JSON.parse(r.stdout).objectValue, "\(label): \(r.stdoutText) \(r.stderr)")
            #expect(o["outcome"]?.stringValue == outcome, "\(label): \(r.stdoutText)")
            if let reason { #expect(o["reason"]?.stringValue == reason, "\(label): \(r.stdoutText)") }
        }
        let message = ["--title", Self.title, "--subtitle", Self.subtitle, "--body", Self.body]
        func seal(_ extra: [String] = [], to record: String? = nil) throws -> [UInt8] {
            try succeed("seal", ["seal", "--to", record ?? stores.record] + message + extra).stdout
        }

        // Keys and trust.
        try Data(try succeed("keys generate", ["keys", "generate", "--keychain", stores.device]).stdout).write(to: URL(fileURLWithPath: stores.record))
        try Data(try succeed("keys generate (other)", ["keys", "generate", "--keychain", stores.otherDevice]).stdout)
            .write(to: URL(fileURLWithPath: stores.otherRecord))
        try Data(try succeed("sender generate", ["sender", "generate", "--keychain", stores.sender]).stdout)
            .write(to: URL(fileURLWithPath: stores.senderRecord))
        _ = try succeed("trust add", ["trust", "add", stores.senderRecord, "--keychain", stores.device])
        _ = try succeed("keys export", ["keys", "export", "--keychain", stores.device])
        _ = try succeed("sender export", ["sender", "export", "--keychain", stores.sender])
        _ = try succeed("keys list", ["keys", "list", "--keychain", stores.device, "--json"])
        _ = try succeed("trust list", ["trust", "list", "--keychain", stores.device, "--json"])

        // Succeeding pushes: a signed message as a banner and as --json.
        let banner = try succeed("device push (banner)", ["device", "push", "--keychain", stores.device, "-"],
                                 stdin: try seal(["--sign-with", stores.sender]), mayShowPlaintext: true)
        #expect(banner.stdoutText.contains(Self.body) && banner.stdoutText.contains("outcome: decrypted"))
        // The logs were on at a verbose level: the info line of an opened notification is there.
        #expect(banner.stderr.contains("notification opened"), "no info-level log line; is SEALEDPUSH_LOG_LEVEL honoured? \(banner.stderr)")
        let signed = try seal(["--sign-with", stores.sender])
        try push("device push --json (signed)", signed, expect: "decrypted")

        // Failing pushes.
        try push("replayed", signed, expect: "fallback", reason: "replayed")
        var tampered = try #require(try JSON.parse(try seal()).objectValue)
        var chars = Array(try #require(tampered["ENCRYPTED_DATA"]?.stringValue))
        chars[chars.count / 2] = chars[chars.count / 2] == "A" ? "B" : "A"
        tampered["ENCRYPTED_DATA"] = .string(String(chars))
        try push("tampered", JSON.serialize(.object(tampered)), expect: "fallback", reason: "decryptionFailed")
        try push("wrong key", try seal(), keychain: stores.otherDevice, expect: "fallback", reason: "unknownKey")
        try push("timeout", try seal(), ["--time-limit", "100ms", "--extension-delay", "600ms", "--expiry-grace", "300ms"],
                 expect: "timeout", reason: "timeExpired")
        _ = try succeed("device reboot", ["device", "reboot", "--keychain", stores.device])
        try push("locked", try seal(), expect: "fallback", reason: "keychainLocked")
        _ = try succeed("device unlock", ["device", "unlock", "--keychain", stores.device])
        _ = try succeed("require signature", ["trust", "require-signature", "on", "--keychain", stores.device])
        try push("unsigned while required", try seal(), expect: "fallback", reason: "signatureRequired")
        _ = try succeed("require signature off", ["trust", "require-signature", "off", "--keychain", stores.device])
        try push("decrypted after unlock", try seal(), expect: "decrypted")

        // Reveal on demand (issue #24), on the other device, whose store holds no opened text: the held push, the
        // notification store in both forms and a key rotation print no plaintext; only the press and hold shows it.
        let revealPayload = try succeed("seal --reveal", ["seal", "--to", stores.otherRecord, "--reveal"] + message).stdout
        try push("held", revealPayload, ["--request-id", "hygiene-reveal"], keychain: stores.otherDevice, expect: "held")
        _ = try succeed("device notifications", ["device", "notifications", "--keychain", stores.otherDevice])
        _ = try succeed("device notifications --json", ["device", "notifications", "--json", "--keychain", stores.otherDevice])
        let expanded = try succeed("device expand", ["device", "expand", "hygiene-reveal", "--keychain", stores.otherDevice],
                                   mayShowPlaintext: true)
        #expect(expanded.stdoutText.contains(Self.body) && expanded.stdoutText.contains("outcome: revealed"))
        _ = try succeed("keys rotate --reveal", ["keys", "rotate", "--reveal", "--keychain", stores.otherDevice])

        // Failing seals: an oversized message, and a batch with a good and a bad line.
        let oversized = try run("seal oversized", ["seal", "--to", stores.record, "--title", Self.title,
                                                   "--body", Self.body + String(repeating: " \(Self.body)", count: 300)])
        #expect(oversized.status == 1 && oversized.stdout.isEmpty)
        let record = String(decoding: try Data(contentsOf: URL(fileURLWithPath: stores.record)), as: UTF8.self)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let batch = "{\"to\":\(record),\"title\":\"\(Self.title)\",\"body\":\"\(Self.body)\"}\n"
            + "{\"to\":\(record),\"title\":\"\(Self.title)\",\"body\":\"\(String(repeating: Self.body, count: 300))\"}\n"
        let batched = try run("seal --batch", ["seal", "--batch", "-", "--sign-with", stores.sender], stdin: Array(batch.utf8))
        #expect(batched.status == 1 && batched.stdoutLines.count == 2)
        let firstText = try #require(batched.stdoutLines.first)
        let firstLine = try #require(try JSON.parse(Array(firstText.utf8)).objectValue)
        let batchPayload = try #require(firstLine["payload"], "the batch's first line sealed nothing: \(batched.stdoutText.prefix(300))")
        try push("device push of the batch line", JSON.serialize(batchPayload), expect: "decrypted")

        // Staged sender rotation (issue #15): stage, export the next record, activate; the old key's secret is a needle too.
        let firstSigner = try SenderKeyring(store: try KeychainStore(url: URL(fileURLWithPath: stores.sender), create: false)).activeSigningKey()
        let staged = try succeed("sender rotate --stage", ["sender", "rotate", "--stage", "--json", "--keychain", stores.sender])
        guard case let .array(stagedKeys) = try JSON.parse(staged.stdout), let nextID = stagedKeys.first?.objectValue?["key_id"]?.stringValue else {
            Issue.record("rotate --stage --json printed \(staged.stdoutText)"); return
        }
        _ = try succeed("sender export --key-id", ["sender", "export", "--key-id", nextID, "--keychain", stores.sender])
        _ = try succeed("sender activate", ["sender", "activate", nextID, "--keychain", stores.sender])
        _ = try succeed("sender list", ["sender", "list", "--json", "--keychain", stores.sender])

        // The secrets, read through the library: device key pairs, the sender signing key, and each store's key file.
        var needles = Self.plaintexts.map { Needle(label: "plaintext \($0)", bytes: Array($0.utf8)) }
        var secretNeedles: [Needle] = []
        for (name, path) in [("device", stores.device), ("other device", stores.otherDevice)] {
            let pair = try DeviceKeyring(store: try KeychainStore(url: URL(fileURLWithPath: path), create: false)).activeKeyPair()
            secretNeedles += Self.spellings(of: pair.secretKey.unsafeCopyToArray(), "\(name) X25519 secret key")
            let reveal = try RevealKeyring(store: try KeychainStore(url: URL(fileURLWithPath: path), create: false)).activeKeyPair()
            secretNeedles += Self.spellings(of: reveal.storedSecret.unsafeCopyToArray(), "\(name) reveal secret key")
        }
        let signer = try SenderKeyring(store: try KeychainStore(url: URL(fileURLWithPath: stores.sender), create: false)).activeSigningKey()
        secretNeedles += Self.spellings(of: signer.secretKey.unsafeCopyToArray(), "sender Ed25519 secret key")
        secretNeedles += Self.spellings(of: signer.seed.unsafeCopyToArray(), "sender Ed25519 seed")
        secretNeedles += Self.spellings(of: firstSigner.secretKey.unsafeCopyToArray(), "first sender Ed25519 secret key")
        secretNeedles += Self.spellings(of: firstSigner.seed.unsafeCopyToArray(), "first sender Ed25519 seed")
        for (name, path) in [("device", stores.device), ("other device", stores.otherDevice), ("sender", stores.sender)] {
            let storeKey = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path).appendingPathComponent("store.key")))
            try #require(storeKey.count >= 16, "\(name) store.key is \(storeKey.count) bytes")
            secretNeedles += Self.spellings(of: storeKey, "\(name) store key")
        }
        needles += secretNeedles
        try #require(runs.count == 42, "the flows ran \(runs.count) commands")

        for run in runs {
            let inLogs = Self.found(needles, in: run.result.stderrBytes)
            #expect(inLogs.isEmpty, "\(run.label): stderr contains \(inLogs)")
            // No run prints a secret on stdout; only a decrypted push may print the plaintext there.
            let onStdout = Self.found(run.mayShowPlaintext ? secretNeedles : needles, in: run.result.stdout)
            #expect(onStdout.isEmpty, "\(run.label): stdout contains \(onStdout)")
        }
        let logged = runs.reduce(0) { $0 + $1.result.stderrBytes.count }
        #expect(logged > 0, "no run logged anything")

        // Every file the stores wrote is 0600, every directory 0700.
        for root in [stores.device, stores.otherDevice, stores.sender] {
            var checked = 0
            try Self.walk(URL(fileURLWithPath: root)) { path, type, mode in
                checked += 1
                switch type {
                case .typeDirectory: #expect(mode == 0o700, "\(path) is a directory with mode \(String(mode, radix: 8))")
                case .typeRegular: #expect(mode == 0o600, "\(path) is a file with mode \(String(mode, radix: 8))")
                default: Issue.record("\(path) is neither a file nor a directory (\(type.rawValue))")
                }
            }
            #expect(checked >= 5, "\(root): only \(checked) entries")
        }
    }

    /// Calls `visit` with every entry under `root`, the root included (not following symbolic links).
    static func walk(_ root: URL, _ visit: (String, FileAttributeType, Int) throws -> Void) throws {
        let fm = FileManager.default
        func attributes(_ path: String) throws -> (FileAttributeType, Int) {
            let a = try fm.attributesOfItem(atPath: path)
            let type = (a[.type] as? FileAttributeType) ?? FileAttributeType(rawValue: (a[.type] as? String) ?? "unknown")
            let mode = ((a[.posixPermissions] as? NSNumber)?.intValue ?? (a[.posixPermissions] as? Int) ?? -1) & 0o7777
            return (type, mode)
        }
        var stack = [root.path]
        while let path = stack.popLast() {
            let (type, mode) = try attributes(path)
            try visit(path, type, mode)
            if type == .typeDirectory {
                for name in try fm.contentsOfDirectory(atPath: path) { stack.append(path + "/" + name) }
            }
        }
    }
}
