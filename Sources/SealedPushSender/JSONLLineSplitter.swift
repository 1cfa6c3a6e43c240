/// Splits a byte stream into JSON Lines, with one rule for both batch paths (`seal --batch`, `send --batch`):
/// lines end at `\n`; a last line without one still counts; a line longer than `maxLineBytes` (its newline
/// not counted) is reported once, as `.tooLong`, and its bytes are skipped up to its newline; every line,
/// blank or not, takes a number, counting from 1.
///
/// Feed it the input in chunks of any size; the items of each call refer to `buffer`, valid until the next call.
public struct JSONLLineSplitter: Sendable {
    /// One complete line, or the report of one that was too long.
    public enum Item: Sendable, Equatable {
        /// Line `number`: its bytes are `buffer[range]` (newline excluded).
        case line(number: Int, range: Range<Int>)
        /// Line `number` was longer than `maxLineBytes`; it is skipped.
        case tooLong(number: Int)
    }

    /// The longest line accepted, in bytes.
    public let maxLineBytes: Int
    /// The bytes the last call's items point into.
    public private(set) var buffer: [UInt8] = []
    private var consumed = 0
    private var number = 0
    private var skipping = false
    private var finished = false

    /// A splitter refusing lines over `maxLineBytes` (default 1 MiB).
    public init(maxLineBytes: Int = 1 << 20) {
        self.maxLineBytes = maxLineBytes
    }

    /// Appends `chunk` (an empty chunk marks the end of the input) and returns the lines it completed.
    public mutating func feed(_ chunk: [UInt8]) -> [Item] {
        precondition(!finished, "fed after the end of input")
        if consumed > 0 {
            buffer.removeSubrange(0..<consumed)
            consumed = 0
        }
        let atEnd = chunk.isEmpty
        buffer.append(contentsOf: chunk)
        var items: [Item] = []
        var start = 0
        while let newline = buffer[start...].firstIndex(of: 0x0a) {
            if skipping {
                skipping = false  // the tail of a line already reported (and numbered)
            } else {
                number += 1
                items.append(newline - start > maxLineBytes ? .tooLong(number: number) : .line(number: number, range: start..<newline))
            }
            start = newline + 1
        }
        if atEnd {
            finished = true
            if start < buffer.count, !skipping {
                number += 1
                items.append(buffer.count - start > maxLineBytes ? .tooLong(number: number) : .line(number: number, range: start..<buffer.count))
            }
            start = buffer.count
        } else if !skipping, buffer.count - start > maxLineBytes {
            // Too long already, and not ended: report it now and drop its bytes as they come.
            number += 1
            items.append(.tooLong(number: number))
            skipping = true
            start = buffer.count
        } else if skipping {
            start = buffer.count
        }
        consumed = start
        return items
    }
}
