import Crypto
import Foundation
import SealedPushCrypto
import SealedPushFCM
import SealedPushWire
import Testing
import _CryptoExtras

@Suite("Service account")
struct ServiceAccountTests {
    /// The members of a good key file, with `changes` applied (`nil` removes a member).
    func keyFile(_ changes: [String: JSONValue?] = [:], privateKeyPEM: String? = nil) throws -> [UInt8] {
        let account = try Fixtures.account()
        var members: [(String, JSONValue)] = [
            ("type", .string("service_account")),
            ("project_id", .string(account.projectID)),
            ("private_key_id", .string(account.privateKeyID)),
            ("private_key", .string(privateKeyPEM ?? account.privateKey.pkcs8PEMRepresentation)),
            ("client_email", .string(account.clientEmail)),
            ("client_id", .string("1234567890")),
            ("auth_uri", .string("https://accounts.google.com/o/oauth2/auth")),
            ("token_uri", .string(account.tokenURI)),
            ("universe_domain", .string("googleapis.com")),
        ]
        for (name, value) in changes {
            if let index = members.firstIndex(where: { $0.0 == name }) {
                if let value { members[index].1 = value } else { members.remove(at: index) }
            } else if let value {
                members.append((name, value))
            }
        }
        return Fixtures.jsonBytes(JSONObject(members))
    }

