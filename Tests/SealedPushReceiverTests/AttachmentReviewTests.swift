import Testing
import Foundation
import SealedPushCrypto
import SealedPushWire
import SealedPushReceiver
import SealedPushTestSupport

/// Serves `object` in two pieces: the first at once, then the second only after `release()`; counts reads.
final class HalfwayFetcher: AttachmentFetcher, @unchecked Sendable {
    // Safe: the flags are guarded by the lock.
    let object: [UInt8]
    let lock = NSLock()
    var firstSent = false
    var released = false
    init(_ object: [UInt8]) { self.object = object }

    var hasSentFirstPiece: Bool { lock.withLock { firstSent } }
    func release() { lock.withLock { released = true } }

    func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        AttachmentResponse(status: 200, announcedLength: object.count, location: nil, body: Body(fetcher: self))
    }

    final class Body: AttachmentByteStream, @unchecked Sendable {
        // Safe: one task reads a body.
        let fetcher: HalfwayFetcher
        var step = 0
        init(fetcher: HalfwayFetcher) { self.fetcher = fetcher }
        func next() async throws -> [UInt8]? {
            step += 1
            let half = fetcher.object.count / 2
            switch step {
            case 1:
                return Array(fetcher.object[..<half])
            case 2:
                fetcher.lock.withLock { fetcher.firstSent = true }
                while !fetcher.lock.withLock({ fetcher.released }) {
                    try Task.checkCancellation()
                    try await Task.sleep(for: .milliseconds(5))
                }
                return Array(fetcher.object[half...])
            default:
                return nil
            }
        }
        func cancel() async {}
    }
}

/// A private attachments directory made by the test (0700).
func privateAttachmentsDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "sealedpush-review-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
    return path
}

@Suite("Review #22: attachments directory, temporary downloads, URL policy", .timeLimit(.minutes(10)))
struct AttachmentReviewTests {
    /// Finding 2: an attachments directory others can read or replace files in is refused when the pipeline is made.
    @Test("a directory open to others, a symbolic link, or another user's directory is refused; a missing one is made 0700")
    func directoryMustBePrivate() throws {
        let open = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: open) }
        chmod(open, 0o755)
        #expect(throws: (any Error).self) { _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: open) }
        let target = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: target) }
        let link = target + "-link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        defer { try? FileManager.default.removeItem(atPath: link) }
        #expect(throws: (any Error).self) { _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: link) }
        #expect(throws: (any Error).self) { _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: link + "/") }
        if geteuid() == 0 {
            let others = try privateAttachmentsDirectory()
            defer { try? FileManager.default.removeItem(atPath: others) }
            chown(others, 65534, 65534)
            #expect(throws: (any Error).self) { _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: others) }
        }
        let missing = target + "/made"
        _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: missing)
        let attributes = try FileManager.default.attributesOfItem(atPath: missing)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect(attributes[.type] as? FileAttributeType == .typeDirectory)
    }

    /// Finding 3: while a download runs, no file carries a final name; only a hidden 0600 temporary one exists.
    @Test("a download is written to a hidden 0600 temporary file and renamed only after the object verified")
    func temporaryName() async throws {
        let dir = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = mediaFile(MediaType.named("image/png")!, size: 200_000)
        let (object, d) = try mediaObject(file, type: "image/png")
        let fetcher = HalfwayFetcher(object)
        let pipeline = try AttachmentPipeline(fetcher: fetcher, directory: dir)
        let task = Task { await pipeline.run(d) }
        try await waitUntil("the first half of the object to be written", within: .seconds(300)) { fetcher.hasSentFirstPiece }
        let during = try FileManager.default.contentsOfDirectory(atPath: dir)
        #expect(during.count == 1 && during.allSatisfy { $0.hasPrefix(".") }, "\(during)")
        if let temp = during.first {
            let mode = try FileManager.default.attributesOfItem(atPath: dir + "/" + temp)[.posixPermissions] as? NSNumber
            #expect(mode?.intValue == 0o600)
        }
        fetcher.release()
        let attachment = try await task.value.get()
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir) == [String(attachment.url.split(separator: "/").last!)])
        #expect(!attachment.url.split(separator: "/").last!.hasPrefix("."))
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: attachment.url))) == file)
    }

    /// Finding 4: by default (production) loopback http, local address literals over https, and https→http
    /// redirects are refused before any request to them.
    @Test("production: no http, no https to loopback, private, link-local or unspecified literals, no https→http redirect")
    func productionURLPolicy() async throws {
        let dir = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = mediaFile(MediaType.named("image/gif")!, size: 1_000)
        let (object, d) = try mediaObject(file, type: "image/gif")
        let refused = [
            "http://127.0.0.1:9/o", "http://localhost/o", "http://[::1]/o",
            "https://127.0.0.1/o", "https://localhost:8443/o", "https://[::1]/o", "https://0.0.0.0/o", "https://[::]/o",
            "https://10.1.2.3/o", "https://172.16.0.1/o", "https://172.31.255.255/o", "https://192.168.1.1/o",
            "https://169.254.169.254/latest", "https://[fe80::1]/o", "https://[fc00::1]/o", "https://[fd12:3456::1]/o",
            "https://2130706433/o", "https://0x7f.0.0.1/o", "https://127.1/o", "https://[::ffff:127.0.0.1]/o",
            "https://[::ffff:10.0.0.1]/o", "https://10.0.0.1./o", "https://api.localhost/o",
        ]
        for url in refused {
            var descriptor = d
            descriptor.url = url
            let fetcher = MemoryFetcher([url: .object(object)])
            let result = await (try AttachmentPipeline(fetcher: fetcher, directory: dir)).run(descriptor)
            #expect(result.failureReason == .attachmentInsecureURL, "\(url)")
            #expect(fetcher.requested.isEmpty, "\(url)")
        }
        for target in ["http://127.0.0.1:8080/o", "http://cdn.example/o", "https://192.168.0.10/o", "https://[fe80::1]/o"] {
            var descriptor = d
            descriptor.url = "https://a.example/start"
            let fetcher = MemoryFetcher(["https://a.example/start": .redirect(target), target: .object(object)])
            let result = await (try AttachmentPipeline(fetcher: fetcher, directory: dir)).run(descriptor)
            #expect(result.failureReason == .attachmentInsecureURL, "\(target)")
            #expect(fetcher.requested == ["https://a.example/start"], "\(target)")
        }
        for url in ["https://cdn.example/o", "https://8.8.8.8/o", "https://172.32.0.1/o", "https://[2001:db8::1]/o", "https://11.0.0.1/o"] {
            var descriptor = d
            descriptor.url = url
            let result = await (try AttachmentPipeline(fetcher: MemoryFetcher([url: .object(object)]), directory: dir)).run(descriptor)
            #expect(result.failureReason == nil, "\(url)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).count == 5)
    }
}

