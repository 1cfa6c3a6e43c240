/// A JSON value as the wire format reads and writes it.
///
/// The parser is strict where ambiguity could be exploited: duplicate object keys, invalid UTF-8,
/// lone surrogates, control characters in strings, trailing bytes and nesting deeper than a limit
/// are all errors. Integers without fraction or exponent that fit in 64 bits are `.int`; every
/// other number is `.double`.
public enum JSONValue: Sendable, Equatable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// An integer literal that fits in `Int64`.
    case int(Int64)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object, keys in document order.
    case object(JSONObject)

    /// The string, if this is a string.
    public var stringValue: String? { if case let .string(s) = self { return s } else { return nil } }
    /// The integer, if this is an integer literal.
    public var intValue: Int64? { if case let .int(i) = self { return i } else { return nil } }
    /// The object, if this is an object.
    public var objectValue: JSONObject? { if case let .object(o) = self { return o } else { return nil } }
}

/// A JSON object that keeps its members in order; keys are unique.
public struct JSONObject: Sendable, Equatable, Sequence {
    /// The members in order.
    public private(set) var members: [(key: String, value: JSONValue)]

    /// An empty object.
    public init() { members = [] }

    /// An object from key/value pairs; a later duplicate key replaces the earlier value.
    public init(_ pairs: [(String, JSONValue)]) {
        members = []
        for (k, v) in pairs { self[k] = v }
    }

    /// The value for `key`, or `nil`. Setting `nil` removes the member.
    public subscript(key: String) -> JSONValue? {
        get { members.first(where: { $0.key == key })?.value }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append((key, newValue))
            }
        }
    }

    /// The number of members.
    public var count: Int { members.count }

    /// Iterates the members in order.
    public func makeIterator() -> IndexingIterator<[(key: String, value: JSONValue)]> { members.makeIterator() }

    /// Members are compared in order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.members.count == rhs.members.count && zip(lhs.members, rhs.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
    }

    fileprivate mutating func reserveCapacity(_ n: Int) { members.reserveCapacity(n) }

    fileprivate mutating func appendUnchecked(_ key: String, _ value: JSONValue) { members.append((key, value)) }
}

/// Why a byte sequence is not acceptable JSON. The message never quotes the input.
public struct JSONError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong.
    public let reason: String
    /// The byte offset where parsing stopped.
    public let offset: Int
    /// The reason and the offset.
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// The strict JSON parser and the compact serializer used by the wire format.
public enum JSON {
    /// The deepest nesting accepted by default.
    public static let defaultMaxDepth = 64

