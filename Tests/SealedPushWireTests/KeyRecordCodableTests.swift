#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Testing
import SealedPushCrypto
import SealedPushWire

/// Key records decode from and encode to server frameworks' `Codable` paths with the same checks as
/// `init(jsonBytes:)`.
@Suite("Key records: Codable")
struct KeyRecordCodableTests {
    /// An object's members by name.
    static func members(_ data: Data) throws -> [String: JSONValue] {
        guard case let .object(o) = try JSON.parse([UInt8](data)) else { return [:] }
        return Dictionary(uniqueKeysWithValues: o.members.map { ($0.key, $0.value) })
    }

    @Test("a device record round-trips through JSONEncoder/JSONDecoder to the same members")
    func deviceRoundTrip() throws {
        let record = DeviceKeyRecord(publicKey: BoxKeyPair.generate().publicKey, createdAt: Date(timeIntervalSince1970: 1_800_000_000))
        let encoded = try JSONEncoder().encode(record)
        #expect(try Self.members(encoded) == Self.members(Data(record.jsonBytes)), "the same members, in any order")
        #expect(try JSONDecoder().decode(DeviceKeyRecord.self, from: encoded) == record)
        #expect(try JSONDecoder().decode(DeviceKeyRecord.self, from: Data(record.jsonBytes)) == record)
    }

    @Test("a sender record round-trips, and a device record is refused as one")
    func senderRoundTrip() throws {
        let record = SenderKeyRecord(publicKey: SigningKeyPair.generate().publicKey)
        let encoded = try JSONEncoder().encode(record)
        #expect(try JSONDecoder().decode(SenderKeyRecord.self, from: encoded) == record)
        let device = DeviceKeyRecord(publicKey: BoxKeyPair.generate().publicKey, createdAt: nil)
        #expect {
            try JSONDecoder().decode(SenderKeyRecord.self, from: Data(device.jsonBytes))
        } throws: { error in
            guard case let .dataCorrupted(context)? = error as? DecodingError else { return false }
            return (context.underlyingError as? KeyRecordError) == .wrongType(expected: SenderKeyRecord.type)
        }
    }

    @Test("decoding checks the key id against the public key, as init(jsonBytes:) does")
    func keyIDMismatchRefused() throws {
        let a = BoxKeyPair.generate().publicKey, b = BoxKeyPair.generate().publicKey
        var o = DeviceKeyRecord(publicKey: a, createdAt: nil).jsonObject
        o["key_id"] = .string(b.keyID.hex)
        #expect {
            try JSONDecoder().decode(DeviceKeyRecord.self, from: Data(JSON.serialize(.object(o))))
        } throws: { error in
            guard case let .dataCorrupted(context)? = error as? DecodingError,
                  case .keyIDMismatch? = context.underlyingError as? KeyRecordError else { return false }
            return true
        }
    }
}
