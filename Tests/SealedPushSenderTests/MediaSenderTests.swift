import Foundation
import SealedPushCrypto
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// A PNG-looking file of `size` bytes (the signature, then random bytes).
func pngBytes(_ size: Int) -> [UInt8] {
    let magic: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
    return Array((magic + CryptoLibrary.randomBytes(count: max(size - 8, 0))).prefix(size))
}

func temporaryDirectory(_ label: String) throws -> String {
    let path = NSTemporaryDirectory() + "sealedpush-\(label)-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// A store that keeps objects in memory, served at a URL of a chosen length.
final class MemoryStore: MediaObjectStore, @unchecked Sendable {
    // Safe: tests use one store from one task at a time; the lock guards the dictionary anyway.
    let lock = NSLock()
    var objects: [String: [UInt8]] = [:]
    let urlPadding: Int
    init(urlPadding: Int = 0) { self.urlPadding = urlPadding }

    final class Writer: MediaObjectWriter {
        let url: String
        var bytes: [UInt8] = []
        let store: MemoryStore
        init(url: String, store: MemoryStore) { self.url = url; self.store = store }
        func write(_ b: [UInt8]) throws { bytes += b }
        func commit() throws { store.lock.withLock { store.objects[url] = bytes } }
        func discard() { bytes = [] }
    }

    func createObject() throws -> any MediaObjectWriter {
        Writer(url: "https://cdn.example/" + String(repeating: "p", count: urlPadding) + UUID().uuidString, store: self)
    }
}

@Suite("Sender: encrypted media attachments") struct MediaSenderTests {
    @Test("a file is encrypted into the directory under a random name and decrypts back; the body carries its descriptor")
    func directoryRoundTrip() throws {
        let dir = try temporaryDirectory("media")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = pngBytes(150_000)
        let path = dir + "/photo.png"
        try Data(file).write(to: URL(fileURLWithPath: path))
        let media = try temporaryDirectory("objects")
        defer { try? FileManager.default.removeItem(atPath: media) }
        let store = try DirectoryMediaStore(directory: media, baseURL: "http://127.0.0.1:8080/m/")
        var message = SecretMessage(title: "Agent K", body: "Photo")
        try message.attach(MediaAttachment(file: path, name: "photo.png"), to: store)
        try message.attach(MediaAttachment(file: path, name: "again.png"), to: store)
        let d = try #require(message.attachments.first)
        #expect(d.id == "a1" && d.type == "image/png" && d.size == file.count && d.name == "photo.png")
        #expect(message.attachments[1].id == "a2" && message.attachments[1].key != d.key && message.attachments[1].url != d.url)
        #expect(d.url.hasPrefix("http://127.0.0.1:8080/m/"))
        let name = String(d.url.dropFirst("http://127.0.0.1:8080/m/".count))
        #expect(name.count == 22)
        #expect(try FileManager.default.contentsOfDirectory(atPath: media).sorted() == message.attachments.map { String($0.url.split(separator: "/").last!) }.sorted())
        let object = [UInt8](try Data(contentsOf: URL(fileURLWithPath: media + "/" + name)))
        #expect(object.count == MediaObjectFormat.maximumObjectLength(size: file.count))
        let decryptor = try MediaObjectDecryptor(key: d.key, size: d.size, type: d.type)
        var out: [UInt8] = []
        try decryptor.consume(object) { out += $0 }
        try decryptor.finish { out += $0 }
        #expect(out == file)

        let device = makeDevice()
        let sealed = try makeSender().seal(message, to: device.record)
        #expect(sealed.payload.count <= 4096)
        let opened = try MessageOpener(keys: InMemoryKeys([device.pair]))
            .open(encryptedData: try #require(payloadObject(sealed)["ENCRYPTED_DATA"]?.stringValue), now: testNow)
        #expect(opened.body.attachments == message.attachments)
    }

    @Test("refusals name the file, its size or type, and the limit; nothing is left in the store")
    func refusals() throws {
        let dir = try temporaryDirectory("refuse")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let store = try DirectoryMediaStore(directory: dir, baseURL: "https://cdn.example/o")
        func message(_ attachment: MediaAttachment) -> String {
            do { _ = try MediaSealer.encrypt(attachment, id: "x", to: store); return "" } catch { return error.description }
        }
        let huge = MediaAttachment(source: .stream(size: 10_000_001, label: "big.png", next: { Issue.record("read"); return [] }), type: "image/png")
        let tooBig = message(huge)
        #expect(tooBig.contains("big.png") && tooBig.contains("10000001") && tooBig.contains("10000000"))
        let movie = message(MediaAttachment(source: .stream(size: 50_000_001, label: "m.mp4", next: { [] }), type: "video/mp4"))
        #expect(movie.contains("50000001") && movie.contains("50000000"))
        let webp = message(MediaAttachment(source: .stream(size: 10, label: "x.webp", next: { [] })))
        #expect(webp.contains("x.webp") && webp.contains("webp") && webp.contains("image/png"))
        let typed = message(MediaAttachment(source: .stream(size: 10, label: "y.bin", next: { [] }), type: "image/webp"))
        #expect(typed.contains("image/webp") && typed.contains("not supported"))
        #expect(message(MediaAttachment(source: .stream(size: 0, label: "e.png", next: { [] }))).contains("empty"))
        let wrong = pngBytes(100).map { $0 ^ 0xFF }
        let mismatch = message(MediaAttachment(source: .stream(size: 100, label: "w.png", next: { [UInt8]() }), type: nil))
        #expect(mismatch.contains("w.png"))
        nonisolated(unsafe) var sent = false
        let fake = message(MediaAttachment(source: .stream(size: 100, label: "fake.png", next: { if sent { return [] }; sent = true; return wrong })))
        #expect(fake.contains("does not start as a image/png"))
        #expect(message(MediaAttachment(file: dir + "/missing.jpg")).contains("missing.jpg"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).isEmpty)
        #expect(senderErrorCase { _ = try DirectoryMediaStore(directory: dir, baseURL: "http://cdn.example/o") } == "invalidAttachment")
        #expect(senderErrorCase { _ = try DirectoryMediaStore(directory: dir + "/nope", baseURL: "https://cdn.example/o") } == "invalidAttachment")
    }

    @Test("the payload limit with attachments says a descriptor costs about 200 bytes; four normal descriptors fit")
    func payloadBudget() throws {
        let device = makeDevice()
        var fits = SecretMessage(title: "Agent K", body: "Four photos")
        let store = MemoryStore()
        for _ in 0..<4 {
            let bytes = pngBytes(500)
            nonisolated(unsafe) var done = false
            try fits.attach(MediaAttachment(source: .stream(size: 500, label: "p.png", next: { if done { return [] }; done = true; return bytes })), to: store)
        }
        #expect(try makeSender().seal(fits, to: device.record).payload.count <= 4096)
        var tooMany = fits
        #expect(throws: SenderError.self) { try tooMany.attach(MediaAttachment(source: .stream(size: 1, label: "q.gif", next: { [] })), to: store) }
        tooMany.attachments = fits.attachments.map { d in
            var long = d
            long.url = "https://cdn.example/" + String(repeating: "u", count: 900)
            return long
        }
        let sender = try makeSender()
        do throws(SenderError) {
            _ = try sender.seal(tooMany, to: device.record)
            Issue.record("sealed an oversized payload")
        } catch {
            guard case .payloadTooLargeWithAttachments(_, 4096, 4) = error else { Issue.record("\(error)"); return }
            #expect(error.description.contains("about 200 bytes"))
        }
    }

    @Test("a JSONL line's attachments are read by their own function and encrypted into the store")
    func jsonlAttachments() throws {
        let dir = try temporaryDirectory("jsonl")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = pngBytes(300)
        try Data(file).write(to: URL(fileURLWithPath: dir + "/a.png"))
        let device = makeDevice()
        var line = JSONObject()
        line["to"] = .object(device.record.jsonObject)
        line["body"] = .string("hi")
        line["attachments"] = .array([.object(JSONObject([("file", .string(dir + "/a.png")), ("name", .string("A"))]))])
        let bytes = JSON.serialize(.object(line))
        line["attachments"] = .array([.object(JSONObject([("file", .string("a.png")), ("name", .string("A"))]))])
        let relative = JSON.serialize(.object(line))
        let source = try MediaSource(directory: dir)
        let store = MemoryStore()
        var out: [UInt8] = []
        #expect(JSONLSealer(sender: try makeSender(), mediaStore: store, mediaSource: source).process(line: relative.span, number: 1, into: &out) == .sealed)
        #expect(store.objects.count == 1)
        out = []
        #expect(JSONLSealer(sender: try makeSender(), mediaSource: source).process(line: relative.span, number: 1, into: &out) == .failed)
        #expect(String(decoding: out, as: UTF8.self).contains("--media-dir"))
        out = []
        #expect(JSONLSealer(sender: try makeSender(), mediaStore: store, mediaSource: source).process(line: bytes.span, number: 1, into: &out) == .failed)
        #expect(String(decoding: out, as: UTF8.self).contains("absolute path"))
        var bad = line
        bad["attachments"] = .array([.object(JSONObject([("path", .string("x"))]))])
        #expect(throws: SenderError.self) { try JSONLSealer.attachments(from: bad, in: source) }
        #expect(try JSONLSealer.attachments(from: line, in: source).first?.name == "A")
        #expect(throws: SenderError.self) { try JSONLSealer.attachments(from: line, in: nil) }
    }
}