    /// Parses one JSON value that must span all of `bytes`.
    public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        // `UnsafeBufferPointer.span` back-deploys to iOS 12.2; `Array.span` needs iOS 26.
        try bytes.withUnsafeBufferPointer { (buffer) throws(JSONError) -> JSONValue in try parse(buffer.span, maxDepth: maxDepth) }
    }

    /// Parses one JSON value that must span all of `bytes`.
    public static func parse(_ bytes: Span<UInt8>, maxDepth: Int = defaultMaxDepth) throws(JSONError) -> JSONValue {
        var index = 0
        let value = try parseValue(bytes, &index, depth: 0, maxDepth: maxDepth)
        skipWhitespace(bytes, &index)
        guard index == bytes.count else { throw JSONError(reason: "unexpected bytes after the value", offset: index) }
        return value
    }

    @inline(__always)
    private static func skipWhitespace(_ b: Span<UInt8>, _ i: inout Int) {
        while i < b.count {
            let c = b[i]
            guard c == 0x20 || c == 0x0a || c == 0x0d || c == 0x09 else { return }
            i += 1
        }
    }

    private static func parseValue(_ b: Span<UInt8>, _ i: inout Int, depth: Int, maxDepth: Int) throws(JSONError) -> JSONValue {
        skipWhitespace(b, &i)
        guard i < b.count else { throw JSONError(reason: "unexpected end of input", offset: i) }
        switch b[i] {
        case UInt8(ascii: "{"):
            guard depth < maxDepth else { throw JSONError(reason: "nesting deeper than \(maxDepth)", offset: i) }
            i += 1
            var object = JSONObject()
            object.reserveCapacity(8)  // payloads and bodies have a handful of members: no regrowth
            skipWhitespace(b, &i)
            if i < b.count, b[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
            while true {
                skipWhitespace(b, &i)
                guard i < b.count, b[i] == UInt8(ascii: "\"") else { throw JSONError(reason: "expected a string key", offset: i) }
                let keyOffset = i
                let key = try parseString(b, &i)
                if object.members.contains(where: { $0.key == key }) {
                    throw JSONError(reason: "duplicate object key", offset: keyOffset)
                }
                skipWhitespace(b, &i)
                guard i < b.count, b[i] == UInt8(ascii: ":") else { throw JSONError(reason: "expected ':'", offset: i) }
                i += 1
                let value = try parseValue(b, &i, depth: depth + 1, maxDepth: maxDepth)
                object.appendUnchecked(key, value)
                skipWhitespace(b, &i)
                guard i < b.count else { throw JSONError(reason: "unexpected end of input in an object", offset: i) }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "}") { i += 1; return .object(object) }
                throw JSONError(reason: "expected ',' or '}'", offset: i)
            }
        case UInt8(ascii: "["):
            guard depth < maxDepth else { throw JSONError(reason: "nesting deeper than \(maxDepth)", offset: i) }
            i += 1
            var array: [JSONValue] = []
            skipWhitespace(b, &i)
            if i < b.count, b[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
            while true {
                array.append(try parseValue(b, &i, depth: depth + 1, maxDepth: maxDepth))
                skipWhitespace(b, &i)
                guard i < b.count else { throw JSONError(reason: "unexpected end of input in an array", offset: i) }
                if b[i] == UInt8(ascii: ",") { i += 1; continue }
                if b[i] == UInt8(ascii: "]") { i += 1; return .array(array) }
                throw JSONError(reason: "expected ',' or ']'", offset: i)
            }
        case UInt8(ascii: "\""):
            return .string(try parseString(b, &i))
        case UInt8(ascii: "t"):
            try expectLiteral(b, &i, "true"); return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral(b, &i, "false"); return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral(b, &i, "null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return try parseNumber(b, &i)
        default:
            throw JSONError(reason: "unexpected character", offset: i)
        }
    }

    private static func expectLiteral(_ b: Span<UInt8>, _ i: inout Int, _ literal: StaticString) throws(JSONError) {
        let start = i
        let count = literal.utf8CodeUnitCount
        guard b.count - i >= count else { throw JSONError(reason: "invalid literal", offset: start) }
        for k in 0..<count where b[i + k] != literal.utf8Start[k] {
            throw JSONError(reason: "invalid literal", offset: start)
        }
        i += count
    }

    private static func isDigit(_ c: UInt8) -> Bool { c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9") }

    private static func parseNumber(_ b: Span<UInt8>, _ i: inout Int) throws(JSONError) -> JSONValue {
        let start = i
        var negative = false
        if b[i] == UInt8(ascii: "-") { negative = true; i += 1 }
        guard i < b.count, isDigit(b[i]) else { throw JSONError(reason: "invalid number", offset: start) }
        var integral = true
        var magnitude: UInt64 = 0
        var overflow = false
        if b[i] == UInt8(ascii: "0") {
            i += 1
            if i < b.count, isDigit(b[i]) { throw JSONError(reason: "leading zero in a number", offset: start) }
        } else {
            while i < b.count, isDigit(b[i]) {
                let (m1, o1) = magnitude.multipliedReportingOverflow(by: 10)
                let (m2, o2) = m1.addingReportingOverflow(UInt64(b[i] - UInt8(ascii: "0")))
                if o1 || o2 { overflow = true }
                magnitude = m2
                i += 1
            }
        }
        if i < b.count, b[i] == UInt8(ascii: ".") {
            integral = false
            i += 1
            guard i < b.count, isDigit(b[i]) else { throw JSONError(reason: "invalid fraction", offset: start) }
            while i < b.count, isDigit(b[i]) { i += 1 }
        }
        if i < b.count, b[i] == UInt8(ascii: "e") || b[i] == UInt8(ascii: "E") {
            integral = false
            i += 1
            if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") { i += 1 }
            guard i < b.count, isDigit(b[i]) else { throw JSONError(reason: "invalid exponent", offset: start) }
            while i < b.count, isDigit(b[i]) { i += 1 }
        }
        if integral && !overflow {
            if negative {
                if magnitude <= UInt64(Int64.max) + 1 { return .int(magnitude == UInt64(Int64.max) + 1 ? Int64.min : -Int64(magnitude)) }
            } else if magnitude <= UInt64(Int64.max) {
                return .int(Int64(magnitude))
            }
        }
        var text = ""
        text.reserveCapacity(i - start)
        for k in start..<i { text.unicodeScalars.append(Unicode.Scalar(b[k])) }
        guard let double = Double(text), double.isFinite else { throw JSONError(reason: "number out of range", offset: start) }
        return .double(double)
    }

    private static func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(c - UInt8(ascii: "A") + 10)
        default: return nil
        }
    }

    private static func parseHex4(_ b: Span<UInt8>, _ i: inout Int) throws(JSONError) -> UInt32 {
        guard b.count - i >= 4 else { throw JSONError(reason: "truncated \\u escape", offset: i) }
        var v: UInt32 = 0
        for _ in 0..<4 {
            guard let h = hexValue(b[i]) else { throw JSONError(reason: "invalid \\u escape", offset: i) }
            v = v << 4 | h
            i += 1
        }
        return v
    }

    private static func parseString(_ b: Span<UInt8>, _ i: inout Int) throws(JSONError) -> String {
        let start = i
        i += 1  // opening quote
        // Fast path: a string without escapes (every key and the envelope): one scan and one validating
        // copy. Anything else goes through the general loop below.
        var scan = i
        let count = b.count
        // Eight bytes at a time while none of them is '"', '\\' or a control character (`SWAR`).
        let raw = b.bytes
        while scan + 8 <= count {
            let word = raw.unsafeLoadUnaligned(fromByteOffset: scan, as: UInt64.self)
            if SWAR.hasQuoteBackslashOrControl(word) { break }
            scan += 8
        }
        while scan < count {
            let c = b[unchecked: scan]  // scan < count == b.count
            if c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") || c < 0x20 { break }
            scan += 1
        }
        if scan < b.count, b[scan] == UInt8(ascii: "\"") {
            let content = b.extracting(i..<scan)
            i = scan + 1
            // Validated here (Unicode Table 3-7, ASCII eight bytes at a time), then one copy that repairs
            // nothing. `UTF8Span` would need iOS 26, and `String(validating:as:)` calls an unspecialized
            // generic that builds type metadata on every string (about 7 k instructions per message).
            guard let text = UTF8Validation.string(content) else {
                throw JSONError(reason: "invalid UTF-8 in a string", offset: start)
            }
            return text
        }
        // The general loop: reached only for a string that has an escape (the scan above stopped on a
        // '\\'), or to report the control byte or the missing quote the scan stopped on.
        var utf8: [UInt8] = []
        utf8.reserveCapacity(scan - i + 16)
        var plainStart = i
        while true {
            guard i < b.count else { throw JSONError(reason: "unterminated string", offset: start) }
            let c = b[i]
            if c == UInt8(ascii: "\"") { break }
            if c < 0x20 { throw JSONError(reason: "control character in a string", offset: i) }
            if c == UInt8(ascii: "\\") {
                for k in plainStart..<i { utf8.append(b[k]) }
                i += 1
                guard i < b.count else { throw JSONError(reason: "unterminated escape", offset: i) }
                let e = b[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""): utf8.append(0x22)
                case UInt8(ascii: "\\"): utf8.append(0x5c)
                case UInt8(ascii: "/"): utf8.append(0x2f)
                case UInt8(ascii: "b"): utf8.append(0x08)
                case UInt8(ascii: "f"): utf8.append(0x0c)
                case UInt8(ascii: "n"): utf8.append(0x0a)
                case UInt8(ascii: "r"): utf8.append(0x0d)
                case UInt8(ascii: "t"): utf8.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4(b, &i)
                    if scalar >= 0xD800 && scalar <= 0xDBFF {
                        guard b.count - i >= 2, b[i] == UInt8(ascii: "\\"), b[i + 1] == UInt8(ascii: "u") else {
                            throw JSONError(reason: "lone high surrogate", offset: i)
                        }
                        i += 2
                        let low = try parseHex4(b, &i)
                        guard low >= 0xDC00 && low <= 0xDFFF else { throw JSONError(reason: "invalid low surrogate", offset: i) }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if scalar >= 0xDC00 && scalar <= 0xDFFF {
                        throw JSONError(reason: "lone low surrogate", offset: i)
                    }
                    // Scalar is a valid Unicode scalar value here (surrogates handled above).
                    utf8.append(contentsOf: String(Character(Unicode.Scalar(scalar)!)).utf8)
                default:
                    throw JSONError(reason: "invalid escape", offset: i - 1)
                }
                plainStart = i
                continue
            }
            i += 1
        }
        let end = i
        i += 1  // closing quote
        for k in plainStart..<end { utf8.append(b[k]) }
        guard let text = utf8.withUnsafeBufferPointer({ UTF8Validation.string($0.span) }) else {
            throw JSONError(reason: "invalid UTF-8 in a string", offset: start)
        }
        return text
    }

    // MARK: - Serializing

    /// Compact UTF-8 JSON for `value`, members in their stored order.
    public static func serialize(_ value: JSONValue) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(value, into: &out)
        return out
    }

    /// Appends compact UTF-8 JSON for `value` to `out`.
    public static func write(_ value: JSONValue, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case let .bool(b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case let .int(i): out.append(contentsOf: String(i).utf8)
        case let .double(d): out.append(contentsOf: (d.isFinite ? "\(d)" : "null").utf8)
        case let .string(s): writeString(s, into: &out)
        case let .array(a):
            out.append(UInt8(ascii: "["))
            for (n, element) in a.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case let .object(o):
            out.append(UInt8(ascii: "{"))
            for (n, member) in o.members.enumerated() {
                if n > 0 { out.append(UInt8(ascii: ",")) }
                writeString(member.key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(member.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// Appends `s` as a JSON string literal: quotes, backslashes and control characters escaped,
    /// everything else as raw UTF-8.
    public static func writeString(_ s: String, into out: inout [UInt8]) {
        let utf8 = s.utf8
        out.reserveCapacity(out.count + utf8.count + 2)
        out.append(UInt8(ascii: "\""))
        // Runs of bytes that need no escape are appended whole (one copy for a base64 member, not one append per byte).
        var run = utf8.startIndex
        var i = run
        while i != utf8.endIndex {
            let c = utf8[i]
            if c < 0x20 || c == 0x22 || c == 0x5c {
                out.append(contentsOf: utf8[run..<i])
                switch c {
                case 0x22: out.append(0x5c); out.append(0x22)
                case 0x5c: out.append(0x5c); out.append(0x5c)
                case 0x0a: out.append(0x5c); out.append(UInt8(ascii: "n"))
                case 0x0d: out.append(0x5c); out.append(UInt8(ascii: "r"))
                case 0x09: out.append(0x5c); out.append(UInt8(ascii: "t"))
                default:
                    out.append(contentsOf: "\\u00".utf8)
                    out.append(hexDigits[Int(c >> 4)])
                    out.append(hexDigits[Int(c & 0xf)])
                }
                run = utf8.index(after: i)
            }
            i = utf8.index(after: i)
        }
        out.append(contentsOf: utf8[run..<utf8.endIndex])
        out.append(UInt8(ascii: "\""))
    }
}

/// Strict UTF-8 validation (Unicode Table 3-7: no overlong forms, no surrogates, nothing above
/// U+10FFFF), with the same acceptance as `String(validating:as:)` (checked by a differential test).
enum UTF8Validation {
    /// The string `bytes` encode, or `nil` if they are not well-formed UTF-8.
    static func string(_ bytes: Span<UInt8>) -> String? {
        guard isValid(bytes) else { return nil }
        return bytes.withUnsafeBufferPointer { String(decoding: $0, as: UTF8.self) }  // valid: nothing is repaired
    }

    /// Whether `b` is well-formed UTF-8.
    static func isValid(_ b: Span<UInt8>) -> Bool {
        let n = b.count
        let raw = b.bytes
        var i = 0
        while i < n {
            // ASCII, eight bytes at a time.
            while i + 8 <= n, raw.unsafeLoadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 { i += 8 }
            guard i < n else { return true }
            let c0 = b[i]
            if c0 < 0x80 { i += 1; continue }
            let length: Int
            var low: UInt8 = 0x80, high: UInt8 = 0xBF  // the second byte's range
            switch c0 {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; high = 0x9F
            case 0xF0: length = 4; low = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; high = 0x8F
            default: return false
            }
            guard n - i >= length else { return false }
            let c1 = b[i + 1]
            guard c1 >= low && c1 <= high else { return false }
            for k in 2..<length where b[i + k] & 0xC0 != 0x80 { return false }
            i += length
        }
        return true
    }
}

/// Word-at-a-time byte tests for the string scan.
enum SWAR {
    private static let ones: UInt64 = 0x0101_0101_0101_0101
    private static let highs: UInt64 = 0x8080_8080_8080_8080

    /// Whether any byte of `word` is zero (the classic `(v - 0x01…) & ~v & 0x80…`: exact for "any").
    @inline(__always)
    static func hasZeroByte(_ word: UInt64) -> Bool { (word &- ones) & ~word & highs != 0 }

    /// Whether any byte of `word` is `"` (0x22), `\` (0x5C) or below 0x20. Exact for "any": a byte
    /// ≥ 0x80 never counts as below 0x20 (its own high bit masks it out), and a borrow can only
    /// mark bytes above one that already matched.
    @inline(__always)
    static func hasQuoteBackslashOrControl(_ word: UInt64) -> Bool {
        let belowSpace = (word &- ones &* 0x20) & ~word & highs
        return belowSpace != 0 || hasZeroByte(word ^ (ones &* 0x22)) || hasZeroByte(word ^ (ones &* 0x5C))
    }
}
