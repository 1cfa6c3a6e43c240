import Testing
import SealedPushTestSupport
@testable import SealedPushWire

@Suite("JSON strings: the fast path, the escape path and UTF-8")
struct JSONStringTests {
    /// What the parser makes of `bytes` as a JSON string, through the fast path (plain) or the
    /// general loop (`\n` prepended, so the string has an escape): the text, or nil when refused.
    static func parsed(_ bytes: [UInt8], escaped: Bool) -> String? {
        let body = escaped ? Array(#"\n"#.utf8) + bytes : bytes
        guard case let .string(text)? = try? JSON.parse([0x22] + body + [0x22]) else { return nil }
        return escaped ? String(text.dropFirst()) : text
    }

    /// The reference: the standard library's validating decoder (nil for invalid UTF-8).
    static func reference(_ bytes: [UInt8]) -> String? { String(validating: bytes, as: UTF8.self) }

    @Test("both string paths accept exactly what String(validating:) accepts: named sequences")
    func namedSequences() {
        let cases: [[UInt8]] = [
            [], [0x41], [0x7F], [0x80], [0xBF], [0xC0, 0x80], [0xC1, 0xBF], [0xC2, 0x80], [0xDF, 0xBF], [0xC2],
            [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xED, 0xA0, 0x80],
            [0xED, 0xBF, 0xBF], [0xEE, 0x80, 0x80], [0xEF, 0xBF, 0xBF], [0xE1, 0x80], [0xF0, 0x8F, 0xBF, 0xBF],
            [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF], [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80],
            [0xF8, 0x88, 0x80, 0x80, 0x80], [0xFE], [0xFF], [0xF0, 0x9F, 0x98], [0xF0, 0x9F, 0x98, 0x80],
            [0x41, 0xE2, 0x82, 0xAC, 0x42], [0xE2, 0x82, 0xAC, 0x80], [0xE2, 0x28, 0xA1],
        ]
        for bytes in cases {
            #expect(Self.parsed(bytes, escaped: false) == Self.reference(bytes), "plain \(bytes)")
            #expect(Self.parsed(bytes, escaped: true) == Self.reference(bytes), "escaped \(bytes)")
        }
    }

    /// The writer as it was, a byte at a time: the reference the run-copying writer must match.
    static func writtenByteByByte(_ s: String) -> [UInt8] {
        var out: [UInt8] = [0x22]
        for c in s.utf8 {
            switch c {
            case 0x22: out += [0x5c, 0x22]
            case 0x5c: out += [0x5c, 0x5c]
            case 0x0a: out += [0x5c, UInt8(ascii: "n")]
            case 0x0d: out += [0x5c, UInt8(ascii: "r")]
            case 0x09: out += [0x5c, UInt8(ascii: "t")]
            case 0..<0x20: out += Array("\\u00".utf8) + [Array("0123456789abcdef".utf8)[Int(c >> 4)], Array("0123456789abcdef".utf8)[Int(c & 0xf)]]
            default: out.append(c)
            }
        }
        return out + [0x22]
    }

    @Test("the writer matches the byte-at-a-time reference and parses back, on 20 000 random strings")
    func writerRoundTrips() throws {
        var rng = SeededGenerator.forTest()
        let pieces: [String] = ["a", "Z", "0", "\"", "\\", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1f}", " ", "é", "€", "😀", "/", "\u{7f}"]
        for n in 0..<20_000 {
            let length = Int.random(in: 0...24, using: &rng)
            let text = (0..<length).map { _ in pieces.randomElement(using: &rng)! }.joined()
            var out: [UInt8] = n % 2 == 0 ? [] : Array("prefix".utf8)
            let before = out.count
            JSON.writeString(text, into: &out)
            #expect(Array(out[before...]) == Self.writtenByteByByte(text), "\(Array(text.utf8))")
            guard case let .string(back)? = try? JSON.parse(Array(out[before...])) else {
                Issue.record("did not parse back: \(Array(text.utf8))")
                continue
            }
            #expect(back == text)
        }
    }

    @Test("both string paths agree with String(validating:) on 100 000 random byte strings")
    func randomBytes() {
        var rng = SeededGenerator.forTest()
        // Bytes biased towards lead and continuation bytes so that most strings are near-valid; no
        // '"', '\\' or control bytes, which end or change a JSON string.
        let interesting: [UInt8] = [0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1,
                                    0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF3, 0xF4, 0xF5, 0xFF]
        var mismatches: [[UInt8]] = []
        for _ in 0..<100_000 {
            let length = Int.random(in: 0...12, using: &rng)
            let bytes = (0..<length).map { _ -> UInt8 in
                if Bool.random(using: &rng) { return interesting.randomElement(using: &rng)! }
                var b: UInt8
                repeat { b = UInt8.random(in: 0x20...0xFF, using: &rng) } while b == 0x22 || b == 0x5C
                return b
            }
            let expected = Self.reference(bytes)
            if Self.parsed(bytes, escaped: false) != expected || Self.parsed(bytes, escaped: true) != expected {
                mismatches.append(bytes)
            }
        }
        #expect(mismatches.isEmpty, "first mismatches: \(mismatches.prefix(5))")
    }

    @Test("strings with and without escapes, ASCII and not, parse to the same values", arguments: [
        (#""plain ascii""#, "plain ascii"),
        (#""é in the middle""#, "é in the middle"),
        (#""emoji 😀""#, "emoji 😀"),
        (#""escaped \"quote\" and \\ and \/""#, #"escaped "quote" and \ and /"#),
        (#""\u00e9 escaped then é raw""#, "é escaped then é raw"),
        (#""\ud83d\ude00""#, "😀"),
        (#""""#, ""),
    ])
    func strings(json: String, expected: String) throws {
        #expect(try JSON.parse(Array(json.utf8)) == .string(expected))
    }

    @Test("refusals are the same on both paths: invalid UTF-8, control characters, unterminated")
    func refusals() {
        let cases: [([UInt8], String)] = [
            ([0x22, 0xC3, 0x28, 0x22], "invalid UTF-8 in a string"),
            ([0x22, 0x5C, 0x6E, 0xC3, 0x28, 0x22], "invalid UTF-8 in a string"),
            ([0x22, 0xED, 0xA0, 0x80, 0x22], "invalid UTF-8 in a string"),
            ([0x22, 0x41, 0x0A, 0x22], "control character in a string"),
            ([0x22, 0x41, 0x00, 0x22], "control character in a string"),
            ([0x22, 0x41, 0x42], "unterminated string"),
            ([0x22, 0xC3, 0xA9], "unterminated string"),
        ]
        for (bytes, reason) in cases {
            #expect(throws: JSONError.self) { try JSON.parse(bytes) }
            do { _ = try JSON.parse(bytes) } catch { #expect(error.reason == reason, "\(bytes)") }
        }
    }
}

extension JSONStringTests {
    @Test("SWAR: the word test says yes exactly when one of its eight bytes is '\"', '\\\\' or a control byte")
    func swarWordTest() {
        var rng = SeededGenerator.forTest()
        let interesting: [UInt8] = [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7F, 0x80, 0x9F, 0xA0, 0xA2, 0xDC, 0xFF]
        for _ in 0..<200_000 {
            let bytes = (0..<8).map { _ in
                Int.random(in: 0..<4, using: &rng) == 0 ? interesting.randomElement(using: &rng)! : UInt8.random(in: 0x20...0xFF, using: &rng)
            }
            let word = bytes.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
            let expected = bytes.contains { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 }
            #expect(SWAR.hasQuoteBackslashOrControl(word) == expected, "\(bytes)")
        }
    }

    @Test("strings of every length 0…40 with a special byte at every position parse as the byte-wise loop would")
    func everyPosition() throws {
        for length in 0...40 {
            let plain = String(repeating: "a", count: length)
            #expect(try JSON.parse(Array("\"\(plain)\"".utf8)) == .string(plain))
            for position in 0..<length {
                var quoted = Array(plain.utf8)
                quoted[position] = UInt8(ascii: "\\")
                quoted.insert(UInt8(ascii: "n"), at: position + 1)
                var expected = Array(plain.utf8)
                expected[position] = 0x0A
                expected.insert(UInt8(ascii: "a"), at: position + 1)
                expected.removeLast()
                #expect(try JSON.parse([0x22] + quoted + [0x22]) == .string(String(decoding: expected, as: UTF8.self)), "\(length) \(position)")
                var control = Array(plain.utf8)
                control[position] = 0x01
                #expect(throws: JSONError.self) { try JSON.parse([0x22] + control + [0x22]) }
            }
        }
    }
}
