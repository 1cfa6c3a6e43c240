import Foundation
import SealedPushCrypto
import SealedPushFCM
import SealedPushTestSupport
import SealedPushWire
import Testing

/// The lines of `text` parsed as JSON objects.
private func jsonLines(_ text: String) throws -> [JSONObject] {
    try text.split(separator: "\n").map { line in
        try #require(try JSON.parse(Array(line.utf8)).objectValue, "not a JSON object: \(line)")
    }
}

@Suite("sealedpush-server fcm and sealedpush device push --platform fcm, as built binaries", .serialized, .timeLimit(.minutes(10)))
struct FCMServeCLITests {
    let directory: URL
    let device: FCMTestDevice
    let token = "dGhlLWFuZHJvaWQtcGhvbmU:APA91bHun4MxP5egoKMwt2KZFBaFUH-1RYqx"
    let goneToken = "dW5pbnN0YWxsZWQ:APA91bGone_0123456789"

    init() throws {
        directory = try fcmScratchDirectory()
        device = try FCMTestDevice(in: directory)
        let made = try ChildProcess.sealedpushServer(["fcm", "generate-service-account", "--project", "demo-project", "--out", "sa.json"],
                                                     in: directory)
        try #require(made.status == 0, "\(made.stderr)")
    }

    var serviceAccountPath: String { directory.appendingPathComponent("sa.json").path }

