import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushReceiver
import SealedPushDevice
import SealedPushTestSupport

/// A fresh attachments directory (0700: the pipeline refuses one open to others).
func attachmentsDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "sealedpush-attach-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
    return path
}

/// A file of `type` of `size` bytes: its signature, then random bytes.
func mediaFile(_ type: MediaType, size: Int) -> [UInt8] {
    let signatures: [String: [UInt8]] = [
        "image/jpeg": [0xFF, 0xD8, 0xFF], "image/png": [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A],
        "image/gif": Array("GIF89a".utf8), "audio/mpeg": [0xFF, 0xFB], "audio/wav": Array("RIFF\0\0\0\0WAVE".utf8),
        "audio/aiff": Array("FORM\0\0\0\0AIFF".utf8), "audio/mp4": Array("\0\0\0\u{20}ftyp".utf8),
        "video/mp4": Array("\0\0\0\u{18}ftyp".utf8), "video/mpeg": [0, 0, 1, 0xBA], "video/x-msvideo": Array("RIFF\0\0\0\0AVI ".utf8),
    ]
    let magic = signatures[type.mime]!
    return Array((magic + CryptoLibrary.randomBytes(count: max(size - magic.count, 0))).prefix(size))
}

/// Encrypts `file` and returns the object and its descriptor at `url`.
func mediaObject(_ file: [UInt8], type: String, url: String = "https://cdn.example/o", id: String = "a1") throws -> ([UInt8], AttachmentDescriptor) {
    let key = SecretStream.generateKey()
    let encryptor = try MediaObjectEncryptor(key: key, size: file.count, type: type)
    var object: [UInt8] = []
    try encryptor.update(file) { object += $0 }
    try encryptor.finish { object += $0 }
    return (object, AttachmentDescriptor(id: id, url: url, key: key, type: type, size: file.count))
}

func fileDigest(_ path: String) throws -> String {
    Hex.encode(SHA256Hasher.hash([UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))))
}

