import SealedPushSender
import SealedPushTestSupport
import Testing

/// One rule for the lines of both batch paths, whatever the chunking.
@Suite("Sender: JSONL line splitting")
struct LineSplitterTests {
    /// Splits `input` fed in chunks of `chunk` bytes; lines as text, too-long ones as "!N".
    static func split(_ input: String, chunk: Int, max: Int = 8) -> [String] {
        var splitter = JSONLLineSplitter(maxLineBytes: max)
        let bytes = Array(input.utf8)
        var out: [String] = []
        func take(_ items: [JSONLLineSplitter.Item]) {
            for item in items {
                switch item {
                case let .line(n, range): out.append("\(n):" + String(decoding: splitter.buffer[range], as: UTF8.self))
                case let .tooLong(n): out.append("!\(n)")
                }
            }
        }
        var i = 0
        while i < bytes.count {
            take(splitter.feed(Array(bytes[i..<min(i + chunk, bytes.count)])))
            i += chunk
        }
        take(splitter.feed([]))
        return out
    }

    @Test("the same lines whatever the chunk size", arguments: [1, 2, 3, 7, 64])
    func chunking(chunk: Int) {
        #expect(Self.split("a\n\nbb\nccc", chunk: chunk) == ["1:a", "2:", "3:bb", "4:ccc"])
        #expect(Self.split("12345678\n123456789\nok\n", chunk: chunk) == ["1:12345678", "!2", "3:ok"])
        #expect(Self.split("123456789012345678901234\nafter", chunk: chunk) == ["!1", "2:after"])
        #expect(Self.split("123456789", chunk: chunk) == ["!1"])  // a too-long last line without a newline
        #expect(Self.split("", chunk: chunk) == [])
        #expect(Self.split("\n", chunk: chunk) == ["1:"])
    }

    @Test func randomInputsAgreeAcrossChunkings() {
        var generator = SeededGenerator.forTest("line splitter chunkings")
        for _ in 0..<200 {
            let length = Int.random(in: 0...60, using: &generator)
            let text = String((0..<length).map { _ in ["a", "b", "\n"].randomElement(using: &generator)! })
            let whole = Self.split(text, chunk: max(1, text.utf8.count))
            for chunk in [1, 2, 5] {
                #expect(Self.split(text, chunk: chunk) == whole, "input \(text.debugDescription)")
            }
        }
    }
}
