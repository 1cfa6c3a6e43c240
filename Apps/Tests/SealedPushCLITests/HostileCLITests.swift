import Foundation
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Hostile inputs to the built `sealedpush` binary: bad files, bad records, bad payloads and bad
/// arguments, each with its exact outcome. Every case must exit normally (no signal), within the
/// runner's timeout, with the expected status, a clear phrase on stderr, no partial output on
/// stdout for an error, and no plaintext anywhere unless the message was really decrypted.
@Suite("CLI: hostile inputs", .serialized, .timeLimit(.minutes(10)))
struct HostileCLITests {
    /// The secret text sealed by the fixture; it may appear only in a decrypted notification.
    static let secretTitle = "HOSTILE-TITLE-7f3a"
    static let secretBody = "HOSTILE-BODY-91c2"

    /// One device keychain, its record, a sender store and its record, made once for the suite.
    struct Fixture: Sendable {
        let dir: URL
        let device: String
        let record: String
        let recordBytes: [UInt8]
        let sender: String
        let senderRecord: String
        /// A regular file, for "a file where a directory belongs".
        let plainFile: String

        init() throws {
            dir = try makeScratchDirectory("hostile")
            device = dir.appendingPathComponent("device").path
            record = dir.appendingPathComponent("device.json").path
            sender = dir.appendingPathComponent("sender").path
            senderRecord = dir.appendingPathComponent("sender.json").path
            plainFile = dir.appendingPathComponent("plain.txt").path
            let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", device])
            guard generated.status == 0 else { throw CLIError("keys generate failed: \(generated.stderr)") }
            recordBytes = generated.stdout
            try Data(recordBytes).write(to: URL(fileURLWithPath: record))
            let senderGenerated = try ChildProcess.sealedpush(["sender", "generate", "--keychain", sender])
            guard senderGenerated.status == 0 else { throw CLIError("sender generate failed: \(senderGenerated.stderr)") }
            try Data(senderGenerated.stdout).write(to: URL(fileURLWithPath: senderRecord))
            try Data("just a file\n".utf8).write(to: URL(fileURLWithPath: plainFile))
        }

        /// A fresh payload sealed to the fixture's device with the secret title and body.
        func sealed(_ extra: [String] = []) throws -> [UInt8] {
            let r = try ChildProcess.sealedpush(["seal", "--to", record, "--title", HostileCLITests.secretTitle,
                                       "--body", HostileCLITests.secretBody] + extra)
            guard r.status == 0 else { throw CLIError("seal failed: \(r.stderr)") }
            return r.stdout
        }

        /// The record's JSON text with `replacements` applied (member values swapped textually).
        func record(replacing replacements: [(String, String)]) -> [UInt8] {
            var text = String(decoding: recordBytes, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            for (old, new) in replacements { text = text.replacingOccurrences(of: old, with: new) }
            return Array(text.utf8)
        }

        /// The record's bytes with its trailing newline removed.
        var compactRecord: [UInt8] { record(replacing: []) }

        /// The record's `key_id` and `public_key` values.
        var keyIDAndPublicKey: (String, String) {
            let o = (try? JSON.parse(compactRecord).objectValue) ?? JSONObject()
            return (o["key_id"]?.stringValue ?? "", o["public_key"]?.stringValue ?? "")
        }
    }

    struct CLIError: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    nonisolated(unsafe) static var cached: Result<Fixture, any Error>?
    static let lock = NSLock()

    /// The suite's fixture, made on first use (the suite is serialized; the lock keeps it safe anyway).
    static func fixture() throws -> Fixture {
        lock.lock()
        defer { lock.unlock() }
        if let cached { return try cached.get() }
        let made = Result { try Fixture() }
        cached = made
        return try made.get()
    }