    func serve(_ extra: [String]) throws -> (ChildProcess, String) {
        let server = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary,
                                      ["fcm", "serve", "--listen", "127.0.0.1:0", "--ca-out", "ca.pem", "--service-account", "sa.json"] + extra,
                                      in: directory, readLines: true)
        let first = try #require(server.nextLine(within: .seconds(60)), "fcm serve printed nothing: \(server.stderrText)")
        #expect(first.hasPrefix("listening on https://127.0.0.1:"), "\(first)")
        let url = try #require(first.split(separator: " ").dropFirst(2).first.map(String.init), "\(first)")
        return (server, url)
    }

    func client(_ url: String) throws -> FCMClient {
        let account = try FCMServiceAccount(file: serviceAccountPath)
        return try FCMClient(configuration: try FCMClientConfiguration(serviceAccount: account, url: url, tokenURL: url + "/token",
                                                                       caCertificateFile: directory.appendingPathComponent("ca.pem").path),
                             serviceAccount: account)
    }

    @Test("generate-service-account writes a 0600 Google-style key file once, prints no key, and refuses bad input")
    func generateServiceAccount() throws {
        let path = serviceAccountPath
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        let account = try FCMServiceAccount(file: path)
        #expect(account.projectID == "demo-project" && account.tokenURI == "https://127.0.0.1:8443/token")
        #expect(account.clientEmail == "sealedpush-dev@demo-project.iam.gserviceaccount.com")
        let again = try ChildProcess.sealedpushServer(["fcm", "generate-service-account", "--project", "demo-project", "--out", "sa.json"],
                                                      in: directory)
        #expect(again.status != 0 && again.stderr.contains("already exists"), "\(again.stderr)")
        let other = try ChildProcess.sealedpushServer(["fcm", "generate-service-account", "--project", "project-two", "--out", "sa2.json",
                                                       "--token-uri", "https://fcm.test:9443/token"], in: directory)
        #expect(other.status == 0, "\(other.stderr)")
        #expect(other.stdoutText.contains("token_uri https://fcm.test:9443/token") && !other.stdoutText.contains("PRIVATE KEY"))
        let plain = try ChildProcess.sealedpushServer(["fcm", "generate-service-account", "--project", "project-three", "--out", "sa3.json",
                                                       "--token-uri", "http://127.0.0.1/token"], in: directory)
        #expect(plain.status != 0 && plain.stderr.contains("https"), "\(plain.stderr)")
        let badProject = try ChildProcess.sealedpushServer(["fcm", "generate-service-account", "--project", "no spaces", "--out", "sa4.json"],
                                                           in: directory)
        #expect(badProject.status != 0 && badProject.stderr.contains("--project"), "\(badProject.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("sa4.json").path))
        let help = try ChildProcess.sealedpushServer(["fcm", "serve", "--help"])
        #expect(help.stdoutText.contains("Example:") && help.stdoutText.contains("--service-account"))
    }

    @Test("fcm serve: the FCM client's message reaches the simulated Android device (decrypted); unknown and --unregistered tokens are 404")
    func serveDeliversToTheSimulatedDevice() async throws {
        let (server, url) = try serve(["--device", "\(token)=\(device.keychain)", "--unregistered", goneToken])
        defer { server.terminate() }
        let client = try client(url)
        let sent = await client.send(try device.messageBody(token: token, body: "The vault code is 0451."))
        let gone = await client.send(try device.messageBody(token: goneToken))
        let unknown = await client.send(try device.messageBody(token: "c29tZW9uZS1lbHNl:APA91bUnknown"))
        await client.shutdown()
        guard case let .accepted(name?) = sent.outcome else {
            Issue.record("not accepted: \(sent) \(server.stderrText)")
            return
        }
        #expect(gone.outcome == .unregistered(reason: "UNREGISTERED") && gone.status == 404)
        #expect(unknown.outcome == .unregistered(reason: "UNREGISTERED") && unknown.status == 404)
        let line = try #require(try server.nextLine(within: .seconds(60)).map { try jsonLines($0)[0] }, "the device reported nothing")
        #expect(line["outcome"] == .string("decrypted"), "\(line)")
        #expect(line["reason"] == .null && line["name"] == .string(name))
        #expect(line["fcm_token_suffix"] == .string(String(token.suffix(8))))
        let finished = server.terminate()
        #expect(finished.status == 0 && finished.exitedNormally, "SIGTERM ends it gracefully: \(server.stderrText)")
        let log = server.stderrText
        #expect(log.contains("…\(token.suffix(8))"), "the log names the token by its last 8 characters")
        #expect(!log.contains(token) && !log.contains(goneToken) && !log.contains("0451") && !log.contains("ya29."), "\(log)")
        #expect(!server.lines.joined().contains(token))
    }

    @Test("fcm serve --fail-rate 1 --retry-after 3: 503 UNAVAILABLE, retried after 3 s")
    func serveFailRate() async throws {
        let (server, url) = try serve(["--device", "\(token)=\(device.keychain)", "--fail-rate", "1", "--retry-after", "3"])
        defer { server.terminate() }
        let client = try client(url)
        let result = await client.send(try device.messageBody(token: token))
        await client.shutdown()
        #expect(result.status == 503 && result.outcome == .retry(reason: "UNAVAILABLE", retryAfter: .seconds(3)), "\(result)")
    }

    @Test("fcm serve refuses bad flags and a service account others can read, in the flags' terms")
    func serveRefusesBadInput() throws {
        let open = directory.appendingPathComponent("open.json")
        try FileManager.default.copyItem(atPath: serviceAccountPath, toPath: open.path)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: open.path)
        let readable = try ChildProcess.sealedpushServer(["fcm", "serve", "--listen", "127.0.0.1:0", "--service-account", "open.json"],
                                                         in: directory, timeout: 60)
        #expect(readable.status != 0 && readable.stderr.contains("--service-account") && readable.stderr.contains("chmod 600"), "\(readable.stderr)")
        let cases: [([String], String)] = [
            (["--fail-rate", "2"], "--fail-rate"),
            (["--listen", "0.0.0.0:8443"], "--allow-remote"),
            (["--device", "bad token=dir"], "--device"),
            (["--unregistered", "no spaces"], "--unregistered"),
            (["--token-lifetime", "0s"], "--token-lifetime"),
        ]
        for (flags, named) in cases {
            let r = try ChildProcess.sealedpushServer(["fcm", "serve", "--service-account", "sa.json"] + flags, in: directory, timeout: 60)
            #expect(r.status != 0 && r.stderr.contains(named), "\(flags): \(r.stderr)")
        }
    }

    @Test("Python signs the RS256 assertion with the service account's key, gets a token from fcm serve and sends a message (urllib, trusting the CA)")
    func pythonClientIsAccepted() throws {
        let (server, url) = try serve(["--device", "\(token)=\(device.keychain)"])
        defer { server.terminate() }
        let body = try device.messageBody(token: token, body: "Sent from Python.")
        let message = try #require(try JSON.parse(body).objectValue)
        let input = JSON.serialize(.object([
            "sa": .string(serviceAccountPath), "url": .string(url), "ca": .string(directory.appendingPathComponent("ca.pem").path),
            "body": .object(message),
        ]))
        let script = """
        import base64, json, ssl, sys, time, urllib.error, urllib.parse, urllib.request
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import padding
        cfg = json.load(sys.stdin)
        sa = json.load(open(cfg["sa"]))
        key = serialization.load_pem_private_key(sa["private_key"].encode(), password=None)
        b64 = lambda b: base64.urlsafe_b64encode(b).rstrip(b"=").decode()
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": sa["private_key_id"]}
        claims = {"iss": sa["client_email"], "scope": "https://www.googleapis.com/auth/firebase.messaging",
                  "aud": sa["token_uri"], "iat": now, "exp": now + 3600}
        signing_input = b64(json.dumps(header).encode()) + "." + b64(json.dumps(claims).encode())
        jwt = signing_input + "." + b64(key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256()))
        ctx = ssl.create_default_context(cafile=cfg["ca"])
        form = urllib.parse.urlencode({"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": jwt}).encode()
        request = urllib.request.Request(cfg["url"] + "/token", data=form, headers={"Content-Type": "application/x-www-form-urlencoded"})
        token = json.load(urllib.request.urlopen(request, context=ctx, timeout=30))
        assert token["token_type"] == "Bearer" and token["expires_in"] == 3600, token
        send = cfg["url"] + "/v1/projects/" + sa["project_id"] + "/messages:send"
        request = urllib.request.Request(send, data=json.dumps(cfg["body"]).encode(),
                                         headers={"Authorization": "Bearer " + token["access_token"], "Content-Type": "application/json"})
        response = urllib.request.urlopen(request, context=ctx, timeout=30)
        accepted = json.load(response)
        try:
            urllib.request.urlopen(urllib.request.Request(send, data=json.dumps(cfg["body"]).encode(),
                                                          headers={"Content-Type": "application/json"}), context=ctx, timeout=30)
            unauthenticated = None
        except urllib.error.HTTPError as e:
            unauthenticated = [e.code, json.load(e)["error"]["status"]]
        print(json.dumps({"status": response.status, "name": accepted["name"], "unauthenticated": unauthenticated}))
        """
        let run = try FCMFixtures.runPython(script, input: input)
        #expect(run.status == 0, "python: \(run.stderr)")
        let result = try #require(try JSON.parse(run.stdout).objectValue, "\(run.stdoutText)")
        #expect(result["status"] == .int(200))
        #expect(result["name"]?.stringValue?.hasPrefix("projects/demo-project/messages/") == true)
        #expect(result["unauthenticated"] == .array([.int(401), .string("UNAUTHENTICATED")]))
        let line = try #require(try server.nextLine(within: .seconds(60)).map { try jsonLines($0)[0] }, "the device reported nothing")
        #expect(line["outcome"] == .string("decrypted") && line["name"] == result["name"], "\(line)")
    }

    @Test("device push --platform fcm: an FCM message file opens on the Android device; replays, budget, shape and extension flags as specified")
    func devicePushPlatformFCM() throws {
        func push(_ body: [UInt8], _ extra: [String] = []) throws -> (ChildProcess.Result, JSONObject?) {
            let r = try ChildProcess.sealedpush(["device", "push", "--platform", "fcm", "--keychain", device.keychain, "--json"] + extra + ["-"],
                                                stdin: body)
            return (r, (try? JSON.parse(r.stdout))?.objectValue)
        }
        let body = try device.messageBody(token: token, title: "Agent K", body: "The eagle lands at noon.", collapseID: "ops-7")
        try Data(body).write(to: directory.appendingPathComponent("message.json"))
        let fromFile = try ChildProcess.sealedpush(["device", "push", "--platform", "fcm", "--keychain", device.keychain, "--json", "message.json"],
                                                   in: directory)
        #expect(fromFile.status == 0, "\(fromFile.stderr)")
        let opened = try #require(try JSON.parse(fromFile.stdout).objectValue)
        #expect(opened["outcome"] == .string("decrypted") && opened["reason"] == .null)
        #expect(opened["request_id"] == .string("ops-7"), "the collapse key is the request identifier")
        let shown = try #require(opened["notification"]?.objectValue)
        #expect(shown["title"] == .string("Agent K") && shown["body"] == .string("The eagle lands at noon."))
        #expect(shown["userInfo"]?.objectValue?["aps"] == nil)
        // The same message under the same collapse key opens again; under another request id it is a replay.
        #expect(try push(body).1?["outcome"] == .string("decrypted"))
        let replay = try push(body, ["--request-id", "other"])
        #expect(replay.0.status == 0 && replay.1?["outcome"] == .string("fallback") && replay.1?["reason"] == .string("replayed"))
        #expect(replay.1?["notification"]?.objectValue?["body"] == .string("(Encrypted)"))
        // Person-readable without --json.
        let text = try ChildProcess.sealedpush(["device", "push", "--platform", "fcm", "--keychain", device.keychain, "-"],
                                               stdin: try device.messageBody(token: token, body: "Readable."))
        #expect(text.status == 0 && text.stdoutText.contains("Readable.") && text.stdoutText.contains("decrypted"), "\(text.stdoutText)")

        // Data within FCM's 4096 bytes but an APNs-shaped wrapping over 4096: still opens (the budget is FCM's).
        var padded = try #require(try JSON.parse(try device.messageBody(token: token, body: "Padded.")).objectValue)
        var message = try #require(padded["message"]?.objectValue)
        var data = try #require(message["data"]?.objectValue)
        let used = data.reduce(0) { $0 + $1.key.utf8.count + ($1.value.stringValue?.utf8.count ?? 0) }
        data["pad"] = .string(String(repeating: "p", count: 4096 - used - 3))
        message["data"] = .object(data)
        padded["message"] = .object(message)
        let full = try push(JSON.serialize(.object(padded)))
        #expect(full.0.status == 0 && full.1?["outcome"] == .string("decrypted"), "\(full.0.stdoutText) \(full.0.stderr)")
        // One byte more: rejected, payloadTooLarge, exit 1.
        data["pad"] = .string(String(repeating: "p", count: 4096 - used - 2))
        message["data"] = .object(data)
        padded["message"] = .object(message)
        let over = try push(JSON.serialize(.object(padded)))
        #expect(over.0.status == 1 && over.1?["outcome"] == .string("rejected") && over.1?["reason"] == .string("payloadTooLarge"))
        #expect(over.0.stderr.contains("4096"))

        // Shapes the device refuses: not a message, a notification block, a non-string value.
        for bad in [#"{"aps": {"alert": "an APNs payload"}}"#,
                    #"{"message": {"token": "t", "notification": {"title": "x"}, "data": {"a": "b"}}}"#,
                    #"{"message": {"token": "t", "data": {"sealedpush": 1}}}"#, "not json"] {
            let r = try push(Array(bad.utf8))
            #expect(r.0.status == 1 && r.1?["outcome"] == .string("rejected") && r.1?["reason"] == .string("invalidPayload"), "\(bad)")
            #expect(r.0.stderr.contains("--platform fcm"), "\(r.0.stderr)")
        }
        // No ENCRYPTED_DATA: the placeholder, notEncrypted.
        let plain = try push(Array(#"{"message": {"token": "t", "data": {"hello": "world"}}}"#.utf8))
        #expect(plain.0.status == 0 && plain.1?["outcome"] == .string("original") && plain.1?["reason"] == .string("notEncrypted"))
        // The iOS extension's flags do not apply.
        let flag = try ChildProcess.sealedpush(["device", "push", "--platform", "fcm", "--keychain", device.keychain, "--extension-crash", "-"],
                                               stdin: body)
        #expect(flag.status != 0 && flag.stderr.contains("--extension-crash"), "\(flag.stderr)")
        let platform = try ChildProcess.sealedpush(["device", "push", "--platform", "android", "--keychain", device.keychain, "-"], stdin: body)
        #expect(platform.status != 0 && platform.stderr.contains("--platform"))
    }
}
