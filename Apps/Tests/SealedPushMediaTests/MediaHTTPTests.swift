import Testing
import Foundation
import NIOConcurrencyHelpers
import Hummingbird
import Logging
import ServiceLifecycle
import SealedPushCrypto
import SealedPushWire
import SealedPushReceiver
import SealedPushDeviceHTTP
import SealedPushMediaServer
import SealedPushTestSupport

/// `sealedpush-server media serve DIR --listen 127.0.0.1:0` as a child process, and the address it printed.
final class MediaServeProcess: Sendable {
    let child: ChildProcess
    let address: String

    init(directory: String) throws {
        child = try ChildProcess(launching: ProjectPaths.sealedpushServerBinary, ["media", "serve", directory, "--listen", "127.0.0.1:0"],
                                 readLines: true)
        let line = child.nextLine(within: .seconds(60))
        guard let line, let range = line.range(of: "listening on http://") else {
            let ended = child.kill()
            throw ServeError(text: "media serve printed \(line.map { "\"\($0)\"" } ?? "no line within 60 s"): \(ended.stderr)")
        }
        address = String(line[range.upperBound...])
    }

    struct ServeError: Error, CustomStringConvertible {
        let text: String
        var description: String { text }
    }

    /// What the server has logged so far (its standard error).
    var log: String { child.stderrText }

    /// Whether the log comes to contain `text` within `timeout` (a request's log line may follow its response).
    func logEventually(contains text: String, within timeout: Duration = .seconds(30)) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !log.contains(text) {
            guard ContinuousClock.now < deadline else { return false }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return true
    }

    deinit { child.terminate() }
}

/// A device keychain, a media directory and an attachments directory.
struct MediaWorld {
    let root: String
    var keychain: String { root + "/device" }
    var record: String { root + "/device.json" }
    var media: String { root + "/media" }
    var attachments: String { root + "/attachments" }

