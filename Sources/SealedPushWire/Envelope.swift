public import SealedPushCrypto

/// Constants of wire format v1.
public enum WireFormat {
    /// The envelope version byte.
    public static let version: UInt8 = 0x01
    /// The largest APNs payload, in bytes as serialized.
    public static let maxPayloadBytes = 4096
    /// The key of the base64 envelope in the APNs payload.
    public static let encryptedDataKey = "ENCRYPTED_DATA"
    /// Padding buckets of the default policy.
    public static let paddingBuckets = [256, 512, 1024, 2048]
    /// Bytes before the sealed box: version (1) and recipient key id (8).
    public static let envelopeHeaderBytes = 1 + KeyID.byteCount
    /// The shortest acceptable envelope: header, sealed-box overhead and one padded byte.
    public static let minimumEnvelopeBytes = envelopeHeaderBytes + SealedBox.overhead + 1
    /// The signature domain-separation prefix.
    public static let signatureContext: [UInt8] = Array("SealedPush-v1-sig".utf8) + [0x00]
    /// Default allowed clock skew, seconds.
    public static let defaultClockSkewSeconds: Int64 = 300

    /// Length of standard base64 with padding for `n` bytes.
    public static func base64Length(ofByteCount n: Int) -> Int { (n + 2) / 3 * 4 }
}

/// The bytes inside `ENCRYPTED_DATA`: version, recipient key id, sealed box.
public struct Envelope: Sendable, Equatable {
    /// The recipient's key id (not authenticated; used to pick the key).
    public let keyID: KeyID
    /// `crypto_box_seal(padded_inner, recipient_pk)`.
    public let sealedBox: [UInt8]

    /// An envelope from its parts.
    public init(keyID: KeyID, sealedBox: [UInt8]) {
        self.keyID = keyID
        self.sealedBox = sealedBox
    }

    /// The envelope bytes: `0x01 || key id || sealed box`.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(WireFormat.envelopeHeaderBytes + sealedBox.count)
        out.append(WireFormat.version)
        out.append(contentsOf: keyID.bytes)
        out.append(contentsOf: sealedBox)
        return out
    }

    /// The envelope as strict base64, the value of `ENCRYPTED_DATA`.
    public var base64: String { Base64.encodePublic(bytes) }

    /// Parses the value of `ENCRYPTED_DATA` (checks of §5 step 1).
    public init(base64 text: String) throws(OpenFailure) {
        let raw: [UInt8]
        do { raw = try Base64.decodePublic(text) } catch {
            throw OpenFailure(.malformedPayload, "ENCRYPTED_DATA is not strict base64")
        }
        try self.init(bytes: raw)
    }

    /// Parses raw envelope bytes (checks of §5 step 1).
    public init(bytes raw: [UInt8]) throws(OpenFailure) {
        guard raw.count >= WireFormat.minimumEnvelopeBytes else {
            throw OpenFailure(.malformedPayload, "envelope is \(raw.count) bytes, shorter than the minimum \(WireFormat.minimumEnvelopeBytes)")
        }
        guard raw[0] == WireFormat.version else {
            throw OpenFailure(.unsupportedVersion, "envelope version \(raw[0]) is not supported (this receiver reads version 1)")
        }
        keyID = try! KeyID(rawBytes: raw[1..<WireFormat.envelopeHeaderBytes])  // exactly 8 bytes by construction
        sealedBox = Array(raw[WireFormat.envelopeHeaderBytes...])
    }
}

/// How a sender chooses the padded length P.
public enum PaddingPolicy: String, Sendable, Codable, CaseIterable {
    /// The smallest of 256, 512, 1024, 2048 that is larger than the inner message and fits; else the largest that fits.
    case bucket
    /// P = inner length + 1: no length hiding.
    case none
    /// The largest P that fits the payload.
    case max

    /// The padded length for an inner message of `innerLength` bytes when the payload without its
    /// `ENCRYPTED_DATA` value takes `payloadOverhead` bytes; `nil` when even the minimal envelope does not fit.
    public func paddedLength(innerLength: Int, payloadOverhead: Int) -> Int? {
        let largest = PaddingPolicy.largestPaddedLength(payloadOverhead: payloadOverhead)
        guard innerLength + 1 <= largest else { return nil }
        switch self {
        case .none: return innerLength + 1
        case .max: return largest
        case .bucket:
            return WireFormat.paddingBuckets.first { $0 > innerLength && $0 <= largest } ?? largest
        }
    }

    /// The largest P such that the whole payload stays within 4096 bytes.
    public static func largestPaddedLength(payloadOverhead: Int) -> Int {
        let base64Budget = WireFormat.maxPayloadBytes - payloadOverhead
        guard base64Budget > 0 else { return 0 }
        let envelopeBudget = base64Budget / 4 * 3
        return envelopeBudget - WireFormat.envelopeHeaderBytes - SealedBox.overhead
    }
}