@Suite("Attachment pipeline (§4) over an in-memory fetcher", .timeLimit(.minutes(10))) struct AttachmentPipelineTests {
    static let vectors = try! AttachmentVectors.load()

    @Test("every media object vector: the file's SHA-256 or the exact reason; nothing left on failure",
          arguments: vectors.mediaObjects.map(\.name))
    func vector(name: String) async throws {
        let v = try #require(Self.vectors.mediaObjects.first { $0.name == name })
        let descriptor = try AttachmentDescriptor(validating: v.descriptor)
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let fetcher = MemoryFetcher([descriptor.url: .object(v.object, piece: 5_000)])
        let result = try await AttachmentPipeline(fetcher: fetcher, directory: dir).run(descriptor)
        if let sha = v.fileSHA256 {
            let attachment = try result.get()
            #expect(try fileDigest(attachment.url) == sha)
            #expect(attachment.identifier == descriptor.id && attachment.size == Int64(v.fileSize ?? -1) && attachment.type == descriptor.type)
            #expect(attachment.url.hasSuffix(MediaType.named(descriptor.type)!.fileExtension) && attachment.url.hasPrefix(dir + "/"))
            let mode = try FileManager.default.attributesOfItem(atPath: attachment.url)[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600)
        } else {
            guard case let .failure(failure) = result else { Issue.record("\(name) attached"); return }
            #expect(failure.reason.rawValue == v.reason, "\(name): \(failure)")
            #expect(failure.identifier == descriptor.id)
            #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
            if v.reason == "attachmentUnsupportedType" || name == "image-over-limit" { #expect(fetcher.requested.isEmpty) }
        }
    }

    static let sizes = [65_535, 65_536, 65_537, 200_000]

    @Test("round trips for every type at its smallest size, 65 535, 65 536, 65 537 and 200 000 bytes", arguments: MediaType.all.map(\.mime))
    func roundTrips(mime: String) async throws {
        let type = try #require(MediaType.named(mime))
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for size in [type.minimumSize] + Self.sizes {
            let file = mediaFile(type, size: size)
            let (object, descriptor) = try mediaObject(file, type: mime)
            let result = try await AttachmentPipeline(fetcher: MemoryFetcher([descriptor.url: .object(object, piece: 7_777)]), directory: dir).run(descriptor)
            let attachment = try result.get()
            #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: attachment.url))) == file, "\(mime) \(size)")
        }
    }

    @Test("HTTP: 404 and connection failures are unavailable; redirects followed up to 3, never to insecure URLs")
    func http() async throws {
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = mediaFile(MediaType.named("image/gif")!, size: 1_000)
        let (object, d) = try mediaObject(file, type: "image/gif", url: "https://a.example/start")
        func run(_ routes: [String: MemoryFetcher.Route], _ descriptor: AttachmentDescriptor = d,
                 policy: AttachmentURLPolicy = .production) async throws -> Result<NotificationAttachment, AttachmentFailure> {
            try await AttachmentPipeline(fetcher: MemoryFetcher(routes), directory: dir, policy: policy).run(descriptor)
        }
        func reason(_ r: Result<NotificationAttachment, AttachmentFailure>) -> ReasonCode? {
            if case let .failure(f) = r { return f.reason } else { return nil }
        }
        #expect(reason(try await run([:])) == .attachmentUnavailable)
        #expect(reason(try await run(["https://a.example/start": .status(500)])) == .attachmentUnavailable)
        #expect(reason(try await run(["https://a.example/start": .connectionFailure])) == .attachmentUnavailable)
        let three: [String: MemoryFetcher.Route] = [
            "https://a.example/start": .redirect("/one"), "https://a.example/one": .redirect("two"),
            "https://a.example/two": .redirect("https://b.example/three"), "https://b.example/three": .object(object),
        ]
        #expect(try await run(three).get().size == 1_000)
        var four = three
        four["https://b.example/three"] = .redirect("//c.example/four")
        four["https://c.example/four"] = .object(object)
        #expect(reason(try await run(four)) == .attachmentUnavailable)
        #expect(reason(try await run(["https://a.example/start": .redirect("http://cdn.example/o")])) == .attachmentInsecureURL)
        #expect(reason(try await run(["https://a.example/start": .redirect("ftp://127.0.0.1/o")])) == .attachmentInsecureURL)
        var insecure = d
        insecure.url = "http://cdn.example/o"
        #expect(reason(try await run(["http://cdn.example/o": .object(object)], insecure)) == .attachmentInsecureURL)
        var loopback = d
        loopback.url = "http://127.0.0.1:9/o"
        #expect(reason(try await run(["http://127.0.0.1:9/o": .object(object)], loopback)) == .attachmentInsecureURL)
        #expect(try await run(["http://127.0.0.1:9/o": .object(object)], loopback, policy: .development).get().size == 1_000)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).count == 2)
    }

    @Test("the byte cap: an announced length over the bound reads nothing; an endless body is cut at the bound")
    func byteCap() async throws {
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (_, d) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 3_000), type: "image/png")
        let bound = MediaObjectFormat.maximumObjectLength(size: 3_000)
        let announced = MemoryFetcher([d.url: .endless(announcedLength: bound + 1)])
        let r1 = try await AttachmentPipeline(fetcher: announced, directory: dir).run(d)
        #expect(r1.failureReason == .attachmentTooLarge && announced.bytesSent == 0)
        let endless = MemoryFetcher([d.url: .endless(announcedLength: nil)])
        let r2 = try await AttachmentPipeline(fetcher: endless, directory: dir).run(d)
        #expect(r2.failureReason == .attachmentTooLarge)
        #expect(endless.bytesSent <= bound + 1_000)  // the piece that crossed the bound was not consumed
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    @Test("cancellation fails the attachment with attachmentTimeExpired and leaves no file")
    func cancellation() async throws {
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (_, d) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 3_000), type: "image/png")
        let fetcher = MemoryFetcher([d.url: .stall])
        let pipeline = try AttachmentPipeline(fetcher: fetcher, directory: dir)
        let task = Task { await pipeline.run([d]) }
        // Cancel mid-download: once the body is being read (not before the request, not after a result).
        // Generous: the synchronous process tests of this run can hold the cooperative threads for minutes.
        try await waitUntil("the download to reach the stalled body", within: .seconds(300)) { fetcher.stalledReads > 0 }
        task.cancel()
        let results = await task.value
        #expect(results.first?.failureReason == .attachmentTimeExpired)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
    }

    @Test("an attachments directory that cannot be written is attachmentStorageFailed; one that cannot be made is refused up front")
    func storage() async throws {
        let (object, d) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 3_000), type: "image/png")
        // Removed after the pipeline checked it: creating the file fails (root ignores permission bits, not this).
        let gone = try attachmentsDirectory()
        let pipeline = try AttachmentPipeline(fetcher: MemoryFetcher([d.url: .object(object)]), directory: gone)
        try FileManager.default.removeItem(atPath: gone)
        #expect(await pipeline.run(d).failureReason == .attachmentStorageFailed)
        do {
            _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: "/nonexistent/dir")
            Issue.record("a directory without a parent was accepted")
        } catch {
            #expect(error.description.contains("/nonexistent/dir") && error.description.contains("parent"), "\(error)")
        }
    }

    @Test("descriptors run in parallel and come back in descriptor order")
    func parallel() async throws {
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (o1, d1) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 100), type: "image/png", url: "https://x.example/1", id: "one")
        let (_, d2) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 100), type: "image/png", url: "https://x.example/2", id: "two")
        let results = try await AttachmentPipeline(fetcher: MemoryFetcher([d1.url: .object(o1), d2.url: .status(404)]), directory: dir).run([d1, d2])
        #expect(try results[0].get().identifier == "one")
        #expect(results[1].failureReason == .attachmentUnavailable)
    }

    @Test("redirect resolution")
    func resolve() {
        #expect(AttachmentURLPolicy.resolve("/b", against: "https://h.example:8443/a/x?q") == "https://h.example:8443/b")
        #expect(AttachmentURLPolicy.resolve("c", against: "https://h.example/a/x?q") == "https://h.example/a/c")
        #expect(AttachmentURLPolicy.resolve("//o.example/p", against: "http://127.0.0.1/a") == "http://o.example/p")
        #expect(AttachmentURLPolicy.resolve("https://z.example/", against: "https://h.example/") == "https://z.example/")
        #expect(AttachmentURLPolicy.resolve("", against: "https://h.example/") == nil)
    }
}

