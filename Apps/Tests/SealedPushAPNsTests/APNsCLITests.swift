import Crypto
import Foundation
import SealedPushAPNsCore
import SealedPushAPNs
import SealedPushTestSupport
import SealedPushWire
import Testing

/// The lines of `text` parsed as JSON objects.
func jsonLines(_ text: String) throws -> [JSONObject] {
    try text.split(separator: "\n").map { line in
        try #require(try JSON.parse(Array(line.utf8)).objectValue, "not a JSON object: \(line)")
    }
}

@Suite("sealedpush send and apns serve, end to end", .serialized, .timeLimit(.minutes(10)))
struct APNsCLITests {
    let directory: URL
    let phoneToken = String(repeating: "ab", count: 32)
    let goneToken = String(repeating: "cd", count: 32)
    let auth = ["--auth-key", "AuthKey_ABC123DEFG.p8", "--team-id", "TEAM123456", "--topic", "com.example.app"]

    init() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("apns-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let key = try ChildProcess.sealedpushServer(["apns", "generate-key", "--key-id", "ABC123DEFG"], in: directory)
        try #require(key.status == 0, "\(key.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("AuthKey_ABC123DEFG.p8").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        try #require(try ChildProcess.sealedpush(["keys", "generate", "--keychain", "phone"], in: directory).status == 0)
        let export = try ChildProcess.sealedpush(["keys", "export", "--keychain", "phone"], in: directory)
        try export.stdoutText.write(to: directory.appendingPathComponent("device.json"), atomically: true, encoding: .utf8)
    }

