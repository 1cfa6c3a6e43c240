#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Testing
import SealedPushCrypto
import SealedPushWire

/// The device key record's `reveal` member (reveal v1 §1): exported, read back, checked as `key_id` is.
@Suite("Reveal key record")
struct RevealRecordTests {
    static func record() -> DeviceKeyRecord {
        DeviceKeyRecord(publicKey: BoxKeyPair.generate().publicKey, createdAt: Date(timeIntervalSince1970: 1_800_000_000),
                        reveal: RevealKeyRecord(publicKey: BoxKeyPair.generate().publicKey))
    }

    /// The record's JSON object with `edit` applied to its `reveal` member.
    static func editedReveal(_ record: DeviceKeyRecord, _ edit: (inout JSONObject) -> Void) -> [UInt8] {
        var o = record.jsonObject
        guard case var .object(reveal)? = o["reveal"] else { return [] }
        edit(&reveal)
        o["reveal"] = .object(reveal)
        return JSON.serialize(.object(o))
    }

    @Test("the reveal member is exported as {key_id, public_key} after the device key's members, and read back")
    func exportShape() throws {
        let r = Self.record()
        let o = r.jsonObject
        #expect(o.members.map(\.key) == ["type", "version", "key_id", "public_key", "created_at", "reveal"])
        guard case let .object(reveal)? = o["reveal"] else { Issue.record("no reveal member"); return }
        #expect(reveal.members.map(\.key) == ["key_id", "public_key"])
        #expect(reveal["key_id"]?.stringValue == r.reveal?.keyID.hex)
        let pk = try Base64.decode(reveal["public_key"]?.stringValue ?? "")
        #expect(pk.count == 32)
        #expect(KeyID(publicKey: pk).hex == reveal["key_id"]?.stringValue, "key_id is derived from public_key")
        #expect(try DeviceKeyRecord(jsonBytes: r.jsonBytes) == r)
        #expect(r.reveal?.keyID != r.keyID)
    }

    @Test("a record without reveal reads as before and has no reveal key")
    func withoutReveal() throws {
        let plain = DeviceKeyRecord(publicKey: BoxKeyPair.generate().publicKey, createdAt: nil)
        #expect(plain.jsonObject["reveal"] == nil)
        #expect(try DeviceKeyRecord(jsonBytes: plain.jsonBytes).reveal == nil)
        #expect(Self.record().withReveal(nil).jsonObject["reveal"] == nil)
    }

    @Test("a reveal key_id that differs from the id of reveal.public_key is refused, naming the reveal member")
    func mismatch() throws {
        let r = Self.record()
        let other = KeyID(publicKey: BoxKeyPair.generate().publicKey.bytes)
        let bytes = Self.editedReveal(r) { $0["key_id"] = .string(other.hex) }
        #expect(throws: KeyRecordError.revealKeyIDMismatch(recorded: other.hex, derived: r.reveal!.keyID.hex)) {
            try DeviceKeyRecord(jsonBytes: bytes)
        }
        #expect(KeyRecordError.revealKeyIDMismatch(recorded: other.hex, derived: r.reveal!.keyID.hex).description.contains("reveal member"))
        // Swapping in another public key without its id is refused the same way.
        let swapped = Self.editedReveal(r) { $0["public_key"] = .string(Base64.encode(BoxKeyPair.generate().publicKey.bytes)) }
        #expect {
            try DeviceKeyRecord(jsonBytes: swapped)
        } throws: { error in
            guard case .revealKeyIDMismatch? = error as? KeyRecordError else { return false }
            return true
        }
    }

    @Test("malformed reveal members are refused as invalid members", arguments: [
        ("not an object", "reveal"), ("no key_id", "reveal.key_id"), ("short key", "reveal.public_key"), ("upper-case id", "reveal.key_id"),
    ])
    func malformed(_ damage: String, _ member: String) throws {
        let r = Self.record()
        var bytes: [UInt8]
        switch damage {
        case "not an object":
            var o = r.jsonObject
            o["reveal"] = .string(r.reveal!.keyID.hex)
            bytes = JSON.serialize(.object(o))
        case "no key_id": bytes = Self.editedReveal(r) { $0["key_id"] = nil }
        case "short key": bytes = Self.editedReveal(r) { $0["public_key"] = .string(Base64.encode([UInt8](repeating: 9, count: 31))) }
        default: bytes = Self.editedReveal(r) { $0["key_id"] = .string(r.reveal!.keyID.hex.uppercased()) }
        }
        #expect(throws: KeyRecordError.invalidMember(member)) { try DeviceKeyRecord(jsonBytes: bytes) }
    }

    @Test("Codable carries the reveal member with the same checks")
    func codable() throws {
        let r = Self.record()
        let encoded = try JSONEncoder().encode(r)
        #expect(try JSONDecoder().decode(DeviceKeyRecord.self, from: encoded) == r)
        #expect(try DeviceKeyRecord(jsonBytes: [UInt8](encoded)) == r)
        let bad = Self.editedReveal(r) { $0["key_id"] = .string(KeyID(publicKey: BoxKeyPair.generate().publicKey.bytes).hex) }
        #expect {
            try JSONDecoder().decode(DeviceKeyRecord.self, from: Data(bad))
        } throws: { error in
            guard case let .dataCorrupted(context)? = error as? DecodingError,
                  case .revealKeyIDMismatch? = context.underlyingError as? KeyRecordError else { return false }
            return true
        }
    }
}
