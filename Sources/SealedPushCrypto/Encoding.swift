import CSodium

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
        Sodium.ensureInitialized()
        let inputCount = utf8Bytes.count
        if inputCount == 0 { return [] }
        // A NUL byte would end libsodium's scan early only if we passed b64_end; we pass NULL so it is rejected.
        let capacity = inputCount / 4 * 3 + 3
        var out = [UInt8](repeating: 0, count: capacity)
        var written = 0
        let rc = utf8Bytes.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                input.withMemoryRebound(to: CChar.self) { chars in
                    sodium_base642bin(output.baseAddress!, capacity, chars.baseAddress, inputCount, nil, &written, nil,
                                      sodium_base64_VARIANT_ORIGINAL)
                }
            }
        }
        guard rc == 0 else { throw .invalidBase64 }
        out.removeLast(capacity - written)
        return out
    }

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