    func serve(_ extra: [String]) throws -> (ChildProcess, String) {
        let server = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                      ["apns", "serve", "--listen", "127.0.0.1:0", "--ca-out", "ca.pem", "--public-key", "AuthKey_ABC123DEFG.pub.pem",
                                       "--team-id", "TEAM123456", "--topic", "com.example.app"] + extra, in: directory,
                                      readLines: true)
        let first = try #require(server.nextLine(within: .seconds(60)), "apns serve printed nothing: \(server.stderrText)")
        let url = try #require(first.split(separator: " ").dropFirst(2).first.map(String.init), "\(first)")
        #expect(first.hasPrefix("listening on https://127.0.0.1:"))
        return (server, url)
    }

    @Test func sendDeliversToTheSimulatedPhoneAndReportsUnregisteredTokens() throws {
        let (server, url) = try serve(["--device", "\(phoneToken)=phone", "--unregistered", goneToken])
        defer { server.terminate() }
        let sent = try ChildProcess.sealedpush(["send", "--to", "device.json", "--device-token", phoneToken, "--title", "Agent K",
                                   "--body", "The eagle lands at noon.", "--environment", url, "--ca-cert", "ca.pem"] + auth, in: directory)
        #expect(sent.status == 0, "\(sent.stderr)")
        let result = try #require(try jsonLines(sent.stdoutText).first)
        #expect(result["status"] == .int(200))
        #expect(result["unregistered"] == .bool(false))
        let apnsID = try #require(result["apns_id"]?.stringValue)
        let outcome = try #require(try server.nextLine(within: .seconds(60)).map { try jsonLines($0)[0] }, "the phone reported nothing")
        #expect(outcome["device"] == .string(phoneToken))
        #expect(outcome["apns_id"] == .string(apnsID))
        #expect(outcome["outcome"] == .string("decrypted"))

        let gone = try ChildProcess.sealedpush(["send", "--to", "device.json", "--device-token", goneToken, "--body", "x",
                                   "--environment", url, "--ca-cert", "ca.pem"] + auth, in: directory)
        #expect(gone.status == 1)
        let refusal = try #require(try jsonLines(gone.stdoutText).first)
        #expect(refusal["status"] == .int(410))
        #expect(refusal["reason"] == .string("Unregistered"))
        #expect(refusal["unregistered"] == .bool(true))
        #expect(refusal["timestamp"]?.intValue ?? 0 > 1_700_000_000_000, "milliseconds")
        #expect(gone.stderr.contains("stop sending to 1 device token"))
        let log = server.stderrText
        #expect(!log.contains("eagle") && !log.contains(phoneToken), "the log holds no payload and no whole token")
    }

    @Test("send --reveal: the phone holds the message with its placeholder; its notification store never holds the text; a record without a reveal key is refused")
    func sendRevealIsHeld() throws {
        let (server, url) = try serve(["--device", "\(phoneToken)=phone"])
        defer { server.terminate() }
        let sent = try ChildProcess.sealedpush(["send", "--to", "device.json", "--device-token", phoneToken, "--title", "Agent K",
                                                "--body", "The vault code is 0451.", "--reveal", "--environment", url, "--ca-cert", "ca.pem"] + auth,
                                               in: directory)
        #expect(sent.status == 0, "\(sent.stderr)")
        let outcome = try #require(try server.nextLine(within: .seconds(60)).map { try jsonLines($0)[0] }, "the phone reported nothing")
        #expect(outcome["outcome"] == .string("held"), "\(outcome)")
        let stored = try ChildProcess.sealedpush(["device", "notifications", "--keychain", "phone", "--json"], in: directory)
        #expect(stored.status == 0 && stored.stdoutText.contains("Press and hold to read"), "\(stored.stdoutText)\(stored.stderr)")
        #expect(!stored.stdoutText.contains("0451") && !server.stderrText.contains("0451"))

        try #require(try ChildProcess.sealedpush(["keys", "generate", "--no-reveal", "--keychain", "plain"], in: directory).status == 0)
        let plain = try ChildProcess.sealedpush(["keys", "export", "--keychain", "plain"], in: directory)
        try plain.stdoutText.write(to: directory.appendingPathComponent("plain.json"), atomically: true, encoding: .utf8)
        let refused = try ChildProcess.sealedpush(["send", "--to", "plain.json", "--device-token", phoneToken, "--body", "x", "--reveal",
                                                   "--environment", url, "--ca-cert", "ca.pem"] + auth, in: directory)
        #expect(refused.status != 0 && refused.stderr.contains("keys add-reveal"), "\(refused.stdoutText)\(refused.stderr)")
    }

    /// A GOAWAY every 40 requests with 50 in flight resets about 10 streams per connection: each is sent again
    /// on the next connection. With 8 retries every push is accepted (4 tries lost about 1 % here).
    @Test func batchThroughGoawaysEndsEveryPushWithADefiniteResult() throws {
        let (server, url) = try serve(["--accept-unknown", "--goaway-after", "40", "--unregistered", goneToken])
        defer { server.terminate() }
        let record = try String(contentsOf: directory.appendingPathComponent("device.json"), encoding: .utf8)
        var lines: [String] = []
        for n in 0..<300 {
            let token = n == 123 ? goneToken : String(format: "%064x", n)
            lines.append(#"{"to":\#(record.trimmingCharacters(in: .whitespacesAndNewlines)),"body":"m\#(n)","device_token":"\#(token)"}"#)
        }
        lines.insert(#"{"body":"no device"}"#, at: 10)
        try (lines.joined(separator: "\n") + "\n").write(to: directory.appendingPathComponent("batch.jsonl"), atomically: true, encoding: .utf8)
        let sent = try ChildProcess.sealedpush(["send", "--batch", "batch.jsonl", "--environment", url, "--ca-cert", "ca.pem", "--concurrency", "50",
                                   "--retries", "8"] + auth,
                                  in: directory)
        #expect(sent.status == 1, "one line is unregistered, one has no device token")
        let results = try jsonLines(sent.stdoutText)
        #expect(results.count == 301)
        #expect(Set(results.compactMap { $0["line"]?.intValue }) == Set(1...301))
        let ok = results.filter { $0["status"] == .int(200) }
        #expect(ok.count == 299)
        #expect(results.first { $0["line"] == .int(11) }?["error"]?.stringValue?.contains("device_token") == true)
        #expect(results.first { $0["reason"] == .string("Unregistered") }?["unregistered"] == .bool(true))
        #expect(sent.stderr.contains("sent 299 of 301 pushes"))
    }

    @Test func untrustedLocalAPNsIsRefusedNamingCACert() throws {
        let (server, url) = try serve(["--accept-unknown"])
        defer { server.terminate() }
        let sent = try ChildProcess.sealedpush(["send", "--to", "device.json", "--device-token", phoneToken, "--body", "x", "--environment", url,
                                   "--retries", "0"] + auth, in: directory)
        #expect(sent.status == 1)
        #expect(sent.stderr.contains("--ca-cert"))
    }

    @Test func authKeyReadableByOthersIsRefused() throws {
        try FileManager.default.setAttributes([.posixPermissions: 0o644],
                                              ofItemAtPath: directory.appendingPathComponent("AuthKey_ABC123DEFG.p8").path)
        let sent = try ChildProcess.sealedpush(["send", "--to", "device.json", "--device-token", phoneToken, "--body", "x",
                                   "--environment", "https://127.0.0.1:9"] + auth, in: directory)
        #expect(sent.status != 0)
        #expect(sent.stderr.contains("chmod 600 AuthKey_ABC123DEFG.p8"))
        let badToken = try ChildProcess.sealedpush(["send", "--to", "device.json", "--device-token", "abc", "--body", "x"] + auth, in: directory)
        #expect(badToken.status != 0)
        #expect(badToken.stderr.contains("--device-token must be 64 hexadecimal digits"))
    }

    /// `apns serve` is a development server: loopback unless --allow-remote, and only the key's public half.
    @Test func serveListensOnLoopbackAndHoldsOnlyThePublicKey() throws {
        let common = ["apns", "serve", "--team-id", "TEAM123456", "--topic", "com.example.app", "--ca-out", "ca.pem"]
        let remote = try ChildProcess.sealedpushServer(common + ["--public-key", "AuthKey_ABC123DEFG.pub.pem", "--listen", "0.0.0.0:0"],
                                                      in: directory)
        #expect(remote.status != 0)
        #expect(remote.stderr.contains("pass --allow-remote"), "\(remote.stderr)")
        let privateKey = try ChildProcess.sealedpushServer(common + ["--auth-key", "AuthKey_ABC123DEFG.p8", "--listen", "127.0.0.1:0"],
                                                          in: directory)
        #expect(privateKey.status != 0)
        #expect(privateKey.stderr.contains("--public-key AuthKey_KEYID.pub.pem"), "\(privateKey.stderr)")
        let swapped = try ChildProcess.sealedpushServer(common + ["--public-key", "AuthKey_ABC123DEFG.p8", "--key-id", "ABC123DEFG",
                                                                  "--listen", "127.0.0.1:0"], in: directory)
        #expect(swapped.status != 0)
        #expect(swapped.stderr.contains("holds a private key; pass its public half"), "\(swapped.stderr)")
        let attributes = try FileManager.default.attributesOfItem(atPath: directory.appendingPathComponent("AuthKey_ABC123DEFG.pub.pem").path)
        #expect((attributes[.posixPermissions] as? Int) == 0o644)
    }

    /// Header values and trust are checked before any request: a topic with CR/LF, an extra CA for Apple's
    /// servers, and a batch line naming a topic the run did not allow.
    @Test func topicsAndTrustAreCheckedBeforeAnyRequest() throws {
        let base = ["send", "--to", "device.json", "--device-token", phoneToken, "--body", "x", "--auth-key", "AuthKey_ABC123DEFG.p8",
                    "--team-id", "TEAM123456"]
        let crlf = try ChildProcess.sealedpush(base + ["--topic", "com.example.app\r\napns-priority: 5", "--environment", "https://127.0.0.1:9"],
                                               in: directory)
        #expect(crlf.status != 0)
        #expect(crlf.stderr.contains("--topic must be the app's bundle id"), "\(crlf.stderr)")
        #expect(!crlf.stderr.contains("could not reach"), "no request was made: \(crlf.stderr)")
        for environment in ["production", "sandbox"] {
            let pinned = try ChildProcess.sealedpush(base + ["--topic", "com.example.app", "--environment", environment, "--ca-cert", "ca.pem"],
                                                     in: directory)
            #expect(pinned.status != 0)
            #expect(pinned.stderr.contains("--ca-cert is for a local or private APNs"), "\(pinned.stderr)")
        }

        let (server, url) = try serve(["--accept-unknown"])
        defer { server.terminate() }
        let record = try String(contentsOf: directory.appendingPathComponent("device.json"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let token = String(format: "%064x", 7)
        let lines = [#"{"to":\#(record),"body":"a","device_token":"\#(token)","topic":"com.example.bank"}"#,
                     #"{"to":\#(record),"body":"b","device_token":"\#(token)","topic":"com.example.chat"}"#,
                     #"{"to":\#(record),"body":"c","device_token":"\#(token)"}"#]
        try (lines.joined(separator: "\n") + "\n").write(to: directory.appendingPathComponent("topics.jsonl"), atomically: true, encoding: .utf8)
        let sent = try ChildProcess.sealedpush(["send", "--batch", "topics.jsonl", "--environment", url, "--ca-cert", "ca.pem",
                                                "--allow-topic", "com.example.chat"] + auth, in: directory)
        let results = try jsonLines(sent.stdoutText)
        #expect(sent.status == 1)
        #expect(results.first { $0["line"] == .int(1) }?["error"]?.stringValue?.contains("--allow-topic") == true, "\(sent.stdoutText)")
        #expect(results.first { $0["line"] == .int(1) }?["status"] == .null)
        // The local APNs only knows com.example.app, so the allowed other topic is refused by APNs, not by send.
        #expect(results.first { $0["line"] == .int(2) }?["status"]?.intValue != nil, "\(sent.stdoutText)")
        #expect(results.first { $0["line"] == .int(3) }?["status"] == .int(200))
    }

    /// The local APNs frame by frame, read by python-hyper's h2 (what aioapns is built on): a request with
    /// `host` and no `:authority` is taken; a 200 is one HEADERS frame that ends the stream (no empty DATA
    /// frame, which aioapns would parse as JSON); a refusal is HEADERS then the JSON reason in DATA.
    @Test func localAPNsFramesAsAPNsDoes() async throws {
        let token = String(repeating: "ef", count: 32)
        let apns = try await LocalAPNs.start(devices: [token: LocalAPNs.topic]) { $0.requestTimeout = .milliseconds(500) }
        let ca = directory.appendingPathComponent("frames-ca.pem")
        try apns.server.authority.caPEM.write(to: ca, atomically: true, encoding: .utf8)
        let jwt = try ProviderToken.make(key: apns.key, issuedAt: Int64(Date().timeIntervalSince1970))
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("h2_frames.py")  // beside this file
        let result = try ChildProcess.run(Self.python, [script.path, String(apns.port), ca.path, token, jwt, LocalAPNs.topic],
                                          in: directory, timeout: 60)
        await apns.stop()
        #expect(result.status == 0, "\(result.stderr)")
        let streams = try #require(try JSON.parse(Array(result.stdoutText.utf8)).objectValue, "\(result.stdoutText) \(result.stderr)")
        let accepted = try #require(streams["accepted"]?.objectValue)
        #expect(accepted["status"] == .string("200"))
        #expect(accepted["headers_ended_stream"] == .bool(true), "a 200 is a single HEADERS frame with END_STREAM")
        #expect(accepted["data"] == .string(""))
        let refused = try #require(streams["refused"]?.objectValue)
        #expect(refused["status"] == .string("400"))
        #expect(refused["headers_ended_stream"] == .bool(false))
        #expect(refused["data"] == .string(#"{"reason":"TopicDisallowed"}"#))
        // Every answer names the development server; a request whose body never comes is reset.
        for answer in [accepted, refused] { #expect(answer["server"]?.stringValue?.hasPrefix("sealedpush-local-apns") == true) }
        let stalled = try #require(streams["stalled"]?.objectValue)
        #expect(stalled["reset"] == .bool(true), "\(stalled)")
        #expect(stalled["status"] == .null)
    }

    /// `$SEALEDPUSH_PYTHON`, else the venv `make pydeps` makes.
    static var python: URL {
        ProcessInfo.processInfo.environment["SEALEDPUSH_PYTHON"].map { URL(fileURLWithPath: $0) }
            ?? ProjectPaths.root.appendingPathComponent(".build/pyenv/bin/python")
    }

    /// The JWT, read by an independent implementation: Python's `cryptography` verifies the ES256 signature
    /// over the header and claims, and the header and claims are what Apple specifies.
    @Test func providerTokenVerifiesInPythonCryptography() throws {
        let generated = try APNsSigningKey.generateForDevelopment(keyID: "ABC123DEFG", teamID: "TEAM123456")
        let jwt = try ProviderToken.make(key: generated.key, issuedAt: 1_795_000_000)
        let publicPEM = generated.key.privateKey.publicKey.pemRepresentation
        let script = """
            import base64, json, sys
            from cryptography.hazmat.primitives import hashes, serialization
            from cryptography.hazmat.primitives.asymmetric import ec
            from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
            def b64(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
            token, pem = sys.argv[1], sys.argv[2].encode()
            h, c, s = token.split(".")
            header, claims, sig = json.loads(b64(h)), json.loads(b64(c)), b64(s)
            assert header == {"alg": "ES256", "kid": "ABC123DEFG"}, header
            assert claims == {"iss": "TEAM123456", "iat": 1795000000}, claims
            assert len(sig) == 64
            key = serialization.load_pem_public_key(pem)
            key.verify(encode_dss_signature(int.from_bytes(sig[:32], "big"), int.from_bytes(sig[32:], "big")),
                       (h + "." + c).encode(), ec.ECDSA(hashes.SHA256()))
            print("verified")
            """
        let python = Self.python
        try #require(FileManager.default.isExecutableFile(atPath: python.path),
                     "no Python at \(python.path): run `make test` (or `make pydeps`), or set SEALEDPUSH_PYTHON")
        let result = try ChildProcess.run(python, ["-c", script, jwt, publicPEM], timeout: 60)
        let output = result.stdoutText + result.stderr
        #expect(result.status == 0, "\(output)")
        #expect(output.contains("verified"))
    }
}
