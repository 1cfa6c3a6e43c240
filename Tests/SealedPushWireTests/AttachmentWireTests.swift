import Testing
import SealedPushCrypto
import SealedPushWire
import SealedPushTestSupport

@Suite("Attachments: descriptors, type table, URL rule") struct AttachmentWireTests {
    static let vectors = try! AttachmentVectors.load()

    /// The message vectors about attachments (the `receipt-…` ones belong to receipts-v1).
    static var messageVectors: [String] { vectors.messages.filter { !$0.isReceiptVector || $0.outcome == "decrypted" }.map(\.name) }

    @Test("every attachment message vector opens or falls back as expected", arguments: messageVectors)
    func messageVector(name: String) throws {
        let file = Self.vectors
        let vector = try #require(file.messages.first { $0.name == name })
        let opener = MessageOpener(keys: InMemoryKeys(file.deviceKeys), policy: ReceiverPolicy(clockSkewSeconds: file.skewSeconds))
        switch vector.outcome {
        case "decrypted":
            let opened = try opener.open(encryptedData: vector.encryptedData, now: file.now)
            let expected = try #require(vector.body)
            #expect(JSONValue.object(opened.rawBody).normalized == JSONValue.object(expected).normalized)
            // The parsed descriptors say exactly what the JSON says.
            let expectedList = expected["attachments"].map { value -> [JSONValue] in
                guard case let .array(a) = value else { return [] }
                return a
            }
            #expect(opened.body.attachments.map { $0.map { JSONValue.object($0.jsonObject).normalized } }
                == expectedList.map { $0.map(\.normalized) })
        case "fallback":
            #expect { try opener.open(encryptedData: vector.encryptedData, now: file.now) } throws: { error in
                (error as? OpenFailure)?.reason == ReasonCode(rawValue: vector.reason ?? "")
            }
        default:
            Issue.record("unknown outcome \(vector.outcome)")
        }
    }

    static func descriptor(_ changes: (inout JSONObject) -> Void) -> JSONObject {
        var o = JSONObject()
        o["id"] = .string("a")
        o["url"] = .string("https://cdn.example/o/1")
        o["key"] = .string(Base64.encode([UInt8](repeating: 7, count: 32)))
        o["type"] = .string("image/png")
        o["size"] = .int(10)
        changes(&o)
        return o
    }

    @Test("descriptor structure: what is malformed and what is left to the fetch")
    func descriptors() throws {
        func parses(_ o: JSONObject) -> Bool { (try? AttachmentDescriptor(validating: o)) != nil }
        #expect(parses(Self.descriptor { _ in }))
        // Left to §4 (that attachment alone fails): unknown type, insecure URL, size over the limit.
        #expect(parses(Self.descriptor { $0["type"] = .string("image/webp") }))
        #expect(parses(Self.descriptor { $0["url"] = .string("http://cdn.example/o") }))
        #expect(parses(Self.descriptor { $0["size"] = .int(Int64.max) }))
        #expect(parses(Self.descriptor { $0["unknown"] = .int(1) }))
        #expect(parses(Self.descriptor { $0["name"] = .string("Ünïcode name.png"); $0["thumbnail-time"] = .int(0); $0["thumbnail-hidden"] = .bool(false) }))
        // Structural: malformedMessage.
        let bad: [(String, (inout JSONObject) -> Void)] = [
            ("id too long", { $0["id"] = .string(String(repeating: "a", count: 65)) }),
            ("id empty", { $0["id"] = .string("") }),
            ("id space", { $0["id"] = .string("a b") }),
            ("url too long", { $0["url"] = .string("https://x/" + String(repeating: "a", count: 2040)) }),
            ("url number", { $0["url"] = .int(1) }),
            ("key 33 bytes", { $0["key"] = .string(Base64.encode([UInt8](repeating: 7, count: 33))) }),
            ("key unpadded", { $0["key"] = .string(String(Base64.encode([UInt8](repeating: 7, count: 32)).dropLast())) }),
            ("type missing", { $0["type"] = nil }),
            ("size negative", { $0["size"] = .int(-1) }),
            ("size float", { $0["size"] = .double(10.5) }),
            ("name empty", { $0["name"] = .string("") }),
            ("name backslash", { $0["name"] = .string("a\\b") }),
            ("name NUL", { $0["name"] = .string("a\u{0}b") }),
            ("name too long", { $0["name"] = .string(String(repeating: "n", count: 129)) }),
            ("hidden string", { $0["thumbnail-hidden"] = .string("true") }),
            ("time float", { $0["thumbnail-time"] = .double(1.5) }),
        ]
        for (label, change) in bad {
            #expect(throws: OpenFailure.self, "\(label)") { try AttachmentDescriptor(validating: Self.descriptor(change)) }
        }
        let one = JSONValue.object(Self.descriptor { _ in })
        #expect(try AttachmentDescriptor.validatingList(.array([one])).count == 1)
        #expect(throws: OpenFailure.self) { try AttachmentDescriptor.validatingList(.array([])) }
        #expect(throws: OpenFailure.self) { try AttachmentDescriptor.validatingList(.array([one, one])) }
        #expect(throws: OpenFailure.self) { try AttachmentDescriptor.validatingList(.array([.int(1)])) }
        #expect(throws: OpenFailure.self) { try AttachmentDescriptor.validatingList(one) }
        let five = (0..<5).map { i in JSONValue.object(Self.descriptor { $0["id"] = .string("a\(i)") }) }
        #expect(try AttachmentDescriptor.validatingList(.array(Array(five.prefix(4)))).count == 4)
        #expect(throws: OpenFailure.self) { try AttachmentDescriptor.validatingList(.array(five)) }
    }

    @Test("the URL rule in development: https anywhere, http only to loopback, nothing malformed")
    func urls() {
        for ok in ["https://cdn.example/o/1", "HTTPS://cdn.example:8443/x?y#z", "http://127.0.0.1:8080/o", "http://localhost/o",
                   "http://127.255.0.9/o", "http://[::1]:9000/o", "http://user@127.0.0.1/o", "https://[2001:db8::1]/o",
                   "https://127.0.0.1/o", "https://192.168.1.2/o", "https://[fe80::1]/o"] {
            #expect(AttachmentURLPolicy.development.isAllowed(ok), "\(ok)")
        }
        for bad in ["http://cdn.example/o", "http://128.0.0.1/o", "http://127.0.0.1.evil.example/o", "http://localhost.evil/o",
                    "http://127.1/o", "ftp://127.0.0.1/o", "file:///etc/passwd", "https:/cdn.example", "https://", "https://:80/o",
                    "https://cdn.example:8x/o", "https://cdn example/o", "//cdn.example/o", "", "https://cdn.example/\u{7F}",
                    "http://[::2]/o", "http://127.0.0.1@evil.example/o", "javascript:alert(1)", "https://cdn.éxample/o",
                    "https://1.2.3.4.5/o", "https://999.0.0.1/o", "https://[fe80::1%25eth0]/o", "https://[1::2::3]/o",
                    "https://a.example\\@evil.example/o", "https://%31%32%37.0.0.1/o"] {
            #expect(!AttachmentURLPolicy.development.isAllowed(bad), "\(bad)")
            #expect(!AttachmentURLPolicy.production.isAllowed(bad), "\(bad)")
        }
    }

    @Test("the URL rule in production (the default): https to public hosts only; https never redirects to http")
    func productionURLs() {
        #expect(AttachmentURLPolicy() == .production && !AttachmentURLPolicy.production.allowsLocalHosts)
        for ok in ["https://cdn.example/o", "https://8.8.8.8/o", "https://172.15.255.255/o", "https://172.32.0.0/o",
                   "https://100.128.0.1/o", "https://[2001:db8::1]/o", "https://[::ffff:8.8.8.8]/o", "https://cdn.example./o"] {
            #expect(AttachmentURLPolicy.production.problem(ok) == nil, "\(ok)")
        }
        let local = ["http://127.0.0.1/o", "http://localhost/o", "http://[::1]/o", "https://127.0.0.1/o", "https://127.1/o",
                     "https://2130706433/o", "https://0x7f000001/o", "https://017700000001/o", "https://localhost/o", "https://a.localhost./o",
                     "https://0.0.0.0/o", "https://0/o", "https://[::]/o", "https://10.0.0.1/o", "https://172.16.0.1/o", "https://192.168.0.1/o",
                     "https://100.64.0.1/o", "https://169.254.169.254/o", "https://[fe80::1]/o", "https://[febf::1]/o", "https://[fc00::1]/o",
                     "https://[fdff::1]/o", "https://[::ffff:192.168.0.1]/o", "https://[::127.0.0.1]/o", "https://[64:ff9b::a00:1]/o",
                     "https://[2002:c0a8:0101::1]/o", "https://[0:0:0:0:0:ffff:7f00:1]/o"]
        for url in local {
            let problem = AttachmentURLPolicy.production.problem(url)
            #expect(problem != nil, "\(url)")
            #expect(problem.map { !$0.contains(url) && !$0.contains("example") } ?? true)
        }
        #expect(AttachmentURLPolicy.production.redirectProblem(from: "https://a.example/o", to: "https://b.example/o") == nil)
        #expect(AttachmentURLPolicy.production.redirectProblem(from: "https://a.example/o", to: "https://10.0.0.1/o") != nil)
        #expect(AttachmentURLPolicy.development.redirectProblem(from: "https://a.example/o", to: "http://127.0.0.1/o") != nil)
        #expect(AttachmentURLPolicy.development.redirectProblem(from: "http://127.0.0.1/a", to: "http://127.0.0.1/b") == nil)
        #expect(AttachmentURLPolicy.development.redirectProblem(from: "http://127.0.0.1/a", to: "https://10.0.0.1/b") == nil)
    }

    @Test("host classes: loopback, unspecified, private, link-local, public, invalid")
    func hostClasses() {
        let cases: [(String, HostAddress)] = [
            ("localhost", .loopback), ("LOCALHOST.", .loopback), ("127.0.0.1", .loopback), ("127.1", .loopback), ("0x7f.1", .loopback),
            ("[::1]", .loopback), ("[0:0:0:0:0:0:0:1]", .loopback), ("[::ffff:127.0.0.2]", .loopback),
            ("0.0.0.0", .unspecified), ("[::]", .unspecified), ("0", .unspecified),
            ("10.255.255.255", .privateNetwork), ("172.16.0.0", .privateNetwork), ("172.31.0.1", .privateNetwork),
            ("192.168.255.1", .privateNetwork), ("[fc00::]", .privateNetwork), ("[fd00::1]", .privateNetwork),
            ("169.254.0.1", .linkLocal), ("[fe80::abcd]", .linkLocal), ("[::ffff:169.254.1.1]", .linkLocal),
            ("cdn.example", .publicHost), ("172.15.0.1", .publicHost), ("192.169.0.1", .publicHost), ("[2001:db8::]", .publicHost),
            ("1.2.3", .publicHost), ("a1.example", .publicHost),
            ("256.0.0.1", .invalid), ("1.2.3.4.5", .invalid), ("09.0.0.1", .invalid), ("[::1", .invalid), ("[12345::]", .invalid),
            ("[1:2:3:4:5:6:7:8:9]", .invalid), ("a..b", .invalid), ("a b", .invalid), ("", .invalid),
        ]
        for (host, expected) in cases { #expect(HostAddress.classify(host) == expected, "\(host)") }
    }

    @Test("the type table: signatures, extensions, kinds and limits")
    func typeTable() throws {
        #expect(MediaType.all.count == 10)
        let samples: [(String, [UInt8], String, MediaKind)] = [
            ("image/jpeg", [0xFF, 0xD8, 0xFF], ".jpg", .image),
            ("image/png", [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], ".png", .image),
            ("image/gif", Array("GIF89a".utf8), ".gif", .image),
            ("audio/mpeg", [0xFF, 0xE3], ".mp3", .audio),
            ("audio/wav", Array("RIFF\0\0\0\0WAVE".utf8), ".wav", .audio),
            ("audio/aiff", Array("FORM\0\0\0\0AIFC".utf8), ".aiff", .audio),
            ("audio/mp4", Array("\0\0\0\u{20}ftyp".utf8), ".m4a", .audio),
            ("video/mp4", Array("\0\0\0\u{18}ftyp".utf8), ".mp4", .movie),
            ("video/mpeg", [0, 0, 1, 0xB3], ".mpg", .movie),
            ("video/x-msvideo", Array("RIFF\0\0\0\0AVI ".utf8), ".avi", .movie),
        ]
        for (mime, magic, ext, kind) in samples {
            let type = try #require(MediaType.named(mime))
            #expect(type.fileExtension == ext && type.kind == kind && type.minimumSize == magic.count)
            #expect(type.matches(prefix: magic), "\(mime)")
            #expect(!type.matches(prefix: Array(magic.dropLast())), "\(mime) one byte short")
            var changed = magic
            changed[changed.count - 1] ^= 0x01
            if mime != "audio/mpeg" { #expect(!type.matches(prefix: changed), "\(mime) last byte changed") }
        }
        #expect(MediaType.named("audio/mpeg")!.matches(prefix: Array("ID3".utf8)))
        #expect(!MediaType.named("audio/mpeg")!.matches(prefix: [0xFF, 0xC0]))
        #expect(MediaType.named("image/GIF") == nil && MediaType.named("image/webp") == nil)
        #expect(MediaKind.image.sizeLimit == 10_000_000 && MediaKind.audio.sizeLimit == 5_000_000 && MediaKind.movie.sizeLimit == 50_000_000)
        #expect(MediaType.forFileExtension("JPEG")?.mime == "image/jpeg" && MediaType.forFileExtension(".mp4")?.mime == "video/mp4")
    }

    @Test("a body with attachments round-trips through jsonObject and Codable-free validation")
    func bodyRoundTrip() throws {
        let d = AttachmentDescriptor(id: "p", url: "https://cdn.example/o", key: SecretStream.generateKey(), type: "image/png", size: 9,
                                     name: "x.png", thumbnailHidden: true, thumbnailTime: 2)
        let body = MessageBody(kid: KeyID(publicKey: [UInt8](repeating: 1, count: 32)), id: "m", issuedAt: 1, alert: .init(body: "hi"),
                               attachments: [d])
        let again = try MessageBody(validating: body.jsonObject)
        #expect(again.attachments == [d])
    }
}
