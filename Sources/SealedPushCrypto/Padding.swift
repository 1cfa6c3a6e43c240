#if canImport(Clibsodium)
import Clibsodium  // iOS and macOS, AppleSodium trait: swift-sodium's libsodium
#elseif canImport(CSodium)
import CSodium  // Linux: the system libsodium
#endif  // neither: Sodium.swift stops the build with #error, naming the AppleSodium trait

/// ISO/IEC 7816-4 padding: data, one `0x80` byte, then zero bytes up to the padded length.
public enum ISO7816Padding {
    /// Pads `data` to exactly `paddedLength` bytes; `paddedLength` must exceed `data.count`.
    public static func pad(_ data: SecureBytes, to paddedLength: Int) throws(CryptoError) -> SecureBytes {
        guard paddedLength > data.count else { throw .paddingTooSmall(dataLength: data.count, paddedLength: paddedLength) }
        var out = SecureBytes(zeros: paddedLength)
        data.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                if src.count > 0 { dst.baseAddress!.copyMemory(from: src.baseAddress!, byteCount: src.count) }
                dst[src.count] = 0x80
            }
        }
        return out
    }

    /// The length of the data before its padding: trailing zeros are stripped and exactly one
    /// `0x80` must remain at the end; the padded buffer must also hold at least that byte.
    ///
    /// The scan covers every byte of the padded buffer and takes no branch on its contents (the last
    /// non-zero byte and its index are selected with masks), so its time depends only on the padded
    /// length, which is public. It accepts exactly what libsodium's `sodium_unpad` with the whole
    /// buffer as one block accepts (a differential test checks it); that call, which keeps its running
    /// length in a `volatile`, cost ≈ 2 % of a complete open.
    public static func unpaddedLength(of padded: SecureBytes) throws(CryptoError) -> Int {
        guard padded.count > 0 else { throw .invalidPadding }
        let found = padded.withUnsafeBytes { buf -> (valid: Bool, length: Int) in
            // One pass forwards: the index and value of the last non-zero byte, selected with masks.
            let bytes = buf.bindMemory(to: UInt8.self)
            var last: UInt = 0
            var lastByte: UInt = 0
            for i in 0..<bytes.count {
                let c = UInt(bytes[i])
                let nonZero = 0 &- ((c | (0 &- c)) >> UInt(UInt.bitWidth - 1))  // all ones when c != 0
                last = (last & ~nonZero) | (UInt(i) & nonZero)
                lastByte = (lastByte & ~nonZero) | (c & nonZero)
            }
            return (lastByte == 0x80, Int(last))
        }
        guard found.valid else { throw .invalidPadding }
        return found.length
    }
}

extension ISO7816Padding {
    /// libsodium's `sodium_unpad` over the whole buffer: the reference the tests compare
    /// `unpaddedLength(of:)` with.
    static func referenceUnpaddedLength(of padded: SecureBytes) -> Int? {
        guard padded.count > 0 else { return nil }
        var length = 0
        let rc = padded.withUnsafeBytes { buf in
            sodium_unpad(&length, buf.baseAddress!.assumingMemoryBound(to: UInt8.self), buf.count, buf.count)
        }
        return rc == 0 ? length : nil
    }
}
