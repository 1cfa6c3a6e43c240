import Foundation
import SealedPushSender
import SealedPushTestSupport
import SealedPushWire
import Testing

/// Security review #22, finding 1: a batch line chooses both its recipient (`to`) and its files
/// (`attachments[].file`), so without confinement any file the sender can read goes to any device.
@Suite("Review #22: batch attachment files stay inside a media source directory", .timeLimit(.minutes(10)))
struct MediaSourceReviewTests {
    /// A batch line to a fresh device attaching `file`.
    static func line(file: String) -> [UInt8] {
        var line = JSONObject()
        line["to"] = .object(makeDevice().record.jsonObject)
        line["body"] = .string("hi")
        line["attachments"] = .array([.object(JSONObject([("file", .string(file))]))])
        return JSON.serialize(.object(line))
    }

    @Test("without a media source directory a batch line's attachment file is refused, absolute or relative, and nothing is encrypted")
    func batchNeedsSource() throws {
        let outside = try temporaryDirectory("outside")
        defer { try? FileManager.default.removeItem(atPath: outside) }
        try Data(pngBytes(300)).write(to: URL(fileURLWithPath: outside + "/secret.png"))
        let cwd = FileManager.default.currentDirectoryPath
        let relative = String(repeating: "../", count: cwd.split(separator: "/").count) + outside.dropFirst()
        for file in [outside + "/secret.png", relative] {
            let store = MemoryStore()
            var out: [UInt8] = []
            let outcome = JSONLSealer(sender: try makeSender(), mediaStore: store).process(line: Self.line(file: file).span, number: 1, into: &out)
            #expect(outcome == .failed, "\(file)")
            #expect(store.objects.isEmpty)
            let text = String(decoding: out, as: UTF8.self)
            #expect(text.contains("media source directory") && !text.contains("payload"), "\(text)")
        }
    }
}

@Suite("MediaSource: attachment files confined to a directory", .timeLimit(.minutes(10)))
struct MediaSourceTests {
    /// A root with `photo.png`, `sub/inner.png`, links in and out, a FIFO and a directory; and a file outside it.
    struct World {
        let root: String
        let outside: String
        init() throws {
            root = try temporaryDirectory("source")
            outside = try temporaryDirectory("outside")
            let fm = FileManager.default
            try Data(pngBytes(300)).write(to: URL(fileURLWithPath: root + "/photo.png"))
            try fm.createDirectory(atPath: root + "/sub", withIntermediateDirectories: false)
            try Data(pngBytes(200)).write(to: URL(fileURLWithPath: root + "/sub/inner.png"))
            try Data(pngBytes(100)).write(to: URL(fileURLWithPath: outside + "/secret.png"))
            try fm.createSymbolicLink(atPath: root + "/link.png", withDestinationPath: outside + "/secret.png")
            try fm.createSymbolicLink(atPath: root + "/inside-link.png", withDestinationPath: root + "/photo.png")
            try fm.createSymbolicLink(atPath: root + "/out", withDestinationPath: outside)
            try fm.createSymbolicLink(atPath: root + "/in", withDestinationPath: root + "/sub")
            try fm.createDirectory(atPath: root + "/dir.png", withIntermediateDirectories: false)
            #expect(mkfifo(root + "/fifo.png", 0o600) == 0)
        }
        func remove() {
            try? FileManager.default.removeItem(atPath: root)
            try? FileManager.default.removeItem(atPath: outside)
        }
    }

    func refusal(_ source: MediaSource, _ path: String) -> String? {
        do { _ = try source.open(path); return nil } catch { return error.description }
    }

    @Test("relative paths inside the root open, through in-root directory links too; the reader reads the file")
    func inside() throws {
        let world = try World()
        defer { world.remove() }
        let source = try MediaSource(directory: world.root)
        #expect(try source.open("photo.png").size == 300)
        #expect(try source.open("./sub/inner.png").size == 200)
        #expect(try source.open("sub/../photo.png").size == 300)
        #expect(try source.open("sub//inner.png").size == 200)
        #expect(try source.open("in/inner.png").size == 200)
        // A root given through a symbolic link works the same.
        let linkedRoot = world.outside + "/root-link"
        try FileManager.default.createSymbolicLink(atPath: linkedRoot, withDestinationPath: world.root)
        #expect(try MediaSource(directory: linkedRoot).open("photo.png").size == 300)
    }

    @Test("absolute paths, .. out of the root, links out of it, a linked file, a FIFO and a directory are refused, naming the path")
    func outside() throws {
        let world = try World()
        defer { world.remove() }
        let source = try MediaSource(directory: world.root)
        let cases: [(String, String)] = [
            (world.outside + "/secret.png", "absolute path"), (world.root + "/photo.png", "absolute path"),
            ("../" + world.outside.split(separator: "/").last! + "/secret.png", "outside"), ("sub/../../x.png", "outside"),
            ("out/secret.png", "outside the media source directory through a symbolic link"),
            ("link.png", "symbolic link"), ("inside-link.png", "symbolic link"),
            ("fifo.png", "not a regular file"), ("dir.png", "not a regular file"), ("sub/..", "directory itself"),
            ("missing.png", "cannot be read"), ("", "empty"),
        ]
        for (path, why) in cases {
            let message = refusal(source, path)
            #expect(message?.contains(why) == true, "\(path): \(message ?? "opened")")
            #expect(message?.contains(world.root) == true, "\(path)")
        }
        #expect(throws: SenderError.self) { _ = try MediaSource(directory: world.root + "/missing") }
        #expect(throws: SenderError.self) { _ = try MediaSource(directory: world.root + "/photo.png") }
    }

    @Test("a confined attachment is encrypted like any other; an escaping one leaves nothing in the store")
    func sealer() throws {
        let world = try World()
        defer { world.remove() }
        let source = try MediaSource(directory: world.root)
        let store = MemoryStore()
        let d = try MediaSealer.encrypt(MediaAttachment(file: "sub/inner.png", in: source, name: "inner.png"), id: "a1", to: store)
        #expect(d.size == 200 && d.type == "image/png" && store.objects.count == 1)
        #expect(throws: SenderError.self) { _ = try MediaSealer.encrypt(MediaAttachment(file: "link.png", in: source), id: "a2", to: store) }
        #expect(store.objects.count == 1)
    }
}