    /// What a case must produce.
    enum Expected: Sendable {
        /// An argument error from the parser: exit 64, this phrase on stderr, nothing on stdout.
        case usage(String)
        /// A runtime error: exit 1, `Error: ` and this phrase on stderr, nothing on stdout.
        case failure(String)
        /// `device push --json`: one JSON object with this outcome and reason, and this exit status.
        case delivered(outcome: String, reason: String?, status: Int32)
        /// `seal`: exit 0, a payload that the fixture's device decrypts, showing `title` (when given) and `badge`.
        case sealed(title: String?, badge: Int64?)
        /// `seal --batch`: this exit status and one line per entry (`nil`: a sealed payload; else an error containing it).
        case batch(status: Int32, lines: [String?])
    }

    /// Bytes for a case's input file or stdin, built from the fixture.
    typealias Make = @Sendable (Fixture) throws -> [UInt8]

    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        /// Arguments; `{KC}` device keychain, `{REC}` its record, `{SRV}` sender store, `{SREC}` sender record,
        /// `{IN}` the case's input file, `{DIR}` a directory, `{MISSING}` a path that does not exist,
        /// `{FILE}` a regular file.
        let arguments: [String]
        var file: Make?
        var stdin: Make?
        /// A `/bin/sh -c` script run instead (for argv bytes `Process` cannot carry); `$0` is the binary,
        /// `$1` the device record.
        var script: String?
        let expected: Expected

        init(_ name: String, _ arguments: [String], file: Make? = nil, stdin: Make? = nil, script: String? = nil, _ expected: Expected) {
            self.name = name
            self.arguments = arguments
            self.file = file
            self.stdin = stdin
            self.script = script
            self.expected = expected
        }

        var testDescription: String { name }
    }

    static func text(_ s: String) -> Make { { _ in Array(s.utf8) } }
    static func bytes(_ b: [UInt8]) -> Make { { _ in b } }
    static func push(_ extra: [String] = []) -> [String] { ["device", "push", "--keychain", "{KC}", "--json"] + extra + ["{IN}"] }
    static let sealTo = ["seal", "--to", "{IN}", "--body", "x"]
    static let tenMB = 10 * 1024 * 1024
    /// Whether record timestamps may have five-digit years (Foundation's ISO 8601 parser accepted them).
    static let fiveDigitYears = Timestamp.parse("99999-01-01T00:00:00Z") != nil

    /// A payload with `aps` members `aps` and extra top-level members `extra` (JSON text fragments).
    static func payload(aps: String = #""alert":"visible","mutable-content":1"#, _ extra: String = "") -> Make {
        text("{\"aps\":{\(aps)}\(extra.isEmpty ? "" : ",")\(extra)}")
    }

    /// A payload of exactly `size` bytes (mutable, with an alert, no ENCRYPTED_DATA).
    static func payload(ofSize size: Int) -> Make {
        { _ in
            let head = #"{"aps":{"alert":"visible","mutable-content":1},"pad":""#, tail = "\"}"
            return Array((head + String(repeating: "p", count: size - head.utf8.count - tail.utf8.count) + tail).utf8)
        }
    }

    /// A fixture payload whose ENCRYPTED_DATA is altered by `change`.
    static func sealedPayload(_ change: @escaping @Sendable (String) -> String) -> Make {
        { f in
            guard var o = try JSON.parse(try f.sealed()).objectValue, let e = o["ENCRYPTED_DATA"]?.stringValue else {
                throw CLIError("seal printed no payload")
            }
            o["ENCRYPTED_DATA"] = .string(change(e))
            return JSON.serialize(.object(o))
        }
    }

    static func batchLine(_ f: Fixture, _ members: String) -> String {
        "{\"to\":\(String(decoding: f.compactRecord, as: UTF8.self)),\(members)}"
    }