extension Result where Failure == AttachmentFailure {
    /// The failure's reason, or `nil` on success.
    var failureReason: ReasonCode? {
        if case let .failure(f) = self { return f.reason }
        return nil
    }
}

@Suite("The extension with attachments (best attempt, §5)", .timeLimit(.minutes(10))) struct ExtensionAttachmentTests {
    static let now: Int64 = 1_800_000_000

    func deliver(_ descriptors: [AttachmentDescriptor], routes: [String: MemoryFetcher.Route], dir: String,
                 timeLimit: Duration = .seconds(10)) async throws -> DeliveryResult {
        let key = BoxKeyPair.generate()
        let body = MessageBody(kid: key.keyID, id: UUID().uuidString, issuedAt: Self.now, alert: .init(title: "Agent K", body: "Photo attached."),
                               attachments: descriptors.isEmpty ? nil : descriptors)
        let payload = try TestPayloads.payload(body: body, to: key.publicKey)
        let pipeline = try AttachmentPipeline(fetcher: MemoryFetcher(routes), directory: dir)
        let simulator = DeviceSimulator(options: .init(timeLimit: timeLimit, expiryGrace: .milliseconds(500))) {
            SecretMessageExtension(configuration: .init(keys: InMemoryKeys([key]), clock: .fixed(unixSeconds: Self.now), attachments: pipeline))
        }
        return await simulator.deliver(payload: payload)
    }

    @Test("attachments are added in descriptor order, failures listed; the JSON has both members exactly when there were attachments")
    func attachedAndFailed() async throws {
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (o1, d1) = try mediaObject(mediaFile(MediaType.named("image/jpeg")!, size: 900), type: "image/jpeg", url: "https://x.example/1", id: "photo")
        var d2 = d1
        d2.id = "webp"
        d2.type = "image/webp"
        let result = try await deliver([d1, d2], routes: [d1.url: .object(o1)], dir: dir)
        #expect(result.outcome == .decrypted && result.reason == nil)
        #expect(result.notification?.attachments.map(\.identifier) == ["photo"])
        #expect(result.attachmentFailures == [AttachmentFailure(identifier: "webp", reason: .attachmentUnsupportedType,
                                                                detail: result.attachmentFailures?.first?.detail ?? "")])
        let json = result.jsonObject
        #expect(json["attachmentFailures"] != nil && json["notification"]?.objectValue?["attachments"] != nil)
        let plain = try await deliver([], routes: [:], dir: dir)
        #expect(plain.attachmentFailures == nil && plain.jsonObject["attachmentFailures"] == nil
            && plain.jsonObject["notification"]?.objectValue?["attachments"] == nil)
    }

    @Test("at expiry the text shows with the finished attachments; the unfinished one fails attachmentTimeExpired and leaves no file")
    func expiry() async throws {
        let dir = try attachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (o1, d1) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 500), type: "image/png", url: "https://x.example/fast", id: "fast")
        let (_, d2) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 500), type: "image/png", url: "https://x.example/slow", id: "slow")
        // The slow route stalls for ever, so the budget only has to outlast the fast one: 5 s, not 400 ms,
        // which a loaded two-core machine overran before the text had opened.
        let result = try await deliver([d1, d2], routes: [d1.url: .object(o1), d2.url: .stall], dir: dir, timeLimit: .seconds(5))
        #expect(result.outcome == .decrypted && result.notification?.body == "Photo attached.")
        #expect(result.notification?.attachments.map(\.identifier) == ["fast"])
        #expect(result.attachmentFailures?.map(\.reason) == [.attachmentTimeExpired])
        // The cancelled download removes its partial file after the result is shown: wait for that, bounded.
        try await waitUntil("the cancelled download to remove its partial file", within: .seconds(300)) {
            (try FileManager.default.contentsOfDirectory(atPath: dir).count) <= 1
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).count == 1)
    }
}
