import CSodium

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
    /// `0x80` must remain at the end (`sodium_unpad` with the whole buffer as one block, so the
    /// scan runs in constant time over the padded length).
    public static func unpaddedLength(of padded: SecureBytes) throws(CryptoError) -> Int {
        guard padded.count > 0 else { throw .invalidPadding }
        var length = 0
        let rc = padded.withUnsafeBytes { buf in
            sodium_unpad(&length, buf.baseAddress!.assumingMemoryBound(to: UInt8.self), buf.count, buf.count)
        }
        guard rc == 0 else { throw .invalidPadding }
        return length
    }
}