    static let cases: [Case] = [
        // Payload files through `device push` (device-outcomes.md, first two rows: rejected, exit 1).
        Case("empty payload file", push(), file: text(""), .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("directory as payload file", ["device", "push", "--keychain", "{KC}", "--json", "{DIR}"], .failure("is a directory")),
        Case("nonexistent payload file", ["device", "push", "--keychain", "{KC}", "--json", "{MISSING}"], .failure("does not exist")),
        Case("10 MB stdin to device push -", ["device", "push", "--keychain", "{KC}", "--json", "-"],
             stdin: bytes([UInt8](repeating: UInt8(ascii: "a"), count: tenMB)), .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("4096-byte payload (at the limit)", push(), file: payload(ofSize: 4096), .delivered(outcome: "original", reason: "notEncrypted", status: 0)),
        Case("4097-byte payload", push(), file: payload(ofSize: 4097), .delivered(outcome: "rejected", reason: "payloadTooLarge", status: 1)),
        Case("raw NUL after the payload object", push(), file: { f in try payload()(f) + [0] },
             .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("raw NUL inside a payload string", push(), file: bytes(Array(#"{"aps":{"alert":"a"#.utf8) + [0] + Array(#"b","mutable-content":1}}"#.utf8)),
             .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("invalid UTF-8 in a payload string", push(), file: bytes(Array(#"{"aps":{"alert":""#.utf8) + [0xFF, 0xFE] + Array(#"","mutable-content":1}}"#.utf8)),
             .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("UTF-8 BOM before the payload", push(), file: { f in [0xEF, 0xBB, 0xBF] + (try payload()(f)) },
             .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("payload is a JSON array", push(), file: text("[]"), .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("duplicate aps keys in the payload", push(), file: payload(#""aps":{}"#), .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("100000 nested [ as the payload", push(), file: text(String(repeating: "[", count: 100_000)),
             .delivered(outcome: "rejected", reason: "invalidPayload", status: 1)),
        Case("mutable-content as the string \"1\"", push(), file: payload(aps: #""alert":"visible","mutable-content":"1""#, #""ENCRYPTED_DATA":"AAAA""#),
             .delivered(outcome: "original", reason: "notMutable", status: 0)),
        Case("mutable-content as true", push(), file: payload(aps: #""alert":"visible","mutable-content":true"#, #""ENCRYPTED_DATA":"AAAA""#),
             .delivered(outcome: "original", reason: "notMutable", status: 0)),
        Case("ENCRYPTED_DATA as a number", push(), file: payload(#""ENCRYPTED_DATA":12"#), .delivered(outcome: "fallback", reason: "malformedPayload", status: 0)),
        Case("ENCRYPTED_DATA as an array", push(), file: payload(#""ENCRYPTED_DATA":["AAAA"]"#), .delivered(outcome: "fallback", reason: "malformedPayload", status: 0)),
        Case("ENCRYPTED_DATA as null", push(), file: payload(#""ENCRYPTED_DATA":null"#), .delivered(outcome: "fallback", reason: "malformedPayload", status: 0)),
        Case("ENCRYPTED_DATA empty", push(), file: payload(#""ENCRYPTED_DATA":"""#), .delivered(outcome: "fallback", reason: "malformedPayload", status: 0)),
        Case("ENCRYPTED_DATA not base64", push(), file: payload(#""ENCRYPTED_DATA":"not base64!""#), .delivered(outcome: "fallback", reason: "malformedPayload", status: 0)),
        Case("sealed ENCRYPTED_DATA cut in half", push(), file: sealedPayload { String($0.prefix($0.count / 2)) },
             .delivered(outcome: "fallback", reason: "malformedPayload", status: 0)),
        Case("sealed ENCRYPTED_DATA with one character changed", push(), file: sealedPayload { e in
            var chars = Array(e)
            let i = chars.count / 2
            chars[i] = chars[i] == "A" ? "B" : "A"
            return String(chars)
        }, .delivered(outcome: "fallback", reason: "decryptionFailed", status: 0)),

        // Device key records through `seal --to`.
        Case("empty record file", sealTo, file: text(""), .failure("not a JSON object")),
        Case("directory as record file", ["seal", "--to", "{DIR}", "--body", "x"], .failure("is a directory")),
        Case("nonexistent record file", ["seal", "--to", "{MISSING}", "--body", "x"], .failure("does not exist")),
        Case("10 MB stdin as the record (seal --to -)", ["seal", "--to", "-", "--body", "x"],
             stdin: bytes([UInt8](repeating: UInt8(ascii: "{"), count: tenMB)), .failure("over 65536 bytes")),
        Case("raw NUL after the record", sealTo, file: { f in f.compactRecord + [0] }, .failure("unexpected bytes after the value")),
        Case("raw NUL inside the record's key_id", sealTo, file: { f in
            let (kid, _) = f.keyIDAndPublicKey
            return f.record(replacing: [(kid, kid + "\u{0}")])
        }, .failure("control character")),
        Case("invalid UTF-8 in the record", sealTo, file: { f in
            let (kid, _) = f.keyIDAndPublicKey
            let parts = String(decoding: f.compactRecord, as: UTF8.self).components(separatedBy: kid)
            return Array(parts[0].utf8) + [0xC3, 0x28] + Array(parts[1].utf8)
        }, .failure("invalid UTF-8")),
        Case("record truncated to 1 byte", sealTo, file: { f in Array(f.compactRecord.prefix(1)) }, .failure("not a JSON object")),
        Case("record truncated inside \"type\"", sealTo, file: { f in Array(f.compactRecord.prefix(20)) }, .failure("not a JSON object")),
        Case("record truncated inside public_key", sealTo, file: { f in
            let text = String(decoding: f.compactRecord, as: UTF8.self)
            let start = text.range(of: #""public_key":""#).map { text.utf8.distance(from: text.startIndex, to: $0.upperBound) } ?? 0
            return Array(f.compactRecord.prefix(start + 10))
        }, .failure("unterminated string")),
        Case("record missing its closing brace", sealTo, file: { f in Array(f.compactRecord.dropLast()) }, .failure("not a JSON object")),
        // Five-digit years: the CLI must follow the record parser (`Timestamp.parse`), whichever way it decides.
        Case("record with created_at in year 99999", sealTo, file: { f in
            f.record(replacing: [(#""created_at":""#, #""created_at":"99999-01-01T00:00:00Z","x":""#)])
        }, fiveDigitYears ? .sealed(title: nil, badge: nil) : .failure(#""created_at" is missing or malformed"#)),
        Case("record with a negative created_at year", sealTo, file: { f in
            f.record(replacing: [(#""created_at":""#, #""created_at":"-0001-01-01T00:00:00Z","x":""#)])
        }, .failure(#""created_at" is missing or malformed"#)),
        Case("record with created_at as a negative number", sealTo, file: { f in
            f.record(replacing: [(#""created_at":""#, #""created_at":-5,"x":""#)])
        }, .failure(#""created_at" is missing or malformed"#)),
        Case("record with version past Int64", sealTo, file: { f in f.record(replacing: [(#""version":1"#, #""version":99999999999999999999999"#)]) },
             .failure(#""version" must be 1"#)),
        Case("record with version -1", sealTo, file: { f in f.record(replacing: [(#""version":1"#, #""version":-1"#)]) }, .failure(#""version" must be 1"#)),
        Case("record with version 1e400", sealTo, file: { f in f.record(replacing: [(#""version":1"#, #""version":1e400"#)]) }, .failure("number out of range")),
        Case("record with a duplicate public_key", sealTo, file: { f in
            let (_, pk) = f.keyIDAndPublicKey
            return f.record(replacing: [(#""public_key":""#, #""public_key":"\#(pk)","public_key":""#)])
        }, .failure("duplicate object key")),
        Case("60000 nested [ as the record", sealTo, file: text(String(repeating: "[", count: 60_000)), .failure("nesting deeper than 64")),
        Case("sender record passed to seal --to", ["seal", "--to", "{SREC}", "--body", "x"], .failure(#""type" must be "sealedpush-device-key""#)),

        // Sender key records through `trust add`.
        Case("device record passed to trust add", ["trust", "add", "{REC}", "--keychain", "{KC}"], .failure(#""type" must be "sealedpush-sender-key""#)),
        Case("empty sender record file", ["trust", "add", "{IN}", "--keychain", "{KC}"], file: text(""), .failure("`sealedpush sender export`")),
        Case("directory as sender record", ["trust", "add", "{DIR}", "--keychain", "{KC}"], .failure("is a directory")),

        // Hostile arguments.
        Case("--badge -1 (a value that looks like an option; refused: a badge is 0 or more)", ["seal", "--to", "{REC}", "--title", "badge", "--badge", "-1"],
             .usage("--badge must be 0 or more")),
        Case("--badge past Int64", ["seal", "--to", "{REC}", "--body", "x", "--badge", "99999999999999999999"],
             .usage("'99999999999999999999' is invalid for '--badge <N>'")),
        Case("--expires-in -5s", ["seal", "--to", "{REC}", "--body", "x", "--expires-in", "-5s"], .usage("'-5s' is invalid for '--expires-in")),
        Case("--expires-in overflowing", ["seal", "--to", "{REC}", "--body", "x", "--expires-in", "99999999999999999d"],
             .usage("'99999999999999999d' is invalid for '--expires-in")),
        Case("--expires-in 5x", ["seal", "--to", "{REC}", "--body", "x", "--expires-in", "5x"], .usage("'5x' is invalid for '--expires-in")),
        Case("--expires-in empty", ["seal", "--to", "{REC}", "--body", "x", "--expires-in", ""], .usage("'' is invalid for '--expires-in")),
        Case("--title starting with a dash", ["seal", "--to", "{REC}", "--title", "-30% today"], .sealed(title: "-30% today", badge: nil)),
        Case("--title with invalid UTF-8 in argv", [], script: #"t=$(printf 'a\377b'); exec "$0" seal --to "$1" --title "$t""#,
             .sealed(title: "a\u{FFFD}b", badge: nil)),
        Case("--time-limit 0 (no unit)", push(["--time-limit", "0"]), file: payload(), .usage("'0' is invalid for '--time-limit")),
        // `--time-limit 0s` is in `timeoutLabelMatchesWhatIsShown` (a known simulator race); here the extension
        // stalls well past a short limit, so the expiry callback decides.
        Case("--extension-delay 600ms beyond --time-limit 100ms", push(["--time-limit", "100ms", "--extension-delay", "600ms", "--expiry-grace", "300ms"]),
             file: { f in try f.sealed() }, .delivered(outcome: "timeout", reason: "timeExpired", status: 0)),
        Case("--extension-delay 36500d beyond --time-limit", push(["--time-limit", "10ms", "--extension-delay", "36500d", "--expiry-grace", "10ms"]),
             file: { f in try f.sealed() }, .delivered(outcome: "timeout", reason: "timeExpired", status: 0)),
        Case("--clock garbage", push(["--clock", "yesterday-ish"]), file: payload(), .usage("'yesterday-ish' is invalid for '--clock")),
        Case("--clock past Int64", push(["--clock", "99999999999999999999999"]), file: payload(), .usage("'99999999999999999999999' is invalid for '--clock")),
        Case("--clock -5", push(["--clock", "-5"]), file: payload(), .usage("'-5' is invalid for '--clock")),
        Case("--clock one second past year 9999", push(["--clock", "253402300800"]), file: payload(), .usage("'253402300800' is invalid for '--clock")),
        Case("--clock in year 99999 with an expiring message", push(["--clock", "99999-12-31T23:59:59Z"]),
             file: { f in try f.sealed(["--expires-in", "1m"]) },
             fiveDigitYears ? .delivered(outcome: "fallback", reason: "expired", status: 0) : .usage("'99999-12-31T23:59:59Z' is invalid for '--clock")),
        Case("--clock at the end of year 9999 with an expiring message", push(["--clock", "9999-12-31T23:59:59Z"]),
             file: { f in try f.sealed(["--expires-in", "1m"]) }, .delivered(outcome: "fallback", reason: "expired", status: 0)),
        Case("--keychain empty", ["keys", "list", "--keychain", ""], .usage("--keychain needs a directory")),
        Case("--keychain empty for device push", push().map { $0 == "{KC}" ? "" : $0 }, file: payload(), .usage("--keychain needs a directory")),
        Case("--keychain is a regular file", ["keys", "list", "--keychain", "{FILE}"], .failure("is not a directory")),
        Case("--keychain is a missing directory", ["device", "status", "--keychain", "{MISSING}"], .failure("no key store at")),
        Case("keys retire with a malformed id", ["keys", "retire", "not-a-key-id", "--keychain", "{KC}"], .usage("'not-a-key-id' is invalid for '<key-id>'")),
        Case("keys retire with 15 hex digits", ["keys", "retire", "0123456789abcde", "--keychain", "{KC}"], .usage("'0123456789abcde' is invalid for '<key-id>'")),
        Case("keys retire with an unknown id", ["keys", "retire", "0000000000000000", "--keychain", "{KC}"], .failure("0000000000000000")),
        Case("--grace -1s", ["keys", "rotate", "--keychain", "{KC}", "--grace", "-1s"], .usage("'-1s' is invalid for '--grace")),
        Case("--sign-with empty", ["seal", "--to", "{REC}", "--body", "x", "--sign-with", ""], .usage("--sign-with needs a sender store directory")),
        Case("--sign-with a missing store", ["seal", "--to", "{REC}", "--body", "x", "--sign-with", "{MISSING}"], .failure("sealedpush sender generate")),
        Case("--sign-with a regular file", ["seal", "--to", "{REC}", "--body", "x", "--sign-with", "{FILE}"], .failure("is a file")),
        Case("--sign-with a device store", ["seal", "--to", "{REC}", "--body", "x", "--sign-with", "{KC}"], .failure("no active signing key")),

        // Batches.
        Case("batch with a 10 MB single line", ["seal", "--batch", "{IN}"], file: { f in
            Array((batchLine(f, #""body":"one""#) + "\n").utf8) + [UInt8](repeating: UInt8(ascii: "a"), count: tenMB)
                + Array(("\n" + batchLine(f, #""body":"three""#) + "\n").utf8)
        }, .batch(status: 1, lines: [nil, "the line is over 1048576 bytes", nil])),
        Case("batch with a line of invalid UTF-8", ["seal", "--batch", "{IN}"], file: { f in
            let record = String(decoding: f.compactRecord, as: UTF8.self)
            return Array((batchLine(f, #""body":"one""#) + "\n{\"to\":" + record + ",\"body\":\"").utf8) + [0xFF, 0xFE]
                + Array(("\"}\n" + batchLine(f, #""body":"three""#)).utf8)
        }, .batch(status: 1, lines: [nil, "invalid UTF-8", nil])),
        Case("batch with an escaped NUL, raw NUL, duplicate key and deep nesting", ["seal", "--batch", "{IN}"], file: { f in
            Array([batchLine(f, #""title":"a\u0000b""#), "\u{0}", batchLine(f, #""body":"x","body":"y""#),
                   String(repeating: "[", count: 100_000)].joined(separator: "\n").utf8)
        }, .batch(status: 1, lines: [nil, "unexpected character", "duplicate object key", "nesting deeper than 64"])),
        Case("10 MB stdin to seal --batch -", ["seal", "--batch", "-"], stdin: bytes([UInt8](repeating: UInt8(ascii: "a"), count: tenMB)),
             .batch(status: 1, lines: ["the line is over 1048576 bytes"])),
        Case("directory as batch file", ["seal", "--batch", "{DIR}"], .failure("is a directory")),
        Case("empty batch file", ["seal", "--batch", "{IN}"], file: text(""), .batch(status: 0, lines: [])),
    ]

    @Test(arguments: cases) func hostileInput(_ c: Case) throws {
        let f = try Self.fixture()
        let scratch = try makeScratchDirectory("hostile-case")
        defer { try? FileManager.default.removeItem(at: scratch) }
        let input = scratch.appendingPathComponent("input")
        if let make = c.file { try Data(try make(f)).write(to: input) }
        let substitutions = ["{KC}": f.device, "{REC}": f.record, "{SRV}": f.sender, "{SREC}": f.senderRecord, "{IN}": input.path,
                             "{DIR}": scratch.path, "{MISSING}": scratch.appendingPathComponent("missing").path, "{FILE}": f.plainFile]
        let arguments = c.arguments.map { substitutions[$0] ?? $0 }
        let stdin = try c.stdin.map { try $0(f) }
        let started = Date()
        let r: ChildProcess.Result
        if let script = c.script {
            r = try ChildProcess.run(URL(fileURLWithPath: "/bin/sh"), ["-c", script, ProjectPaths.sealedpushBinary.path, f.record], timeout: 30)
        } else {
            r = try ChildProcess.sealedpush(arguments, stdin: stdin, timeout: 30)
        }
        let elapsed = Date().timeIntervalSince(started)

        #expect(r.exitedNormally, "killed by signal \(r.status); stderr: \(r.stderr)")
        #expect(elapsed < 20, "took \(elapsed) s")
        for crash in ["Fatal error", "Stack dump", "💣", "Backtrace", "Segmentation"] {
            #expect(!r.stderr.contains(crash), "crash report on stderr: \(r.stderr)")
        }
        // The secret text never reaches stderr, whatever happened.
        #expect(!r.stderr.contains(Self.secretTitle) && !r.stderr.contains(Self.secretBody), "plaintext in logs: \(r.stderr)")

        switch c.expected {
        case let .usage(phrase):
            #expect(r.status == 64, "status \(r.status); stderr: \(r.stderr)")
            #expect(r.stderr.contains("Error: ") && r.stderr.contains(phrase), "stderr lacks \(phrase): \(r.stderr)")
            #expect(r.stdout.isEmpty, "stdout: \(r.stdoutText)")
        case let .failure(phrase):
            #expect(r.status == 1, "status \(r.status); stderr: \(r.stderr)")
            #expect(r.stderr.hasPrefix("Error: ") && r.stderr.contains(phrase), "stderr lacks \(phrase): \(r.stderr)")
            #expect(!r.stderr.contains("Usage:"), "a runtime error printed usage: \(r.stderr)")
            #expect(r.stdout.isEmpty, "stdout: \(r.stdoutText)")
        case let .delivered(outcome, reason, status):
            #expect(r.status == status, "status \(r.status); stderr: \(r.stderr)")
            #expect(r.stdoutLines.count == 1, "stdout: \(r.stdoutText)")
            let o = try #require(try JSON.parse(r.stdout).objectValue, "stdout is not one JSON object: \(r.stdoutText)")
            #expect(o["outcome"]?.stringValue == outcome, "\(r.stdoutText)")
            #expect(o["reason"] == (reason.map { JSONValue.string($0) } ?? .null), "\(r.stdoutText)")
            if outcome == "rejected" { #expect(o["notification"] == .null) }
            if outcome != "decrypted" {
                #expect(!r.stdoutText.contains(Self.secretTitle) && !r.stdoutText.contains(Self.secretBody), "plaintext without decryption: \(r.stdoutText)")
            }
        case let .sealed(title, badge):
            #expect(r.status == 0, "status \(r.status); stderr: \(r.stderr)")
            #expect(r.stderr.isEmpty, "stderr: \(r.stderr)")
            let payload = try #require(try JSON.parse(r.stdout).objectValue, "stdout is not a payload: \(r.stdoutText)")
            #expect(payload["ENCRYPTED_DATA"]?.stringValue != nil)
            if let title { #expect(!r.stdoutText.contains(title), "the title is visible in the payload") }
            let pushed = try ChildProcess.sealedpush(["device", "push", "--keychain", f.device, "--json", "-"], stdin: r.stdout, timeout: 30)
            let o = try #require(try JSON.parse(pushed.stdout).objectValue, "device push printed: \(pushed.stdoutText) \(pushed.stderr)")
            #expect(o["outcome"]?.stringValue == "decrypted", "\(pushed.stdoutText)")
            let shown = o["notification"]?.objectValue
            if let title { #expect(shown?["title"]?.stringValue == title) }
            #expect(shown?["badge"] == (badge.map { JSONValue.int($0) } ?? .null))
        case let .batch(status, lines):
            #expect(r.status == status, "status \(r.status); stderr: \(r.stderr)")
            let out = r.stdoutLines
            #expect(out.count == lines.count, "stdout: \(r.stdoutText.prefix(2000))")
            for (index, (line, expected)) in zip(out, lines).enumerated() {
                let o = try #require(try JSON.parse(Array(line.utf8)).objectValue, "line \(index + 1) is not JSON: \(line.prefix(200))")
                if let phrase = expected {
                    #expect(o["line"]?.intValue == Int64(index + 1), "\(line)")
                    #expect(o["error"]?.stringValue?.contains(phrase) == true, "line \(index + 1): \(line.prefix(300)) lacks \(phrase)")
                    #expect(o["payload"] == nil)
                } else {
                    #expect(o["payload"]?.objectValue?["ENCRYPTED_DATA"]?.stringValue != nil, "line \(index + 1): \(line.prefix(300))")
                }
            }
            if status != 0 { #expect(r.stderr.contains("batch lines failed"), "stderr: \(r.stderr)") }
        }
    }

    /// A push whose extension finishes right at the time limit: whatever is shown must match the label.
    /// A `timeout` result shows the placeholder (subtitle `(Encrypted)`), never the decrypted text; a
    /// decrypted text is labelled `decrypted`.
    ///
    /// Regression: `DeviceSimulator` used to label whatever arrived during the expiry grace `timeout`,
    /// even the extension's own decrypted content that came just after the limit (about 1 run in 12
    /// at `--time-limit 0s`…`20ms`), and the expiry callback could run before `didReceive` had stored
    /// its handler (1 run in 6 with `--extension-delay 300ms`).
    @Test func timeoutLabelMatchesWhatIsShown() throws {
        let f = try Self.fixture()
        for _ in 0..<3 {
            for limit in [["0s"], ["0s", "--extension-delay", "300ms"], ["2ms"], ["4ms"], ["6ms"], ["10ms"]] {
                let r = try ChildProcess.sealedpush(["device", "push", "--keychain", f.device, "--json", "--time-limit"] + limit + ["-"],
                                          stdin: try f.sealed(), timeout: 30)
                let o = try #require(try JSON.parse(r.stdout).objectValue, "\(r.stdoutText) \(r.stderr)")
                let shown = o["notification"]?.objectValue
                switch o["outcome"]?.stringValue {
                case "decrypted":
                    #expect(shown?["title"]?.stringValue == Self.secretTitle)
                    #expect(limit.count == 1, "a 300 ms stall cannot decrypt within 0 s: \(r.stdoutText)")
                case "timeout":
                    #expect(shown?["subtitle"]?.stringValue == "(Encrypted)", "--time-limit \(limit): \(r.stdoutText)")
                    #expect(!r.stdoutText.contains(Self.secretBody), "--time-limit \(limit): timeout shows the plaintext: \(r.stdoutText)")
                case "original":
                    // The expiry callback delivered nothing in its grace: the payload's own alert.
                    #expect(o["reason"] == .string("timeExpired") && !r.stdoutText.contains(Self.secretBody), "\(r.stdoutText)")
                default:
                    Issue.record("--time-limit \(limit): unexpected \(r.stdoutText)")
                }
            }
        }
    }

    /// The catalog is as large as issue 7 asks, and every case has a distinct name.
    @Test func catalogSize() {
        #expect(Self.cases.count >= 40)
        #expect(Set(Self.cases.map(\.name)).count == Self.cases.count)
    }
}