@Suite("Attachment pipeline: development switch, directory errors, cleanup", .timeLimit(.minutes(10)))
struct AttachmentPipelineHousekeepingTests {
    @Test("the development policy allows loopback http and local https literals, still never an https→http redirect")
    func development() async throws {
        let dir = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (object, d) = try mediaObject(mediaFile(MediaType.named("image/gif")!, size: 1_000), type: "image/gif")
        let pipeline = { (fetcher: MemoryFetcher) throws -> AttachmentPipeline in
            try AttachmentPipeline(fetcher: fetcher, directory: dir, policy: .development)
        }
        for url in ["http://127.0.0.1:8080/o", "http://localhost/o", "https://192.168.1.1/o", "https://[fe80::1]/o"] {
            var descriptor = d
            descriptor.url = url
            #expect(try await pipeline(MemoryFetcher([url: .object(object)])).run(descriptor).failureReason == nil, "\(url)")
        }
        var descriptor = d
        descriptor.url = "https://a.example/start"
        let redirect = MemoryFetcher(["https://a.example/start": .redirect("http://127.0.0.1/o"), "http://127.0.0.1/o": .object(object)])
        #expect(try await pipeline(redirect).run(descriptor).failureReason == .attachmentInsecureURL)
        #expect(redirect.requested == ["https://a.example/start"])
    }

    @Test("the directory error names the path and the fix")
    func directoryErrors() throws {
        let dir = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        chmod(dir, 0o750)
        do {
            _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: dir)
            Issue.record("accepted a directory open to its group")
        } catch {
            #expect(error.description.contains(dir) && error.description.contains("chmod 700") && error.description.contains("750"))
            #expect(error.problem == .accessibleByOthers(mode: 0o750))
        }
        let file = dir + "/plain"
        _ = FileManager.default.createFile(atPath: file, contents: Data())
        chmod(dir, 0o700)
        do {
            _ = try AttachmentPipeline(fetcher: MemoryFetcher([:]), directory: file)
            Issue.record("accepted a file")
        } catch {
            #expect(error.problem == .notDirectory && error.description.contains(file))
        }
    }

    @Test("removeFiles removes the pipeline's files (finished or partial) older than the age, and nothing else")
    func cleanup() async throws {
        let dir = try privateAttachmentsDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (object, d) = try mediaObject(mediaFile(MediaType.named("image/png")!, size: 500), type: "image/png")
        let pipeline = try AttachmentPipeline(fetcher: MemoryFetcher([d.url: .object(object)]), directory: dir)
        let fresh = try await pipeline.run(d).get()
        let old = try await pipeline.run(d).get()
        let fm = FileManager.default
        let partial = dir + "/.AAAAAAAAAAAAAAAA.jpg.partial"
        let foreign = dir + "/notes.txt"
        let lookalike = dir + "/AAAAAAAAAAAAAAAA.webp"
        for path in [partial, foreign, lookalike] { _ = fm.createFile(atPath: path, contents: Data([1])) }
        try fm.createDirectory(atPath: dir + "/BBBBBBBBBBBBBBBB.png", withIntermediateDirectories: false)
        let twoHoursAgo = Date(timeIntervalSinceNow: -7200)
        for path in [old.url, partial, foreign, lookalike, dir + "/BBBBBBBBBBBBBBBB.png"] {
            try fm.setAttributes([.modificationDate: twoHoursAgo], ofItemAtPath: path)
        }
        #expect(pipeline.removeFiles(olderThan: AttachmentPipeline.defaultFileLifetime) == 2)
        let left = Set(try fm.contentsOfDirectory(atPath: dir))
        #expect(left == Set([fresh.url, foreign, lookalike, dir + "/BBBBBBBBBBBBBBBB.png"].map { String($0.split(separator: "/").last!) }))
        #expect(pipeline.removeFiles(olderThan: .seconds(0), now: Int64(Date().timeIntervalSince1970) + 10) == 1)
        #expect(AttachmentPipeline.isPipelineFileName(String(fresh.url.split(separator: "/").last!)))
        #expect(!AttachmentPipeline.isPipelineFileName("..png") && !AttachmentPipeline.isPipelineFileName(".partial"))
    }
}
