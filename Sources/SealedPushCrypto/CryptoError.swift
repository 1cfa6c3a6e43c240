/// Every failure the crypto module reports; no case ever carries secret material.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key, nonce or other fixed-size input had the wrong length.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// A sealed box, AEAD ciphertext or secret box did not authenticate (wrong key or modified bytes).
    case authenticationFailed
    /// An Ed25519 signature did not verify against the given public key and message.
    case invalidSignature
    /// Text was not strict RFC 4648 base64 (standard alphabet, `=` padding, no whitespace).
    case invalidBase64
    /// Text was not an even-length string of hexadecimal digits.
    case invalidHex
    /// ISO/IEC 7816-4 padding was missing or malformed.
    case invalidPadding
    /// A padded length was too small to hold the data and its `0x80` marker.
    case paddingTooSmall(dataLength: Int, paddedLength: Int)
    /// libsodium reported an internal failure (for example a low-order public key).
    case operationFailed(String)

    /// A sentence saying what happened and what to do about it.
    public var description: String {
        switch self {
        case let .invalidLength(what, expected, actual):
            return "\(what) must be \(expected) bytes but is \(actual); check that the value was not truncated or taken from another field"
        case .authenticationFailed:
            return "the ciphertext did not authenticate: it was modified, truncated, or made for a different key"
        case .invalidSignature:
            return "the signature does not verify: the signed bytes were changed or signed by another key"
        case .invalidBase64:
            return "the text is not strict base64 (RFC 4648 standard alphabet, '=' padding, no whitespace)"
        case .invalidHex:
            return "the text is not hexadecimal (an even number of 0-9a-f digits)"
        case .invalidPadding:
            return "the padding is malformed: expected data, one 0x80 byte, then only zero bytes"
        case let .paddingTooSmall(dataLength, paddedLength):
            return "cannot pad \(dataLength) bytes to \(paddedLength): the padded length must exceed the data length"
        case let .operationFailed(operation):
            return "libsodium could not complete \(operation); the input key may be invalid (low order or malformed)"
        }
    }
}