    func write(_ bytes: [UInt8], mode: Int = 0o600, in directory: URL, name: String = "sa.json") throws -> String {
        let path = directory.appendingPathComponent(name).path
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes), attributes: [.posixPermissions: mode]))
        return path
    }

    func loadError(_ bytes: [UInt8]) -> FCMServiceAccountError? {
        do { _ = try FCMServiceAccount(json: SecureBytes(bytes), source: "sa.json"); return nil } catch { return error }
    }

    @Test("A good key file (mode 0600) loads: names, and a key that signs what its public half verifies")
    func goodFile() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = try write(try keyFile(), in: directory)
        let loaded = try FCMServiceAccount(file: path)
        let account = try Fixtures.account()
        #expect(loaded.projectID == "demo-project")
        #expect(loaded.clientEmail == "sealedpush-dev@demo-project.iam.gserviceaccount.com")
        #expect(loaded.privateKeyID == account.privateKeyID)
        #expect(loaded.tokenURI == Fixtures.tokenURI)
        #expect(loaded.publicKey.pkcs1DERRepresentation == account.publicKey.pkcs1DERRepresentation)
        // The generated file's own bytes load too.
        let generated = try Fixtures.generated.get()
        let again = try FCMServiceAccount(json: generated.json, source: "generated")
        #expect(again.privateKeyID == account.privateKeyID)
    }

    @Test("Mode 0644 is refused, naming the file and the fix")
    func readableByOthers() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = try write(try keyFile(), mode: 0o644, in: directory)
        #expect(throws: FCMServiceAccountError.readableByOthers(path: path, mode: 0o644)) { try FCMServiceAccount(file: path) }
        #expect(FCMServiceAccountError.readableByOthers(path: path, mode: 0o644).description.contains("chmod 600 \(path)"))
        let group = try write(try keyFile(), mode: 0o640, in: directory, name: "group.json")
        #expect(throws: FCMServiceAccountError.readableByOthers(path: group, mode: 0o640)) { try FCMServiceAccount(file: group) }
    }

    @Test("A symbolic link is refused even to a good file; a directory and a missing file are named")
    func symlinkAndOthers() throws {
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let target = try write(try keyFile(), in: directory)
        let link = directory.appendingPathComponent("link.json").path
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(throws: FCMServiceAccountError.symbolicLink(path: link)) { try FCMServiceAccount(file: link) }
        #expect(throws: FCMServiceAccountError.directory(path: directory.path)) { try FCMServiceAccount(file: directory.path) }
        let missing = directory.appendingPathComponent("missing.json").path
        #expect(throws: FCMServiceAccountError.unreadable(path: missing)) { try FCMServiceAccount(file: missing) }
    }

    @Test("A missing or wrong member is named")
    func members() throws {
        for member in ["type", "project_id", "private_key_id", "private_key", "client_email", "token_uri"] {
            #expect(loadError(try keyFile([member: nil])) == .missingMember(source: "sa.json", member: member))
        }
        guard case .invalidMember(_, "type", _)? = loadError(try keyFile(["type": .string("authorized_user")])) else {
            Issue.record("type authorized_user accepted"); return
        }
        guard case .invalidMember(_, "client_email", _)? = loadError(try keyFile(["client_email": .int(3)])) else {
            Issue.record("a number as client_email accepted"); return
        }
        guard case .invalidMember(_, "token_uri", _)? = loadError(try keyFile(["token_uri": .string("http://oauth2.googleapis.com/token")])) else {
            Issue.record("an http token_uri accepted"); return
        }
        guard case .invalidMember(_, "private_key", _)? = loadError(try keyFile(["private_key": .null])) else {
            Issue.record("a null private_key accepted"); return
        }
        guard case .notJSON? = loadError(Array("not json".utf8)) else { Issue.record("text accepted"); return }
        guard case .notJSON? = loadError(Array(#"{"type":"service_account"} trailing"#.utf8)) else { Issue.record("trailing bytes accepted"); return }
        guard case .invalidMember(_, "type", _)? = loadError(Array(#"{"type":"service_account","type":"x"}"#.utf8)) else {
            Issue.record("a duplicate member accepted"); return
        }
    }

    @Test("Not RSA, a 1024-bit RSA key, and a key that is not PEM are refused; errors never show the key")
    func badKeys() throws {
        let p256 = P256.Signing.PrivateKey().pemRepresentation
        #expect(loadError(try keyFile(privateKeyPEM: p256)) == .notRSA(source: "sa.json"))
        let small = try _RSA.Signing.PrivateKey(unsafeKeySize: .init(bitCount: 1024))
        #expect(loadError(try keyFile(privateKeyPEM: small.pkcs8PEMRepresentation)) == .keyTooSmall(source: "sa.json", bits: 1024))
        // A PKCS#1 block is not PKCS#8.
        let pkcs1 = try Fixtures.account().privateKey.pemRepresentation
        #expect(pkcs1.contains("BEGIN RSA PRIVATE KEY"))
        #expect(loadError(try keyFile(privateKeyPEM: pkcs1)) == .notPEM(source: "sa.json"))
        let pem = try Fixtures.account().privateKey.pkcs8PEMRepresentation
        let broken = pem.replacingOccurrences(of: "\n-----END", with: "!\n-----END")
        let errors = [loadError(try keyFile(privateKeyPEM: broken)), loadError(try keyFile(privateKeyPEM: small.pkcs8PEMRepresentation)),
                      loadError(try keyFile(privateKeyPEM: p256))]
        #expect(errors[0] == .invalidBase64(source: "sa.json"))
        let body = pem.split(separator: "\n")[1]
        for error in errors {
            let text = error.map { "\($0)" } ?? ""
            #expect(!text.contains(body.prefix(16)))
        }
    }

    @Test("generate(project:) writes a PKCS#8 RSA-2048 key file that Python's cryptography reads")
    func generatedReadByPython() throws {
        let generated = try Fixtures.generated.get()
        let script = """
        import sys, json
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        d = json.load(sys.stdin)
        assert d["private_key"].startswith("-----BEGIN PRIVATE KEY-----\\n"), "not PKCS#8"
        key = serialization.load_pem_private_key(d["private_key"].encode(), None)
        assert isinstance(key, rsa.RSAPrivateKey)
        print(key.key_size, d["type"], d["client_email"], d["token_uri"], len(d["private_key_id"]))
        """
        let result = try Fixtures.runPython(script, input: generated.json.unsafeCopyToArray())
        #expect(result.status == 0, "python: \(result.stderr)")
        #expect(result.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines)
            == "2048 service_account sealedpush-dev@demo-project.iam.gserviceaccount.com \(Fixtures.tokenURI) 40")
        #expect(throws: FCMServiceAccountError.self) { try FCMServiceAccount.generate(project: "bad/project", tokenURI: Fixtures.tokenURI) }
    }

    @Test("JSON escapes in the key, other value types and an oversized file")
    func jsonDetails() throws {
        // "\/" and "\u002D" are valid JSON for "/" and "-"; numbers, objects and arrays elsewhere are skipped.
        let pem = try Fixtures.account().privateKey.pkcs8PEMRepresentation
        var text = String(decoding: try keyFile(["extra": .object(JSONObject([("n", .double(-1.5e3)), ("a", .array([.bool(true), .null]))]))]), as: UTF8.self)
        let escaped = String(decoding: JSON.serialize(.string(pem)), as: UTF8.self)
        let exotic = escaped.replacingOccurrences(of: "/", with: "\\/").replacingOccurrences(of: "-----BEGIN", with: "\\u002D----BEGIN")
        text = text.replacingOccurrences(of: escaped, with: exotic)
        #expect(text.contains("\\u002D----BEGIN"))
        let loaded = try FCMServiceAccount(json: SecureBytes(Array(text.utf8)), source: "sa.json")
        #expect(loaded.publicKey.pkcs1DERRepresentation == (try Fixtures.account().publicKey.pkcs1DERRepresentation))
        // A lone surrogate, a raw control character, deep nesting.
        guard case .notJSON? = loadError(Array(#"{"type":"\ud800"}"#.utf8)) else { Issue.record("a lone surrogate accepted"); return }
        guard case .notJSON? = loadError(Array("{\"type\":\"a\u{01}b\"}".utf8)) else { Issue.record("a control character accepted"); return }
        guard case .notJSON? = loadError(Array(("{\"x\":" + String(repeating: "[", count: 40) + String(repeating: "]", count: 40) + "}").utf8)) else {
            Issue.record("nesting 40 deep accepted"); return
        }
        let directory = try Fixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let big = try write([UInt8](repeating: 0x20, count: FCMServiceAccount.maximumFileSize + 1), in: directory)
        #expect(throws: FCMServiceAccountError.tooLarge(path: big, limit: FCMServiceAccount.maximumFileSize)) { try FCMServiceAccount(file: big) }
    }
}