    init() throws {
        root = NSTemporaryDirectory() + "sp-media-\(UUID().uuidString)"
        for d in [root, root + "/media", root + "/attachments"] {
            // The attachments directory must be private (0700, ours); the device refuses it otherwise.
            try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let generated = try ChildProcess.sealedpush(["keys", "generate", "--keychain", root + "/device"])
        try #require(generated.status == 0, "keys generate: \(generated.stderr)")
        try Data(generated.stdout).write(to: URL(fileURLWithPath: record))
    }

    func cleanUp() { try? FileManager.default.removeItem(atPath: root) }

    /// Writes a file of `type` and size into the root; returns its path.
    func file(_ name: String, type: String, size: Int) throws -> (path: String, bytes: [UInt8]) {
        let magic: [String: [UInt8]] = ["image/png": [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "image/jpeg": [0xFF, 0xD8, 0xFF],
                                         "video/mp4": Array("\0\0\0\u{18}ftyp".utf8)]
        let bytes = Array((magic[type]! + CryptoLibrary.randomBytes(count: size)).prefix(size))
        let path = root + "/" + name
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return (path, bytes)
    }

    /// `seal --attach` for each file, objects into the media directory, served at `baseURL`.
    func seal(_ files: [String], baseURL: String) throws -> [UInt8] {
        let r = try ChildProcess.sealedpush(["seal", "--to", record, "--title", "Agent K", "--body", "Photo attached."]
            + files.flatMap { ["--attach", $0] } + ["--media-dir", media, "--media-url", baseURL])
        try #require(r.status == 0, "seal: \(r.stderr)")
        return r.stdout
    }

    /// `device push --json --attachments-dir --allow-local-media` (the media servers here are on loopback); the parsed result.
    func push(_ payload: [UInt8], _ extra: [String] = []) throws -> JSONObject {
        let r = try ChildProcess.sealedpush(["device", "push", "--keychain", keychain, "--json", "--attachments-dir", attachments, "--allow-local-media"]
                                            + extra + ["-"], stdin: payload)
        guard case let .object(o) = try JSON.parse(r.stdout) else { throw MediaServeProcess.ServeError(text: r.stderr) }
        return o
    }

    var attachmentFiles: [String] { (try? FileManager.default.contentsOfDirectory(atPath: attachments)) ?? [] }
}

func failures(_ o: JSONObject) -> [String] {
    guard case let .array(list)? = o["attachmentFailures"] else { return ["<absent>"] }
    return list.compactMap { $0.objectValue?["reason"]?.stringValue }
}

func shownAttachments(_ o: JSONObject) -> [JSONObject] {
    guard case let .array(list)? = o["notification"]?.objectValue?["attachments"] else { return [] }
    return list.compactMap(\.objectValue)
}

/// A small Hummingbird server on 127.0.0.1:0 for hostile cases; returns its base URL and what stops it gracefully
/// (after the requests in flight end).
func hostileServer(_ configure: @escaping @Sendable (Router<BasicRequestContext>) -> Void) async throws -> (url: String, stop: @Sendable () async -> Void) {
    let router = Router()
    configure(router)
    let (stream, continuation) = AsyncStream<Int>.makeStream()
    var logger = Logger(label: "hostile")
    logger.logLevel = .warning
    let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                          onServerRunning: { continuation.yield($0.localAddress?.port ?? 0) }, logger: logger)
    // Stopped by a graceful shutdown, never by cancelling its task: a cancelled NIO server can drop a connection it
    // accepted but had not handed over yet, and NIO traps on it (swift-nio #2637). The stream ends with the server,
    // so a failed bind ends the wait at once (boundPort).
    let group = ServiceGroup(configuration: ServiceGroupConfiguration(services: [app], logger: logger))
    let task = Task {
        defer { continuation.finish() }
        try await group.run()
    }
    let port = try await boundPort(stream, of: task)
    return ("http://127.0.0.1:\(port)", {
        await group.triggerGracefulShutdown()
        _ = try? await task.value
    })
}

@Suite("Attachments over real loopback HTTP (media serve, device push)", .serialized, .timeLimit(.minutes(10))) struct MediaHTTPTests {
    @Test("seal --attach, media serve, device push: the photo is fetched, decrypted and written 0600; 404 and tampering fail alone")
    func endToEnd() throws {
        let world = try MediaWorld()
        defer { world.cleanUp() }
        let server = try MediaServeProcess(directory: world.media)
        let photo = try world.file("photo.png", type: "image/png", size: 150_000)
        let clip = try world.file("clip.mp4", type: "video/mp4", size: 70_000)
        let payload = try world.seal([photo.path, clip.path], baseURL: "http://\(server.address)/media")
        #expect(payload.count <= 4096)

        let o = try world.push(payload)
        #expect(o["outcome"]?.stringValue == "decrypted")
        #expect(failures(o) == [])
        let shown = shownAttachments(o)
        #expect(shown.map { $0["identifier"]?.stringValue } == ["a1", "a2"])
        #expect(shown.map { $0["type"]?.stringValue } == ["image/png", "video/mp4"])
        #expect(shown.map { $0["size"]?.intValue } == [150_000, 70_000])
        let file = try #require(shown.first?["file"]?.stringValue)
        #expect(file.hasPrefix(world.attachments + "/") && file.hasSuffix(".png"))
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))) == photo.bytes)
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        #expect(server.logEventually(contains: "-> 200"), "\(server.log)")
        #expect(!server.log.contains("ENCRYPTED_DATA"))

        // Tampered object: text shown, that attachment corrupt, the other still attached.
        let objects = try FileManager.default.contentsOfDirectory(atPath: world.media).filter { !$0.hasPrefix(".") }.sorted()
        #expect(objects.count == 2)
        let tamperedPayload = try world.seal([photo.path], baseURL: "http://\(server.address)")
        let newest = try #require(try FileManager.default.contentsOfDirectory(atPath: world.media).first { !objects.contains($0) })
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: world.media + "/" + newest)))
        bytes[bytes.count / 2] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: world.media + "/" + newest))
        let before = world.attachmentFiles.count
        let tampered = try world.push(tamperedPayload)
        #expect(tampered["outcome"]?.stringValue == "decrypted")
        #expect(tampered["notification"]?.objectValue?["body"]?.stringValue == "Photo attached.")
        #expect(failures(tampered) == ["attachmentCorrupt"])
        #expect(shownAttachments(tampered).isEmpty)
        #expect(world.attachmentFiles.count == before)

        // 404: the object was removed from the server.
        let gonePayload = try world.seal([photo.path], baseURL: "http://\(server.address)")
        for name in try FileManager.default.contentsOfDirectory(atPath: world.media) { try FileManager.default.removeItem(atPath: world.media + "/" + name) }
        let gone = try world.push(gonePayload)
        #expect(failures(gone) == ["attachmentUnavailable"])
        #expect(world.attachmentFiles.count == before)
        #expect(server.logEventually(contains: "-> 404"), "\(server.log)")

        // Without --json the banner names each attachment.
        let bannerPayload = try world.seal([photo.path], baseURL: "http://\(server.address)")
        for name in try FileManager.default.contentsOfDirectory(atPath: world.media) { try FileManager.default.removeItem(atPath: world.media + "/" + name) }
        let banner = try ChildProcess.sealedpush(["device", "push", "--keychain", world.keychain, "--attachments-dir", world.attachments, "--allow-local-media", "-"], stdin: bannerPayload)
        #expect(String(decoding: banner.stdout, as: UTF8.self).contains("attachment a1: not attached (reason: attachmentUnavailable)"))
    }

    @Test("seal --attach refusals name the file, its size or type, and the limit; a JSONL line's attachments are encrypted")
    func sealRefusalsAndBatch() throws {
        let world = try MediaWorld()
        defer { world.cleanUp() }
        let media = ["--media-dir", world.media, "--media-url", "https://cdn.example/m"]
        let seal = ["seal", "--to", world.record, "--body", "hi"]
        // A sparse file one byte over the image limit.
        let big = world.root + "/big.png"
        _ = FileManager.default.createFile(atPath: big, contents: Data([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: big))
        try handle.truncate(atOffset: 10_000_001)
        try handle.close()
        let tooBig = try ChildProcess.sealedpush(seal + ["--attach", big] + media)
        #expect(tooBig.status != 0 && tooBig.stderr.contains(big) && tooBig.stderr.contains("10000001") && tooBig.stderr.contains("10000000"))
        let webp = world.root + "/x.webp"
        try Data([1, 2, 3]).write(to: URL(fileURLWithPath: webp))
        let unsupported = try ChildProcess.sealedpush(seal + ["--attach", webp] + media)
        #expect(unsupported.status != 0 && unsupported.stderr.contains("x.webp") && unsupported.stderr.contains("image/jpeg"))
        let typed = try ChildProcess.sealedpush(seal + ["--attach", webp + ":image/webp"] + media)
        #expect(typed.status != 0 && typed.stderr.contains("image/webp") && typed.stderr.contains("not supported"))
        let noDir = try ChildProcess.sealedpush(seal + ["--attach", webp])
        #expect(noDir.status != 0 && noDir.stderr.contains("--media-dir"))
        let insecure = try ChildProcess.sealedpush(seal + ["--attach", webp, "--media-dir", world.media, "--media-url", "http://cdn.example/m"])
        #expect(insecure.status != 0 && insecure.stderr.contains("https"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: world.media).isEmpty)

        // JSONL: one line with an attachment (type given), one with an unknown member in its attachment.
        let photo = try world.file("p.jpg", type: "image/jpeg", size: 5_000)
        let record = try String(contentsOfFile: world.record, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let lines = #"{"to":\#(record),"body":"one","attachments":[{"file":"p.jpg","type":"image/jpeg","name":"Photo"}]}"# + "\n"
            + #"{"to":\#(record),"body":"two","attachments":[{"file":"p.jpg","path":"x"}]}"# + "\n"
            + #"{"to":\#(record),"body":"three","attachments":[{"file":"\#(photo.path)"}]}"# + "\n"
            + #"{"to":\#(record),"body":"four","attachments":[{"file":"../\#(URL(fileURLWithPath: world.root).lastPathComponent)/p.jpg"}]}"# + "\n"
        let batch = try ChildProcess.sealedpush(["seal", "--batch", "-", "--media-source", world.root] + media, stdin: Array(lines.utf8))
        let out = String(decoding: batch.stdout, as: UTF8.self).split(separator: "\n")
        #expect(batch.status == 1 && out.count == 4)
        #expect(out.first?.hasPrefix(#"{"payload":"#) == true && out[1].contains("unknown member 'path'"))
        // An absolute path, and a path that leaves the source directory, are refused (both were read before).
        #expect(out[2].contains(#""error""#) && out[3].contains(#""error""#), "\(out)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: world.media).count == 1)
        // Without --media-source a batch line's files are not read at all.
        let unconfined = try ChildProcess.sealedpush(["seal", "--batch", "-"] + media, stdin: Array(lines.utf8))
        #expect(String(decoding: unconfined.stdout, as: UTF8.self).split(separator: "\n").allSatisfy { $0.contains(#""error""#) })
    }

    @Test("the fetcher over loopback: media serve answers with Content-Length; traversal, links out, directories and FIFOs are 404")
    func serverAndFetcher() async throws {
        let world = try MediaWorld()
        defer { world.cleanUp() }
        try Data([1, 2, 3, 4, 5]).write(to: URL(fileURLWithPath: world.media + "/obj_1-x"))
        try Data([9]).write(to: URL(fileURLWithPath: world.root + "/secret"))
        try Data().write(to: URL(fileURLWithPath: world.media + "/empty"))
        // A symbolic link inside DIR to a file outside it (served before: stat followed it), a directory, a FIFO.
        try FileManager.default.createSymbolicLink(atPath: world.media + "/link", withDestinationPath: world.root + "/secret")
        try FileManager.default.createDirectory(atPath: world.media + "/subdir", withIntermediateDirectories: false)
        #expect(mkfifo(world.media + "/fifo", 0o600) == 0)
        let server = try MediaServeProcess(directory: world.media)
        let fetcher = HTTPAttachmentFetcher()
        func get(_ path: String) async throws -> (Int, Int?, [UInt8]) {
            let r = try await fetcher.get("http://\(server.address)\(path)", maximumBytes: 100)
            var body: [UInt8] = []
            while let piece = try await r.body.next() { body += piece }
            return (r.status, r.announcedLength, body)
        }
        let ok = try await get("/obj_1-x")
        #expect(ok.0 == 200 && ok.1 == 5 && ok.2 == [1, 2, 3, 4, 5])
        #expect(try await get("/any/prefix/obj_1-x").0 == 200)
        let empty = try await get("/empty")
        #expect(empty.0 == 200 && empty.1 == 0 && empty.2.isEmpty)
        for path in ["/../secret", "/%2E%2E/secret", "/..%2Fsecret", "/.obj", "/", "/missing", "/link", "/subdir", "/fifo"] {
            #expect(try await get(path).0 == 404, "\(path)")
        }
        // The body read ahead stops past maximumBytes: the reader gets AttachmentBodyTooLarge, never the sixth byte.
        let capped = try await fetcher.get("http://\(server.address)/obj_1-x", maximumBytes: 4)
        await #expect(throws: AttachmentBodyTooLarge(limit: 4)) { while try await capped.body.next() != nil {} }
        // A cancelled body ends at once.
        let cancelled = try await fetcher.get("http://\(server.address)/obj_1-x", maximumBytes: 100)
        await cancelled.body.cancel()
        await #expect(throws: (any Error).self) { _ = try await cancelled.body.next() }
        try await fetcher.shutdown()
        #expect(!server.log.contains("\u{1}\u{2}\u{3}"))
    }

    @Test("hostile servers: too many bytes, insecure redirect, stall within a short budget; an open directory, loopback media without the switch")
    func hostile() async throws {
        let world = try MediaWorld()
        defer { world.cleanUp() }
        let sentBytes = SentCounter()
        let (base, stopServer) = try await hostileServer { router in
            router.get("/endless/**") { _, _ -> Response in
                Response(status: .ok, body: ResponseBody { writer in
                    let chunk = ByteBuffer(repeating: 0, count: 16_384)
                    for _ in 0..<1_000 {
                        try await writer.write(chunk)
                        sentBytes.add(16_384)
                    }
                    try await writer.finish(nil)
                })
            }
            router.get("/redirect/**") { _, _ -> Response in
                Response(status: .found, headers: [.location: "http://media.example.com/o/photo"])
            }
            router.get("/stall/**") { _, _ -> Response in
                // Longer than the push's budget below (1 s, 8 s under a sanitizer), short enough that the graceful
                // stop at the end, which lets this request finish, does not wait long.
                try await Task.sleep(for: .seconds(12))
                return Response(status: .ok)
            }
        }
        let photo = try world.file("p.png", type: "image/png", size: 3_000)
        let bound = MediaObjectFormat.maximumObjectLength(size: 3_000)
        /// Seals to `base/route/NAME` (the hostile routes answer any NAME) and removes the real object.
        func seal(_ route: String) throws -> [UInt8] {
            let p = try world.seal([photo.path], baseURL: base + "/" + route)
            for name in try FileManager.default.contentsOfDirectory(atPath: world.media) { try FileManager.default.removeItem(atPath: world.media + "/" + name) }
            return p
        }
        let endless = try world.push(try seal("endless"))
        #expect(endless["outcome"]?.stringValue == "decrypted" && failures(endless) == ["attachmentTooLarge"])
        let redirect = try world.push(try seal("redirect"))
        #expect(failures(redirect) == ["attachmentInsecureURL"])
        let started = Date()
        // A short budget: the text opens well within it and the stalled fetch ends at it. Under a sanitizer on
        // a loaded machine opening the text alone took more than 300 ms in a CI run, so there the budget is longer.
        let budget = ProcessInfo.processInfo.environment["SEALEDPUSH_SANITIZER"] == nil ? "1s" : "8s"
        let stalled = try world.push(try seal("stall"), ["--time-limit", budget])
        #expect(stalled["outcome"]?.stringValue == "decrypted" && failures(stalled) == ["attachmentTimeExpired"])
        #expect(stalled["notification"]?.objectValue?["body"]?.stringValue == "Photo attached.")
        #expect(Date().timeIntervalSince(started) < 20)
        #expect(world.attachmentFiles.isEmpty)

        // The byte cap, counted on the client side: no more than the bound (plus the piece that crossed it) is read.
        let counting = CountingFetcher(HTTPAttachmentFetcher())
        let descriptor = AttachmentDescriptor(id: "x", url: base + "/endless/obj", key: SecretStream.generateKey(), type: "image/png", size: 3_000)
        let result = await (try AttachmentPipeline(fetcher: counting, directory: world.attachments, policy: .development)).run(descriptor)
        if case let .failure(f) = result { #expect(f.reason == .attachmentTooLarge) } else { Issue.record("attached an endless body") }
        #expect(counting.total.withLockedValue { $0 } - counting.largestPiece.withLockedValue { $0 } <= bound)
        try await counting.inner.shutdown()
        #expect(sentBytes.total >= 0)

        // An attachments directory open to others is refused before any delivery, naming the flag and the fix.
        let server = try MediaServeProcess(directory: world.media)
        let open = world.root + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        let payload = try world.seal([photo.path], baseURL: "http://\(server.address)")
        let r = try ChildProcess.sealedpush(["device", "push", "--keychain", world.keychain, "--json", "--attachments-dir", open,
                                             "--allow-local-media", "-"], stdin: payload)
        #expect(r.status != 0 && r.stderr.contains("--attachments-dir") && r.stderr.contains(open), "\(r.stderr)")
        // Without --allow-local-media, media on loopback http is refused as an insecure URL; the text still shows.
        let production = try ChildProcess.sealedpush(["device", "push", "--keychain", world.keychain, "--json", "--attachments-dir",
                                                      world.attachments, "-"], stdin: payload)
        if case let .object(o) = try JSON.parse(production.stdout) {
            #expect(o["outcome"]?.stringValue == "decrypted" && failures(o) == ["attachmentInsecureURL"])
        } else {
            Issue.record("no JSON: \(production.stderr)")
        }
        await stopServer()
    }
}

/// Counts the body bytes a fetcher hands out.
final class CountingFetcher: AttachmentFetcher {
    let inner: HTTPAttachmentFetcher
    let total = NIOLockedValueBox<Int>(0)
    let largestPiece = NIOLockedValueBox<Int>(0)
    init(_ inner: HTTPAttachmentFetcher) { self.inner = inner }

    struct Body: AttachmentByteStream {
        let inner: any AttachmentByteStream
        let owner: CountingFetcher
        func next() async throws -> [UInt8]? {
            let piece = try await inner.next()
            if let piece {
                owner.total.withLockedValue { $0 += piece.count }
                owner.largestPiece.withLockedValue { $0 = max($0, piece.count) }
            }
            return piece
        }
        func cancel() async { await inner.cancel() }
    }

    func get(_ url: String, maximumBytes: Int) async throws -> AttachmentResponse {
        var r = try await inner.get(url, maximumBytes: maximumBytes)
        r.body = Body(inner: r.body, owner: self)
        return r
    }
}

/// Bytes a hostile server wrote.
final class SentCounter: Sendable {
    let value = NIOLockedValueBox<Int>(0)
    func add(_ n: Int) { value.withLockedValue { $0 += n } }
    var total: Int { value.withLockedValue { $0 } }
}
