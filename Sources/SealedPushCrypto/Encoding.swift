#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// Strict RFC 4648 base64 and lowercase hexadecimal, as the wire format requires.
public enum Base64 {
    /// Standard-alphabet base64 with `=` padding (`sodium_bin2base64`, ORIGINAL variant).
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        encode(Array(bytes), variant: sodium_base64_VARIANT_ORIGINAL)
    }

    /// URL-safe base64 without padding, as used for default message ids.
    public static func encodeURLSafeNoPadding(_ bytes: some Collection<UInt8>) -> String {
        encode(Array(bytes), variant: sodium_base64_VARIANT_URLSAFE_NO_PADDING)
    }

    /// Decodes standard-alphabet base64 strictly: padding required, no whitespace, no
    /// non-canonical trailing bits. Anything else throws `CryptoError.invalidBase64`.
    public static func decode(_ text: String) throws(CryptoError) -> [UInt8] {
        var utf8 = Array(text.utf8)
        return try decode(utf8Bytes: &utf8)
    }

    /// Decodes base64 given as UTF-8 bytes (strict, as `decode(_:)`).
    public static func decode(utf8Bytes: inout [UInt8]) throws(CryptoError) -> [UInt8] {
        try decode(utf8Bytes: &utf8Bytes, variant: sodium_base64_VARIANT_ORIGINAL)
    }

    /// Decodes URL-safe base64 without padding (`-` and `_`, no `=`) strictly: no whitespace, no
    /// non-canonical trailing bits; anything else throws `CryptoError.invalidBase64`.
    public static func decodeURLSafeNoPadding(_ text: String) throws(CryptoError) -> [UInt8] {
        var utf8 = Array(text.utf8)
        return try decode(utf8Bytes: &utf8, variant: sodium_base64_VARIANT_URLSAFE_NO_PADDING)
    }

    private static func decode(utf8Bytes: inout [UInt8], variant: Int32) throws(CryptoError) -> [UInt8] {
        Sodium.ensureInitialized()
        let inputCount = utf8Bytes.count
        if inputCount == 0 { return [] }
        // libsodium 1.0.18 compares characters with `int` arithmetic that assumes values 0…255; a
        // byte ≥ 0x80 arrives as a negative `char`, and some of them (0xC3 among them, the lead
        // byte of "é") then decode as '+' or '/'. No base64 character is outside ASCII.
        guard !utf8Bytes.contains(where: { $0 >= 0x80 }) else { throw .invalidBase64 }
        // A NUL byte would end libsodium's scan early only if we passed b64_end; we pass NULL so it is rejected.
        let capacity = inputCount / 4 * 3 + 3
        var out = [UInt8](repeating: 0, count: capacity)
        var written = 0
        let rc = utf8Bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                input.withMemoryRebound(to: CChar.self) { chars in
                    sodium_base642bin(output.baseAddress!, capacity, chars.baseAddress, inputCount, nil, &written, nil, variant)
                }
            }
        }
        guard rc == 0 else { throw .invalidBase64 }
        out.removeLast(capacity - written)
        return out
    }

    /// Decodes public standard-alphabet base64 (an envelope, a public key) with exactly the rules of
    /// `decode(_:)`, in variable time.
    ///
    /// libsodium's decoder is constant-time, which costs about 7 ns a character; a ciphertext or a
    /// public key has no secret to protect, so this table decoder is used for them (the envelope's
    /// ≈ 420 characters drop from ≈ 3 µs to a fraction of that). Never use it for secret material.
    /// Accepts the same strings as `decode(_:)` and gives the same bytes (checked by a differential
    /// test): alphabet characters, then exactly the `=` padding their count needs, nothing after,
    /// and no non-zero bits left over.
    public static func decodePublic(_ text: String) throws(CryptoError) -> [UInt8] {
        var text = text
        guard let bytes = text.withUTF8({ decodePublic(utf8: $0) }) else { throw .invalidBase64 }
        return bytes
    }

    /// The decoded bytes, or `nil` where `decode(_:)` would throw.
    private static func decodePublic(utf8 input: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let n = input.count
        if n == 0 { return [] }
        return decodingTable.withUnsafeBufferPointer { table -> [UInt8]? in
            var failed = false
            let out = [UInt8](unsafeUninitializedCapacity: n / 4 * 3 + 3) { out, written in
                var o = 0
                var position = 0
                // The alphabet run, four characters (three bytes) at a time where possible.
                while position + 4 <= n {
                    let a = table[Int(input[position])], b = table[Int(input[position + 1])]
                    let c = table[Int(input[position + 2])], d = table[Int(input[position + 3])]
                    if (a | b | c | d) & 0x80 != 0 { break }
                    let group = UInt32(a) << 18 | UInt32(b) << 12 | UInt32(c) << 6 | UInt32(d)
                    out[o] = UInt8(truncatingIfNeeded: group >> 16)
                    out[o + 1] = UInt8(truncatingIfNeeded: group >> 8)
                    out[o + 2] = UInt8(truncatingIfNeeded: group)
                    o += 3
                    position += 4
                }
                var acc: UInt32 = 0
                var accLength = 0
                while position < n {
                    let value = table[Int(input[position])]
                    if value & 0x80 != 0 { break }
                    acc = acc << 6 | UInt32(value)
                    accLength += 6
                    if accLength >= 8 {
                        accLength -= 8
                        out[o] = UInt8(truncatingIfNeeded: acc >> UInt32(accLength))
                        o += 1
                    }
                    position += 1
                }
                written = o
                // As libsodium: at most 4 leftover bits, all zero; then exactly accLength / 2 '=' and the end.
                guard accLength <= 4, acc & ((1 << UInt32(accLength)) - 1) == 0 else { failed = true; return }
                var padding = accLength / 2
                while padding > 0 {
                    guard position < n, input[position] == UInt8(ascii: "=") else { failed = true; return }
                    padding -= 1
                    position += 1
                }
                if position != n { failed = true }
            }
            return failed ? nil : out
        }
    }

    /// Encodes public bytes (a ciphertext, a public key) as standard-alphabet base64 with `=` padding,
    /// exactly as `encode(_:)` does, in variable time.
    ///
    /// libsodium's encoder is constant-time, a few nanoseconds a character; an envelope of ≈ 300 bytes has
    /// no secret to protect, and every push encodes one. Never use it for secret material. Gives the same
    /// text as `encode(_:)` (checked by a differential test).
    public static func encodePublic(_ bytes: some Collection<UInt8>) -> String {
        let input = Array(bytes)
        let n = input.count
        if n == 0 { return "" }
        let length = (n + 2) / 3 * 4
        let alphabet = encodingAlphabet
        let text = [UInt8](unsafeUninitializedCapacity: length) { out, written in
            var i = 0, o = 0
            while i + 3 <= n {
                let group = UInt32(input[i]) << 16 | UInt32(input[i + 1]) << 8 | UInt32(input[i + 2])
                out[o] = alphabet[Int(group >> 18)]
                out[o + 1] = alphabet[Int(group >> 12 & 0x3F)]
                out[o + 2] = alphabet[Int(group >> 6 & 0x3F)]
                out[o + 3] = alphabet[Int(group & 0x3F)]
                i += 3
                o += 4
            }
            if i < n {
                let second = i + 1 < n ? UInt32(input[i + 1]) : 0
                let group = UInt32(input[i]) << 16 | second << 8
                out[o] = alphabet[Int(group >> 18)]
                out[o + 1] = alphabet[Int(group >> 12 & 0x3F)]
                out[o + 2] = i + 1 < n ? alphabet[Int(group >> 6 & 0x3F)] : UInt8(ascii: "=")
                out[o + 3] = UInt8(ascii: "=")
                o += 4
            }
            written = o
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The standard alphabet, by 6-bit value.
    private static let encodingAlphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// Standard alphabet → 6-bit value; 0xFF for every other byte.
    private static let decodingTable: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8.enumerated() {
            table[Int(character)] = UInt8(value)
        }
        return table
    }()

    private static func encode(_ bytes: [UInt8], variant: Int32) -> String {
        Sodium.ensureInitialized()
        let length = sodium_base64_encoded_len(bytes.count, variant)
        var out = [CChar](repeating: 0, count: length)
        bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = sodium_bin2base64(output.baseAddress!, length, input.baseAddress!, bytes.count, variant)
            }
        }
        return String(decoding: out.prefix(length - 1).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Lowercase hexadecimal for public values such as key ids.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Lowercase hex of `bytes`.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes lowercase (or, if `allowUppercase`, any-case) hex; throws `CryptoError.invalidHex`.
    public static func decode(_ text: String, allowUppercase: Bool = false) throws(CryptoError) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { throw .invalidHex }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index], allowUppercase), let low = nibble(utf8[index + 1], allowUppercase) else {
                throw .invalidHex
            }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8, _ upper: Bool) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F") where upper: return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
